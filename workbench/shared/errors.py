"""One error hierarchy: every failure a user can cause or meet carries a message and a hint.

Library errors are translated at the boundary (protocol modules, server supervision) with
``raise WorkbenchError(...) from exc``; the CLI prints ``error: <message> (<hint>)`` on one line
and exits with the code below. ``--debug`` re-raises instead.
"""

from __future__ import annotations

import errno
import socket
from enum import IntEnum

from workbench.shared.safetext import cut, strip_controls

# A message longer than this (a server's reply quoted whole) is cut in one_line(): a line to read, not a dump.
ONE_LINE_MAX_CHARS = 1000


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1  # a generic failure that does not fit below
    USAGE = 2  # malformed flag, size string, config or unknown protocol
    NETWORK = 3  # unreachable host, refused port, timeout
    AUTH = 4  # bad credentials, host key mismatch
    NOT_FOUND = 5  # missing file, directory or server binary
    DISK = 6  # disk full or not writable
    UNAVAILABLE = 7  # the platform cannot do it (no namespaces, mount_afp on Linux)
    ROWS_FAILED = 8  # run/lab finished, but one or more rows failed or did not verify (all rows are saved)
    HANGUP = 129  # SIGHUP (terminal closed, SSH session dropped), handled like SIGTERM (workbench/shared/signals.py)
    INTERRUPTED = 130  # Ctrl-C (SIGINT): finished rows are saved, everything started is torn down
    TERMINATED = 143  # SIGTERM, handled like Ctrl-C


class Terminated(SystemExit):
    """SIGTERM arrived: unwinds like Ctrl-C (every `finally:` and `except BaseException:` cleanup runs).

    A BaseException and not an Exception, so `except Exception` and `suppress(Exception)` never swallow it;
    not a KeyboardInterrupt, so click does not turn it into a bare Abort and the CLI can say 'terminated'. A
    SystemExit carrying its exit code, so that a program using the lab as a library, which catches nothing,
    still ends with that code and no traceback.
    """

    exit_code = ExitCode.TERMINATED

    def __init__(self) -> None:
        super().__init__(int(self.exit_code))


class WorkbenchError(Exception):
    """A failure with a one-line message and a hint saying what to do."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and its hint on one line, safe to show: a server's words quoted in them lose their line
        breaks and control characters (ESC sequences included), and a message past ONE_LINE_MAX_CHARS is cut."""
        text = cut(strip_controls(self.message).strip().rstrip("."), ONE_LINE_MAX_CHARS, say_rest=True)
        if self.hint:
            text += f" ({strip_controls(self.hint).strip().rstrip('.')})"
        return text


class UsageError(WorkbenchError):
    exit_code = ExitCode.USAGE


class NetworkError(WorkbenchError):
    exit_code = ExitCode.NETWORK


class AuthError(WorkbenchError):
    exit_code = ExitCode.AUTH


class NotFoundError(WorkbenchError):
    exit_code = ExitCode.NOT_FOUND


class DiskError(WorkbenchError):
    exit_code = ExitCode.DISK


class UnavailableError(WorkbenchError):
    exit_code = ExitCode.UNAVAILABLE


def one_line_of(exc: BaseException) -> str:
    """What went wrong, on one line safe to show and keep (bounded, no control characters): a WorkbenchError's
    one_line(), any other exception's type and words made so."""
    if isinstance(exc, WorkbenchError):
        return exc.one_line()
    return WorkbenchError(f"{type(exc).__name__}: {exc}").one_line()


def from_os_error(exc: OSError, what: str, host: str | None = None, port: int | None = None) -> WorkbenchError:
    """Translate an OSError met while doing `what` into a WorkbenchError with a useful hint."""
    where = f"{host}:{port}" if host is not None and port is not None else (host or "")
    if isinstance(exc, socket.gaierror):
        return NetworkError(f"cannot resolve host {host!r} while {what}", "check the host name or use an IP address")
    if isinstance(exc, ConnectionRefusedError):
        return NetworkError(
            f"connection refused by {where} while {what}",
            "is the server running there? start it with 'workbench serve' or 'workbench servers up'",
        )
    if isinstance(exc, TimeoutError | socket.timeout):
        return NetworkError(f"timed out talking to {where} while {what}", "check the host is up and reachable")
    if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
        return NetworkError(f"host {where} is unreachable while {what}", "check the address and the route to it")
    if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
        return NetworkError(f"connection to {where} was lost while {what}", "the server stopped or dropped the link")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskError(f"disk full while {what}", "free some space or choose smaller --sizes")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return DiskError(f"permission denied while {what}: {exc.filename or exc}", "check the path's permissions")
    if isinstance(exc, FileNotFoundError):
        return NotFoundError(f"no such file while {what}: {exc.filename or exc}", "check the path")
    if isinstance(exc, NotADirectoryError):
        return UsageError(f"a path goes through a file while {what}: {exc.filename or exc}", "check the path")
    return WorkbenchError(f"{what} failed: {exc.strerror or exc}")
