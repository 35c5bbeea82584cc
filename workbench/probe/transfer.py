"""One timed, one-way load on a probe data connection: the loops both ends run, and the socket settings they need.

Shared by the probe's client and server: the sender pushes one payload in a loop, the receiver counts
and discards, each until a deadline or a byte cap, both timed from their first to their last byte.
"""

from __future__ import annotations

import os
import socket
import struct
import time

from workbench.probe.wire import GRACE_S, SideCount

BUF_SIZE = 4 << 20  # large buffers so Python's per-call cost stays far below the wire time
POLL_S = 0.1  # OS-level send/recv timeout: how often a blocked loop looks at its deadline
STALL_S = 5.0  # no progress for this long ends a transfer with an error
_SO_RCVBUFFORCE = 33 if hasattr(socket, "SO_BINDTODEVICE") else socket.SO_RCVBUF  # Linux; Python lacks the name
_TCP_WINDOW_CLAMP = getattr(socket, "TCP_WINDOW_CLAMP", None)
_RECLAMP_FIRST = 64  # receives during which the clamp is re-applied every time (see receive)
_RECLAMP_S = 0.05


def set_poll_timeouts(sock: socket.socket, seconds: float = POLL_S) -> None:
    """Blocking socket with OS-level timeouts: calls return (EAGAIN or a partial count) every `seconds`.

    Python's own settimeout() adds a poll() before every call; this keeps the hot loop to one syscall.
    """
    sock.settimeout(None)
    whole = int(seconds)
    tv = struct.pack("ll", whole, int((seconds - whole) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def lock_window(sock: socket.socket, window: int) -> None:
    """Make the receive window this socket advertises `window` bytes (kept so by `receive`).

    Autotuning rewrites the clamp whenever it grows the buffer, so the buffer is locked first (Linux
    doubles SO_RCVBUF and grants only part of it to the window: 2x leaves room). The clamp goes on the
    connected socket: one set before listen()/connect() is recomputed by the kernel.
    """
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, 2 * window)
    except OSError:
        # Unprivileged: capped at net.core.rmem_max, which may leave large windows short.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2 * window)
    _clamp(sock, window)


def _clamp(sock: socket.socket, window: int) -> None:
    if _TCP_WINDOW_CLAMP is not None:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_WINDOW_CLAMP, window)


def _prefault(buf: bytearray) -> None:
    # Fresh pages are slow to touch the first time (~1.7 s of kernel CPU per GiB on a 2-core VM: a first 1 GiB
    # dd from /dev/zero ran at 374 MB/s, the second at 3.1 GB/s): fault them in before anything is timed.
    buf[::4096] = b"\x01" * len(range(0, len(buf), 4096))


def new_buffer(size: int = BUF_SIZE) -> bytearray:
    buf = bytearray(size)
    _prefault(buf)
    return buf


def random_payload(size: int = BUF_SIZE) -> bytes:
    # Incompressible, in case a middlebox or a tunnel compresses; made once per server or measure().
    return os.urandom(size)


def receive(
    sock: socket.socket, buf: bytearray, deadline: float, max_bytes: int, window: int | None = None
) -> SideCount:
    """Count and discard bytes until EOF, the deadline or max_bytes; raises TimeoutError on a stall.

    With `window`, the clamp is re-applied as data flows: Linux resets it to the buffer-derived value
    each time its payload/truesize ratio estimate changes, which happens mostly on the first segments.
    """
    view = memoryview(buf)
    size = len(view)
    recv_into = sock.recv_into
    clock = time.monotonic
    total = first_n = receives = 0
    first_t = last_t = last_clamp = 0.0
    last_progress = clock()
    while total < max_bytes:
        try:
            n = recv_into(view, min(size, max_bytes - total))
        except BlockingIOError:
            now = clock()
            if now > deadline:
                break
            if now - last_progress > STALL_S:
                raise TimeoutError("no data for too long") from None
            continue
        if not n:
            break
        now = clock()
        if not total:
            first_t, first_n = now, n
        total += n
        last_t = last_progress = now
        if window is not None and (receives < _RECLAMP_FIRST or now - last_clamp > _RECLAMP_S):
            _clamp(sock, window)
            receives += 1
            last_clamp = now
        if now > deadline:
            break
    seconds = last_t - first_t if total else 0.0
    return SideCount(total, seconds, total - first_n if total else 0)


def transmit(sock: socket.socket, payload: bytes, deadline: float, max_bytes: int) -> SideCount:
    """Send payload repeatedly until the deadline or max_bytes; raises TimeoutError on a stall."""
    view = memoryview(payload)
    size = len(view)
    send = sock.send
    clock = time.monotonic
    total = 0
    offset = 0
    start = last_progress = clock()
    first_n = 0
    while total < max_bytes:
        now = clock()
        if now >= deadline:
            break
        want = min(size - offset, max_bytes - total)
        try:
            n = send(view[offset : offset + want])
        except BlockingIOError:
            if clock() - last_progress > STALL_S:
                raise TimeoutError("the receiver stopped reading") from None
            continue
        if not total:
            first_n = n
            start = clock()
        total += n
        offset = (offset + n) % size
        last_progress = clock()
    return SideCount(total, last_progress - start if total else 0.0, total - first_n)


def drain_to_eof(sock: socket.socket, timeout: float = GRACE_S) -> None:
    """After shutting our sending side, wait for the peer to close so TCP_INFO covers every ACK."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return
        except BlockingIOError:
            continue
        except OSError:
            return
