"""A fleet's client side: `workbench fleet-member`, run by the controller over SSH on each client host.

It speaks JSON lines: first it says hello (protocol and version, so the controller can refuse a mismatched
workbench before sending anything), then reads one job line (the plan's settings and how to reach the server,
with its login), then runs the plan as `workbench run` would, except that each step waits for the controller's
"go" (core.fleet.Barrier) and every copy, row and baseline is sent back as it is measured. Nothing is kept on the
client: no database (the controller stores the run), downloads in a temporary directory as always.

Its stdin is the controller's SSH channel: when it ends (the controller finished, failed, was interrupted, or the
connection dropped) the member interrupts itself, so the run unwinds as on Ctrl-C: the rows finished so far
were sent as each finished, the copy in progress is dropped, its uploads are removed, and nothing is left
running on the client. Waiting at a step, it also gives up after a minute without a line from the controller
(which pings every ten seconds), for a controller whose host vanished without closing the connection.

The job's password and keys arrive on stdin only; the SSH client key and the server's host keys, which the
OpenSSH programs read from files, go to a private 0700 directory removed on exit.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from workbench import __version__
from workbench.core import fleet_scratch
from workbench.core.fleet import PROTOCOL
from workbench.core.fleet_messages import clean_text
from workbench.core.observe import TOGETHER_STEP
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.shared import signals
from workbench.shared.errors import ExitCode, Terminated, UsageError, WorkbenchError

JOB_TIMEOUT_S = 60.0  # from hello to the job line
SILENCE_S = 60.0  # waiting at a step: the controller pings every PING_S; this long without a line, it is gone
SETTINGS_NOT_SENT = ("host", "target", "credentials", "files", "ports")  # the member's own or the job's


class _Channel:
    """The JSON lines to the controller (stdout, which nothing else may write to) and the lines from it."""

    def __init__(self, out: IO[str], inp: IO[str]) -> None:
        self._out = out
        self._lock = threading.Lock()
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.finished = threading.Event()  # set once the run ended: the channel's end then interrupts nothing
        self.ended = threading.Event()  # the controller closed the channel
        self._reader = threading.Thread(target=self._read, args=(inp,), name="fleet-stdin", daemon=True)
        self._reader.start()

    def _read(self, inp: IO[str]) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in inp:
                self.lines.put(line.strip())
        self.ended.set()
        self.lines.put(None)
        if not self.finished.is_set():
            # mid-copy too: the controller is gone, so stop now rather than at the next step
            os.kill(os.getpid(), signal.SIGINT)

    def send(self, event: str, **data: Any) -> None:
        line = json.dumps(_sendable({"event": event, **data}), allow_nan=False)
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._out.write(line + "\n")
            self._out.flush()

    def next_line(self, timeout_s: float | None = None) -> str | None:
        """The next line from the controller; None when the channel ended (or the timeout passed)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                return None
            # short waits: a signal (SIGTERM, SIGHUP) is handled between them
            with contextlib.suppress(queue.Empty):
                return self.lines.get(timeout=left)


def _sendable(value: Any) -> Any:
    """`value` as the controller accepts it (workbench.core.fleet_messages): strings without control characters,
    numbers finite (a figure that is not is sent as null)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {clean_text(str(k)): _sendable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_sendable(v) for v in value]
    return value


class Gate:
    """The runner's CopyGate over the channel: each step waits for "go"; the end of the channel interrupts."""

    def __init__(self, channel: _Channel) -> None:
        self._channel = channel
        self._go_perf_s = 0.0

    def wait(self, step: tuple[int, ...]) -> None:
        self._channel.send("wait", step=list(step))
        while True:
            line = self._channel.next_line(SILENCE_S)
            if line == "go":
                break
            if line == "ping":
                continue
            if line is None and self._channel.ended.is_set():
                # The channel's end: its reader interrupts this process (once, so the cleanup that follows is not
                # cut short by a second interrupt); wait for that, bounded.
                time.sleep(5.0)
            # silence: the controller's host is gone without closing the connection; or a line of no meaning
            raise KeyboardInterrupt
        self._go_perf_s = time.perf_counter()

    def copied(self, step: tuple[int, ...], row: tuple[str, str, str], sample: Sample, started_perf_s: float) -> None:
        self._channel.send(
            "copy",
            step=list(step),
            row=list(row),
            started_after_go_s=max(0.0, started_perf_s - self._go_perf_s),
            sample={**asdict(sample), "intervals": list(sample.intervals), "tcp": None},
        )

    def together(self, plan: Any) -> None:
        """Each way a step of its own, so every client's probe starts at the same "go"."""
        from workbench.probe import client as probe_client

        for index, direction in enumerate(probe_client.DIRECTIONS):
            self.wait((TOGETHER_STEP, index))
            if plan is None:
                continue
            target = plan.target
            try:
                probe = probe_client.measure(
                    target.host, target.port("tcp"), target.credentials.password, direction, plan.tcp_duration
                )
            except WorkbenchError as exc:
                self._channel.send("together", direction=direction, error=exc.one_line())
                continue
            # The probe times its receiver from first to last byte; the call ends a reply after the last byte, so
            # the measured span is placed that much early (a few ms): the span ends when the call returns.
            ended_after_go_s = time.perf_counter() - self._go_perf_s
            self._channel.send(
                "together",
                direction=direction,
                started_after_go_s=max(0.0, ended_after_go_s - probe.seconds),
                seconds=probe.seconds,
                bytes=probe.bytes,
            )


class _StreamRecorder:
    """The runner's Recorder: every row and the baseline go to the controller; nothing is stored here.

    Its unfinished runs are the scratch directories earlier fleet runs left on this server, when the controller
    sent them (workbench.core.fleet_scratch): the runner's leftovers pass removes them, and each removal goes
    back to the controller, which records it."""

    def __init__(self, channel: _Channel, left_scratches: Any = None) -> None:
        self._channel = channel
        self._left = fleet_scratch.as_runs(left_scratches)

    def unfinished_runs(self) -> list[tuple[int, dict[str, Any]]]:
        return self._left

    def update_meta(self, run_id: int, meta: Mapping[str, Any]) -> None:
        """Nothing: the controller keeps the run's metadata."""

    def record_cleanup(self, run_id: int, keys: Mapping[str, Any]) -> None:
        scratches = (keys.get("fleet") or {}).get("scratches") or {}
        # settled: removed, or left alone for good (workbench.core.scratch_record); either way never tried again
        removed = [
            h for h, e in scratches.items() if isinstance(e, Mapping) and (e.get("removed") or e.get("left_alone"))
        ]
        self._channel.send("cleaned", run_id=run_id, hosts=removed)

    def begin(self, meta: Mapping[str, Any], label: str | None, link: Any, window_sweep: Any) -> int:
        self._channel.send("begin", meta=dict(meta))
        return 1

    def baseline(self, run_id: int, baseline: Baseline) -> None:
        self._channel.send("baseline", baseline=baseline.to_json())

    def row(self, run_id: int, index: int, row: Result) -> None:
        self._channel.send("row", row=row.to_json())

    def finish(self, run: Run) -> None:
        self._channel.send("finish", warnings=list(run.warnings), meta=dict(run.meta))


def _plan_and_far(job: Mapping[str, Any], keys_dir: Path) -> tuple[Any, Any]:
    """The plan and, for a server given by URL, its far host (None: workbench's own servers, reached directly)."""
    from workbench.core import stock
    from workbench.core.config import draft_plan, resolve, url_plan
    from workbench.shared.login import ENV_PASSWORD, ENV_USER
    from workbench.shared.target import target_from_hello

    settings = {k: v for k, v in dict(job.get("settings") or {}).items() if k not in SETTINGS_NOT_SENT}
    # as the controller resolved them: what it was given counts as typed here (a config's --protocols is kept)
    resolved = resolve("fleet", settings, typed=set(job.get("explicit") or ()))
    if job.get("served"):
        served = job["served"]
        complete = draft_plan(resolved)
        return complete(target_from_hello(served, str(served["host"]), keys_dir)), None
    url = job.get("url")
    if not isinstance(url, str):
        raise UsageError("the fleet job names no server", "the controller and this workbench do not match")
    login = job.get("login") or {}
    # The login resolved on the controller (its prompt, netrc or keyring) is this process's own: not on a command
    # line, not in a file, gone when the member ends.
    if login.get("user"):
        os.environ[ENV_USER] = str(login["user"])
    if login.get("password") is not None:
        os.environ[ENV_PASSWORD] = str(login["password"])
    plan = url_plan(resolved)
    return stock.prepare(url, plan, prompt=False, iperf3=job.get("iperf3"))


def serve_member(inp: IO[str] | None = None) -> int:
    """Run one fleet member on this host; its exit status."""
    from workbench.core import runner

    # stdout is the channel: whatever else would print there (a library, a child process) goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    channel = _Channel(out, inp or sys.stdin)
    # sshd ends a session by closing its pipes; a hangup or SIGTERM unwinds the run as for every command
    signals.install()
    keys_dir = Path(tempfile.mkdtemp(prefix="workbench-fleet-"))  # 0700
    try:
        # inside: a signal from the moment the controller knows this member is there unwinds as below
        channel.send("hello", protocol=PROTOCOL, version=__version__, pid=os.getpid())
        line = channel.next_line(JOB_TIMEOUT_S)
        if not line:
            return int(ExitCode.INTERRUPTED)
        job = json.loads(line)
        if job.get("protocol") != PROTOCOL:
            raise UsageError(f"the controller speaks {job.get('protocol')!r}, this member {PROTOCOL}")
        plan, far = _plan_and_far(job, keys_dir)
        recorder = _StreamRecorder(channel, job.get("left_scratches"))
        run = runner.execute(plan, recorder, far=far, label=job.get("label"), gate=Gate(channel))
        channel.finished.set()
        channel.send("done", failed_rows=len(runner.failed_rows(run)))
        return 0
    except WorkbenchError as exc:
        channel.send("error", message=exc.one_line(), exit_code=int(exc.exit_code))
        return int(exc.exit_code)
    except KeyboardInterrupt:
        channel.send("error", message="stopped: the controller ended the session", exit_code=130)
        return int(ExitCode.INTERRUPTED)
    except Terminated as exc:
        channel.send("error", message=f"stopped: {signals.last_words(exc)}", exit_code=int(exc.exit_code))
        return int(exc.exit_code)
    except (ValueError, KeyError) as exc:
        channel.send("error", message=f"a malformed fleet job: {exc}", exit_code=int(ExitCode.USAGE))
        return int(ExitCode.USAGE)
    finally:
        channel.finished.set()
        shutil.rmtree(keys_dir, ignore_errors=True)
        with contextlib.suppress(OSError, ValueError):
            out.close()
