"""SIGTERM and SIGHUP end a workbench process the way Ctrl-C does: they raise, so every `finally:` runs.

A closed terminal or a dropped SSH session sends SIGHUP; its default action kills Python outright, leaving a
stock server's scratch directory (possibly gigabytes on a NAS), mounts and servers behind. `install()` is
the one place both are caught, for every command (`main` calls it first), and `held()` the one way a cleanup
holds them (with Ctrl-C) off until it is done; the lab (workbench/lab/lifecycle.py) and a fleet member use both.

Exit codes: SIGTERM 143 and SIGHUP 129 (128 + the signal's number, as a shell reports a process killed by
it), each with its own last line on stderr ("terminated", "hung up").
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any, TextIO, TypeVar

from workbench.shared.errors import ExitCode, Terminated

TERMINATING = (signal.SIGTERM, signal.SIGHUP)
# What writing to a terminal that hung up fails with (EIO; ENXIO on some systems): the kernel switches the
# terminal off before it sends SIGHUP, so a write can fail before the signal's handler runs. Output piped into
# `tee` on that terminal fails with EPIPE instead: tee died of the same hangup.
HUNG_UP_ERRNOS = (errno.EIO, errno.ENXIO, errno.EPIPE)
T = TypeVar("T")


class HungUp(Terminated):
    """SIGHUP arrived (the terminal closed, the SSH session dropped): unwinds exactly like SIGTERM."""

    exit_code = ExitCode.HANGUP


def last_words(exc: Terminated) -> str:
    """The last line a process ended by `exc` prints on stderr."""
    return "hung up" if isinstance(exc, HungUp) else "terminated"


def exit_code_of(exc: Terminated) -> ExitCode:
    return exc.exit_code


def ignore_further() -> None:
    """Once one arrived, the next must not cut short the cleanup the first began (SIGKILL still works)."""
    for sig in TERMINATING:
        signal.signal(sig, signal.SIG_IGN)


def detach_terminal() -> None:
    """Point standard input, output and error at /dev/null where they are a terminal.

    After a hangup every write to the terminal fails (EIO): a progress bar or a last message written during
    the cleanup would raise there and skip the rest of it. Output redirected to a file or a pipe is kept.
    """
    _to_devnull([fd for fd in (0, 1, 2) if _isatty(fd)])


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _to_devnull(fds: Iterable[int]) -> None:
    """Point each of `fds` at /dev/null, as far as it can be (one failing leaves the others to go)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.dup2(null, fd)
        finally:
            os.close(null)


class TerminalOutput:
    """A terminal's or a pipe's text stream (sys.stdout, sys.stderr) that, once the terminal hung up or the
    pipe's reader died, goes to /dev/null instead of raising: a progress bar refreshing in a thread, or the
    cleanup's last message, must not turn a hangup into a failure (exit 1) or skip the rest of the cleanup.
    Anything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def _guarded(self, call: Callable[..., T], *args: Any) -> T | None:
        try:
            return call(*args)
        except OSError as exc:
            if exc.errno not in HUNG_UP_ERRNOS:
                raise
            detach_terminal()
            with contextlib.suppress(OSError, ValueError):
                _to_devnull([self.stream.fileno()])  # a pipe is no terminal: this stream's own descriptor
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


def _can_hang_up(stream: TextIO) -> bool:
    """Whether writes to `stream` can start failing when the terminal goes: a terminal, a pipe or a socket."""
    if stream.isatty():
        return True
    mode = os.fstat(stream.fileno()).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def guard_terminal_output() -> None:
    """Wrap sys.stdout and sys.stderr in TerminalOutput where they are a terminal or a pipe (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, TerminalOutput):
            continue
        with contextlib.suppress(AttributeError, OSError, ValueError):
            if _can_hang_up(stream):
                setattr(sys, name, TerminalOutput(stream))


def on_signal(signum: int, frame: FrameType | None) -> None:
    """The handler of SIGTERM and SIGHUP: further ones off (the cleanup this begins must not be cut short), then
    raise Terminated or HungUp (a hung-up terminal's streams first pointed at /dev/null)."""
    ignore_further()
    if signum == signal.SIGHUP:
        detach_terminal()
        raise HungUp()
    raise Terminated()


HELD = (signal.SIGINT, *TERMINATING)
_SEVERITY: list[int] = [signal.SIGHUP, signal.SIGTERM, signal.SIGINT]


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP while the block runs (a cleanup: ending sessions, recording what they sent,
    removing namespaces): one arriving meanwhile is noted, and delivered right after the block, so it raises
    there and not halfway through. A signal that was ignored when the block began (a first one switched further
    ones off; nohup) stays ignored. Outside the main thread nothing is held (handlers can be set only there).

    The handlers are swapped for one that notes the signal, rather than the signals blocked with pthread_sigmask:
    a blocked signal still reaches the other threads (a progress bar's, a library's), whose C handler then has the
    main thread run the Python one all the same, and children started in the block would inherit the mask (an
    `ssh -O exit` or a removal that SIGTERM then cannot stop).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        arrived.append(signum)

    before = {sig: signal.getsignal(sig) for sig in HELD}
    for sig, handler in before.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, note)
    try:
        yield
    finally:
        for sig, handler in before.items():
            if signal.getsignal(sig) is note:
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if arrived:  # its own handler runs now and raises; a hangup first, the terminal being gone
            signal.raise_signal(min(arrived, key=_SEVERITY.index))


def install() -> None:
    """Turn SIGTERM and SIGHUP into Terminated / HungUp in this (main) thread.

    A SIGHUP that the process was started with ignored (nohup, a daemon) stays ignored: that was asked for.
    Output to a terminal or a pipe is guarded too (guard_terminal_output): once the terminal hung up or the
    pipe's reader died (`| tee` in that terminal), it is dropped, never raised.
    """
    guard_terminal_output()
    for sig in TERMINATING:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        signal.signal(sig, on_signal)
