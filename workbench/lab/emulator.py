"""The lab's handle on its link emulator: start `python -m workbench.lab.linkemu`, talk to it, stop it.

The emulator runs as its own process (linkemu.py) so the measuring process is never disturbed; this
side sends it one-line commands (stats, delay, loss) on stdin and reads one JSON reply per line on
stdout. Its stderr goes to a temporary file, quoted when it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path
from typing import IO, Protocol

from workbench.lab.linkemu import EmuConfig
from workbench.shared.errors import WorkbenchError

READY_TIMEOUT = 10.0


class LinkDriver(Protocol):
    """What the lab asks of whatever carries its link: the delay line (Emulator) or a kernel link."""

    def ask(self, command: str, timeout: float = 5.0) -> dict: ...

    def stats(self) -> dict: ...

    def log_tail(self) -> str: ...


class Emulator:
    """One linkemu process: `start` it with a config, `ask` it commands, read its `stats`, `stop` it."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lock = threading.Lock()

    def start(self, cfg: EmuConfig) -> list[str]:
        """Launch the emulator and wait until its TUN devices exist; returns its notes on the link."""
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 -- closed in stop(), it outlives this call
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.lab.linkemu", "--config", "-", f"--owner={cfg.owner_pid}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            start_new_session=True,  # Ctrl-C reaches the lab, which then stops the forwarder in order
        )
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(asdict(cfg)) + "\n").encode())
        self._proc.stdin.flush()
        reply = self._read_reply(READY_TIMEOUT)
        if not reply.get("ready"):
            raise WorkbenchError(f"the link emulator failed to start: {reply.get('error', 'no reply')}")
        return list(reply.get("notes", []))

    def _read_reply(self, timeout: float) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        out = self._proc.stdout
        if not select.select([out], [], [], timeout)[0]:
            raise WorkbenchError(f"the link emulator did not answer within {timeout:.0f} s", self.log_tail())
        line = out.readline()
        if not line:
            raise WorkbenchError("the link emulator exited", self.log_tail())
        return json.loads(line)

    def ask(self, command: str, timeout: float = 5.0) -> dict:
        """Send one command (e.g. "stats", "delay 0.0014", "loss 0") and return the emulator's reply."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                raise WorkbenchError("the link emulator is not running", self.log_tail())
            assert self._proc.stdin is not None
            self._proc.stdin.write(command.encode() + b"\n")
            self._proc.stdin.flush()
            return self._read_reply(timeout)

    def stats(self) -> dict:
        """The emulator's counters: packets, bytes (on the wire), drops, max queue, CPU and wall seconds."""
        return self.ask("stats")

    def log_tail(self) -> str:
        """The emulator's last line on stderr, as a hint for an error ("" when it said nothing)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        return f"emulator said: {lines[-1]}" if lines else ""

    def stop(self) -> None:
        """Close its stdin, terminate it (kill after 3 s) and drop its log; safe to call more than once."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=3)
            with contextlib.suppress(OSError):
                if proc.stdout is not None:
                    proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
