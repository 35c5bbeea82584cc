"""Run a native client (curl, sftp, smbclient, rsync) as a bounded subprocess and watch its progress.

Native clients are the references that tell protocol overhead from Python-client overhead. They
cannot call `progress()`, so progress is estimated from outside: the growing size of the local file
for downloads, and the bytes the process has read (/proc/PID/io `rchar`) for uploads. Secrets go in
through the environment or stdin, never argv.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypedDict

from workbench.protocols.base import Progress
from workbench.shared import childcpu
from workbench.shared.errors import NetworkError, WorkbenchError


class Watch(TypedDict, total=False):
    """run_native's ways of seeing a copy move besides the tool's output, as a client's _run passes them on."""

    watch_file: Path | None
    watch_reads: bool
    watch: Callable[[], int | None] | None


class WatchAndInput(Watch, total=False):
    """Watch, and what the tool reads on its standard input."""

    stdin_text: str | None


POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str
    reported: int = 0  # bytes already passed to progress()


def _proc_rchar(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/io") as fh:
            for line in fh:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class _Watcher:
    """Turns an outside view (file size or bytes read) into progress() deltas, never exceeding `total`."""

    def __init__(self, progress: Progress, total: int | None) -> None:
        self.progress = progress
        self.total = total
        self.reported = 0

    def advance_to(self, seen: int) -> None:
        if self.total is not None:
            seen = min(seen, self.total)
        if seen > self.reported:
            self.progress(seen - self.reported)
            self.reported = seen

    def finish(self) -> None:
        if self.total is not None:
            self.advance_to(self.total)


_native_runs = 0  # tools run_native started in this process so far


def native_runs_started() -> int:
    """How many native tools run_native has started in this process: a copy that started one did its work in
    a child process, whose waits for a core this process does not see (its CPU: workbench.shared.childcpu)."""
    return _native_runs


def run_native(
    argv: Sequence[str],
    *,
    progress: Progress,
    total_bytes: int | None,
    timeout: float,
    watch_file: Path | None = None,
    watch_reads: bool = False,
    env: Mapping[str, str] | None = None,
    stdin_text: str | None = None,
    stall_timeout: float | None = None,
    cwd: Path | None = None,
    watch: Callable[[], int | None] | None = None,
    count_tree: bool = False,
) -> Completed:
    """Run argv to completion within `timeout` seconds, reporting progress as it goes.

    `watch_file`: report its growing size (downloads). `watch_reads`: report bytes the process reads
    (uploads; an over-estimate early on since it counts config reads too, clipped to total_bytes).
    `watch`: a callable returning bytes done so far (e.g. the size of a temp dir), when neither fits.
    `stall_timeout`: kill the process when no progress is seen for that long.
    `count_tree`: for a tool that leaves its own children unreaped (scp's ssh per remote file), run it in the
    client children's cgroup, so their CPU is counted (workbench.shared.childcpu; a little dearer to start).
    Progress is completed to `total_bytes` only when the process exits 0; with total_bytes None (a
    download of unknown size) the caller tops it up from what landed, using `Completed.reported`.
    """
    global _native_runs
    _native_runs += 1
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    # Output goes to temporary files, not pipes: a chatty client can never block on a full pipe, and
    # the wait below (_EndWatch) notices the exit at once instead of at the next poll.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # One decision per child: the preexec_fn it starts with says whether it joined (and is reaped with wait4).
        joiner = childcpu.preexec_join() if count_tree else None
        start = functools.partial(_start, argv, stdin_text is not None, out, err, full_env, cwd)
        try:
            proc = start(joiner)
        except subprocess.SubprocessError:
            if joiner is None:
                raise
            # the group refused it (gone, or no longer taking moves): without it from now on, counted by getrusage
            childcpu.drop()
            joiner = None
            proc = start(None)
        if joiner is not None:
            _joined.add(proc.pid)
        watcher = _Watcher(progress, total_bytes)
        try:
            _supervise(proc, argv[0], watcher, stdin_text, timeout, stall_timeout, watch, watch_file, watch_reads)
        finally:
            if not _reap(proc, block=False):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
                _reap(proc, block=True)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if proc.returncode == 0:
        watcher.finish()
    return Completed(proc.returncode, stdout, stderr, watcher.reported)


def _start(
    argv: Sequence[str],
    with_stdin: bool,
    out: IO[bytes],
    err: IO[bytes],
    env: Mapping[str, str],
    cwd: Path | None,
    joiner: Callable[[], object] | None,
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
            start_new_session=True,
            # into the client processes' cgroup before exec, so what the tool forks is counted too
            preexec_fn=joiner,
        )
    except FileNotFoundError as exc:
        raise WorkbenchError(f"{argv[0]} is not installed", "see 'workbench doctor'") from exc


def _supervise(
    proc: subprocess.Popen[bytes],
    name: str,
    watcher: _Watcher,
    stdin_text: str | None,
    timeout: float,
    stall_timeout: float | None,
    watch: Callable[[], int | None] | None,
    watch_file: Path | None,
    watch_reads: bool,
) -> None:
    """Feed stdin, then report progress every POLL_SECONDS until exit; raise on time-out or stall."""
    deadline = time.monotonic() + timeout
    last_change = time.monotonic()
    last_seen = -1
    if stdin_text is not None and proc.stdin is not None:
        # From a thread: a long command list (smbclient sets) is consumed as the copy goes, and a
        # blocking write here would suspend progress reports and the time limits meanwhile.
        threading.Thread(target=_feed, args=(proc.stdin, stdin_text.encode()), daemon=True).start()
    with _EndWatch(proc) as end:
        while True:
            if end.within(POLL_SECONDS):
                return
            now = time.monotonic()
            seen = watch() if watch is not None else _observe(proc.pid, watch_file, watch_reads)
            if seen is not None:
                if seen != last_seen:
                    last_seen, last_change = seen, now
                watcher.advance_to(seen)
            if now > deadline:
                raise NetworkError(f"{name} did not finish within {timeout:.0f} s", "the link or server stalled")
            if stall_timeout and seen is not None and now - last_change > stall_timeout:
                raise NetworkError(f"{name} made no progress for {stall_timeout:.0f} s", "the server stopped?")


class _EndWatch:
    """Whether a child ends within a given time, seen the moment it ends (the copy's time stops there).

    Popen.wait(timeout) checks in growing sleeps (1, 2, 4, … up to 50 ms), so a child that ended just after a check
    was seen up to a sleep later: a 17 ms curl read as 32 ms, time that is neither the client's nor the link's.
    A pidfd (Linux 5.3+) becomes readable when the process ends: one per child, opened here and closed when it
    ends or the watch is left, and polled (select.select takes no descriptor from 1024 up). Elsewhere the
    sleeping wait is kept."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._fd: int | None = None
        self._poller = select.poll()
        with contextlib.suppress(AttributeError, OSError):  # no pidfd here (or out of descriptors)
            exit_fd = os.pidfd_open(proc.pid)
            try:
                self._poller.register(exit_fd, select.POLLIN)
            except BaseException:  # a pidfd nothing polls would read as a child that never ends
                os.close(exit_fd)
                raise
            self._fd = exit_fd

    def __enter__(self) -> _EndWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def within(self, seconds: float) -> bool:
        """Whether the child ends within `seconds` (reaping it when it does)."""
        proc = self.proc
        if self._fd is None:
            if proc.pid in _joined:  # reaped with wait4 only: one sleep, one check
                if _reap(proc, block=False):
                    return True
                time.sleep(seconds)
                return _reap(proc, block=False)
            try:
                proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                return False
            return True
        if not self._poller.poll(seconds * 1000):
            return False
        self.close()
        _reap(proc, block=True)
        return True


_joined: set[int] = set()  # run_native's children in the client children's cgroup, not yet reaped


def _reap(proc: subprocess.Popen[bytes], *, block: bool) -> bool:
    """Whether `proc` has ended, reaping it if so (waiting for it if `block`). A child in the client children's
    cgroup is reaped with wait4, whose CPU figure childcpu must know: getrusage now counts it too."""
    if proc.pid not in _joined or proc.returncode is not None:
        return (proc.wait() if block else proc.poll()) is not None
    status = childcpu.reap(proc.pid, block=block)
    if status is None:
        return False
    _joined.discard(proc.pid)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return True


def _feed(stream: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):
        stream.write(data)
        stream.close()


def _observe(pid: int, watch_file: Path | None, watch_reads: bool) -> int | None:
    if watch_file is not None:
        try:
            return watch_file.stat().st_size
        except OSError:
            return 0
    if watch_reads:
        return _proc_rchar(pid)
    return None


def last_line(text: str) -> str:
    """The last non-empty line of a native client's output, for one-line error messages."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""
