"""A hostile fleet member for the tests: `python fleet_fake_member.py MODE fleet-member`, run by the controller
over SSH as its --remote-workbench.

It runs the real `workbench fleet-member` beneath it and passes every line both ways, so the member logs in,
prepares and copies for real. On the client the controller calls HOSTILE_HOST (read from the job line), right
after passing on that member's first row, it also writes the MODE's hostile line (or stream) to the controller;
on every other client it only passes lines on. Every load is bounded: the largest line is 10 MB, stderr 64 MiB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

HOSTILE_HOST = "farbox2"
ESCAPES = "\x1b]52;c;aGk=\x07\x1b[2J\x9b31m[bold red]pwned[/] [/]\u202e"
STDERR_BYTES = 64 * 1024 * 1024


def _hostile_strings(value: Any) -> Any:
    if isinstance(value, str):
        return ESCAPES + value
    if isinstance(value, dict):
        # the event and the direction are names of the protocol: any other text is refused before its strings
        return {k: (v if k in ("event", "direction") else _hostile_strings(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostile_strings(v) for v in value]
    return value


def hostile(mode: str, row_line: bytes) -> bytes:
    """What MODE writes after the first row (`row_line`, the real one, without its newline)."""
    row = json.loads(row_line)
    if mode == "wait-without-step":
        return b'{"event":"wait"}\n'
    if mode == "step-of-strings":
        return b'{"event":"wait","step":["x"]}\n'
    if mode == "infinite-number":
        return b'{"event":"together","direction":"upload","started_after_go_s":0,"seconds":1e400,"bytes":1}\n'
    if mode == "nan":
        return b'{"event":"baseline","baseline":{"rtt_ms":NaN}}\n'
    if mode == "deep":
        return b'{"event":"begin","meta":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    if mode == "bytes-zz":
        row["row"]["bytes"] = "zz"
        return json.dumps(row).encode() + b"\n"
    if mode == "unknown-event":
        return b'{"event":"take-over","please":true}\n'
    if mode == "ten-megabytes":
        return b'{"event":"error","message":"' + b"x" * 10_000_000 + b'"}\n'
    if mode == "binary":
        return bytes(range(256)) * 16 + b"\n"
    if mode == "escapes":
        return json.dumps(_hostile_strings(row)).encode() + b"\n"
    if mode == "second-row":
        return row_line + b"\n"
    if mode == "foreign-row":
        row["row"]["client"] = "evil"
        return json.dumps(row).encode() + b"\n"
    raise SystemExit(f"unknown mode {mode}")


def main() -> int:
    mode = sys.argv[1]
    child = subprocess.Popen(
        [str(Path(sys.executable).with_name("workbench")), "fleet-member"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    me: dict[str, str] = {}
    job_seen = threading.Event()

    def downstream() -> None:  # the controller's lines to the member
        assert child.stdin is not None
        for line in sys.stdin.buffer:
            if not job_seen.is_set():
                me["host"] = str(json.loads(line).get("client_host"))
                job_seen.set()
            try:
                child.stdin.write(line)
                child.stdin.flush()
            except OSError:
                break
        job_seen.set()
        child.stdin.close()

    threading.Thread(target=downstream, daemon=True).start()
    out = sys.stdout.buffer
    done = False
    for line in child.stdout:
        out.write(line)
        out.flush()
        if done or b'"event": "row"' not in line or not job_seen.wait(5) or me.get("host") != HOSTILE_HOST:
            continue
        done = True
        if mode == "no-newline":
            out.write(b'{"event": "wait", "step": [3, 0')
            out.flush()
            child.kill()
            os._exit(0)
        if mode == "endless-stderr":
            chunk = (ESCAPES + "noise ").encode() * 4096
            for _ in range(STDERR_BYTES // len(chunk)):
                sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.write(b"\nthe last words\n")
            sys.stderr.flush()
            child.kill()
            os._exit(1)
        out.write(hostile(mode, line.rstrip(b"\n")))
        out.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
