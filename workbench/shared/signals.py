"""SIGTERM and SIGHUP end a workbench process the way Ctrl-C does: they raise, so every `finally:` runs.

A closed terminal or a dropped SSH session sends SIGHUP; its default action kills Python outright, leaving a
stock server's scratch directory (possibly gigabytes on a NAS), mounts and servers behind. `install()` is
the one place both are caught, for every command (`main` calls it first); the lab's own handler
(workbench/lab/lifecycle.py) uses `TERMINATING` and `exit_code_for` from here too.

Exit codes: SIGTERM 143 and SIGHUP 129 (128 + the signal's number, as a shell reports a process killed by
it), each with its own last line on stderr ("terminated", "hung up").
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, TextIO, TypeVar

from workbench.shared.errors import ExitCode, Terminated

TERMINATING = (signal.SIGTERM, signal.SIGHUP)
# What writing to a terminal that hung up fails with (EIO; ENXIO on some systems): the kernel switches the
# terminal off before it sends SIGHUP, so a write can fail before the signal's handler runs.
HUNG_UP_ERRNOS = (errno.EIO, errno.ENXIO)
T = TypeVar("T")


class HungUp(Terminated):
    """SIGHUP arrived (the terminal closed, the SSH session dropped): unwinds exactly like SIGTERM."""


def exit_code_for(signum: int) -> ExitCode:
    return ExitCode.HANGUP if signum == signal.SIGHUP else ExitCode.TERMINATED


def last_words(exc: Terminated) -> str:
    """The last line a process ended by `exc` prints on stderr."""
    return "hung up" if isinstance(exc, HungUp) else "terminated"


def exit_code_of(exc: Terminated) -> ExitCode:
    return ExitCode.HANGUP if isinstance(exc, HungUp) else ExitCode.TERMINATED


def ignore_further() -> None:
    """Once one arrived, the next must not cut short the cleanup the first began (SIGKILL still works)."""
    for sig in TERMINATING:
        signal.signal(sig, signal.SIG_IGN)


def detach_terminal() -> None:
    """Point standard input, output and error at /dev/null where they are a terminal.

    After a hangup every write to the terminal fails (EIO): a progress bar or a last message written during
    the cleanup would raise there and skip the rest of it. Output redirected to a file or a pipe is kept.
    """
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for fd in (0, 1, 2):
                with contextlib.suppress(OSError):
                    if os.isatty(fd):
                        os.dup2(null, fd)
        finally:
            os.close(null)


class TerminalOutput:
    """A terminal's text stream (sys.stdout, sys.stderr) that, once the terminal hung up, goes to /dev/null
    instead of raising: a progress bar refreshing in a thread, or the cleanup's last message, must not turn a
    hangup into a failure (exit 1) or skip the rest of the cleanup. Anything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def _guarded(self, call: Callable[..., T], *args: Any) -> T | None:
        try:
            return call(*args)
        except OSError as exc:
            if exc.errno not in HUNG_UP_ERRNOS:
                raise
            detach_terminal()
            with contextlib.suppress(OSError):
                return call(*args)  # the same stream, now writing to /dev/null beneath
            return None

    def write(self, text: str) -> int:
        written = self._guarded(self.stream.write, text)
        return len(text) if written is None else written

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._guarded(self.stream.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def guard_terminal_output() -> None:
    """Wrap sys.stdout and sys.stderr in TerminalOutput where they are a terminal (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, TerminalOutput):
            continue
        with contextlib.suppress(AttributeError, OSError, ValueError):
            if stream.isatty():
                setattr(sys, name, TerminalOutput(stream))


def _on_signal(signum: int, frame: FrameType | None) -> None:
    ignore_further()
    if signum == signal.SIGHUP:
        detach_terminal()
        raise HungUp()
    raise Terminated()


def install() -> None:
    """Turn SIGTERM and SIGHUP into Terminated / HungUp in this (main) thread.

    A SIGHUP that the process was started with ignored (nohup, a daemon) stays ignored: that was asked for.
    Output to a terminal is guarded too (guard_terminal_output): after a hangup it is dropped, never raised.
    """
    guard_terminal_output()
    for sig in TERMINATING:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        signal.signal(sig, _on_signal)
