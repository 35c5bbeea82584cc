"""A fleet member's pipes read without trusting them: lines of bounded length, and the end of its stderr.

Neither ever holds more than its bound in memory, however much the far side writes: a line longer than the
bound is reported as such (its bytes read and dropped, not kept), and stderr keeps only its last bytes (enough
for the member's or ssh's last words to explain a failure).
"""

from __future__ import annotations

import os

from workbench.core.fleet_messages import MAX_LINE_BYTES

STDERR_KEEP_BYTES = 64 * 1024  # a traceback or ssh's complaint fits; an endless stream costs no more
READ_BYTES = 64 * 1024


class TooLong:
    """In place of a line: the far side wrote more than the bound without a newline."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes


class LineReader:
    """Lines from a pipe, each at most `limit_bytes` long (without its newline). `feed()` reads what one read
    gives (call it when select() says the pipe is readable); `next()` hands out the complete lines."""

    def __init__(self, fd: int, limit_bytes: int = MAX_LINE_BYTES) -> None:
        self.fd = fd
        self.limit_bytes = limit_bytes
        self.closed = False  # end of file reached
        self.unterminated = False  # the pipe ended inside a line (its bytes dropped)
        self._buffer = bytearray()
        self._lines: list[bytes | TooLong] = []
        self._skipping = False  # inside a line already reported as too long: drop up to its newline

    def feed(self) -> None:
        """One read from the pipe (it must be readable, or this blocks)."""
        if self.closed:
            return
        chunk = _read_chunk(self.fd)
        if chunk is None:
            return
        if not chunk:
            self.closed = True
            if self._buffer or self._skipping:
                self.unterminated = not self._skipping
                self._buffer.clear()
            return
        self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:newline]
            if self._skipping:
                self._skipping = False
            elif len(self._buffer) + len(piece) > self.limit_bytes:
                self._lines.append(TooLong(self.limit_bytes))
                self._buffer.clear()
            else:
                self._buffer += piece
                self._lines.append(bytes(self._buffer))
                self._buffer.clear()
            start = newline + 1
        rest = chunk[start:]
        if self._skipping:
            return
        if len(self._buffer) + len(rest) > self.limit_bytes:
            self._lines.append(TooLong(self.limit_bytes))
            self._buffer.clear()
            self._skipping = True
        else:
            self._buffer += rest

    @property
    def pending(self) -> bool:
        """A complete line (or a TooLong) is waiting in next()."""
        return bool(self._lines)

    def next(self) -> bytes | TooLong | None:
        """The next complete line (without its newline), a TooLong, or None when none is complete yet."""
        return self._lines.pop(0) if self._lines else None


class Tail:
    """The last `keep_bytes` of a pipe (a member's stderr), read without ever holding more."""

    def __init__(self, fd: int, keep_bytes: int = STDERR_KEEP_BYTES) -> None:
        self.fd = fd
        self.keep_bytes = keep_bytes
        self.closed = False
        self._kept = bytearray()

    def feed(self) -> None:
        """One read from the pipe (it must be readable, or this blocks)."""
        if self.closed:
            return
        chunk = _read_chunk(self.fd)
        if chunk is None:
            return
        if not chunk:
            self.closed = True
            return
        self.add(chunk)

    def add(self, data: bytes) -> None:
        self._kept += data[-self.keep_bytes :]
        del self._kept[: -self.keep_bytes]

    def text(self) -> str:
        return self._kept.decode(errors="replace")

    def lines(self) -> list[str]:
        return self.text().splitlines()


def _read_chunk(fd: int) -> bytes | None:
    """One read from `fd`: its bytes, b"" at end of file or on a read error, None when nothing is there yet."""
    try:
        return os.read(fd, READ_BYTES)
    except BlockingIOError:
        return None
    except OSError:
        return b""
