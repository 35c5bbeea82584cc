"""DSI, the session layer AFP speaks over TCP: 16-byte headers, request IDs, the server's quantum, tickles.

Every message is a header and its data. The header (big-endian): flags (0 request, 1 reply), command, request
ID (2 bytes), an error code in a reply or the data offset in a DSIWrite (4 bytes), the data's length (4 bytes)
and 4 reserved bytes. A client may send several requests before it reads their replies: the server answers
them in order, each with its request's ID, which is how reads and writes keep several requests in flight.
The server may interleave requests of its own: a tickle (it is alive; answered with one of ours), an
attention (a 2-byte code, answered with an empty reply) or a close (it is ending the session).

Errors here are DsiError (the connection or its framing failed, with a reason) and OSError from the socket;
the client turns both into workbench errors at its boundary.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass

FLAG_REQUEST = 0x00
FLAG_REPLY = 0x01
CLOSE_SESSION = 1
COMMAND = 2
GET_STATUS = 3
OPEN_SESSION = 4
TICKLE = 5
WRITE = 6
ATTENTION = 8

OPTION_SERVER_QUANTUM = 0x00  # the largest request the server takes, in bytes (in its OpenSession reply)
OPTION_ATTENTION_QUANTUM = 0x01  # the largest attention the client takes (in its OpenSession request)
ATTENTION_QUANTUM_BYTES = 2  # an attention carries a 2-byte code

HEADER = struct.Struct(">BBHiII")
HEADER_BYTES = HEADER.size
# Replies other than read data (server information, listings, login answers) are small; a length past this is a
# broken or hostile server, refused before a byte of it is read.
MAX_CONTROL_REPLY_BYTES = 4 << 20
# The server drops a client silent for its timeout (netatalk: 4 tickle intervals of 30 s); a tickle after this
# much silence keeps an idle session (between copies) alive.
TICKLE_INTERVAL_S = 30.0
# A server quantum below this could not carry one request of a listing; netatalk announces 1 MiB.
MIN_SERVER_QUANTUM_BYTES = 4096
# Reads go from the socket to the local file through a pipe (splice: the kernel moves the data, no copy through
# Python's memory) where the system has splice: a download then costs one copy per byte instead of two. The
# pipe is raised to this size where allowed.
PIPE_BYTES = 1 << 20
ZERO_COPY = hasattr(os, "splice")


class DsiError(Exception):
    """The DSI connection failed or the server broke its framing; the message says how."""


class LocalFileError(Exception):
    """Writing a read's data into the local file failed (its OSError is the cause); the stream is left mid-reply."""


@dataclass(frozen=True)
class Header:
    flags: int
    command: int
    request_id: int
    code: int  # a reply's result code (signed), a DSIWrite's data offset
    length: int  # bytes of data after the header


def pack_header(flags: int, command: int, request_id: int, code: int, length: int) -> bytes:
    return HEADER.pack(flags, command, request_id, code, length, 0)


def parse_header(raw: bytes) -> Header:
    flags, command, request_id, code, length, _ = HEADER.unpack(raw)
    return Header(flags, command, request_id, code, length)


def open_session_options(attention_quantum: int = ATTENTION_QUANTUM_BYTES) -> bytes:
    return struct.pack(">BBI", OPTION_ATTENTION_QUANTUM, 4, attention_quantum)


def parse_session_options(data: bytes) -> dict[int, int]:
    """The options of a DSIOpenSession reply: type (1 byte), length (1 byte), value (4-byte ones read)."""
    options: dict[int, int] = {}
    at = 0
    while at + 2 <= len(data):
        kind, length = data[at], data[at + 1]
        value = data[at + 2 : at + 2 + length]
        if len(value) != length:
            raise DsiError("DSIOpenSession reply cut inside an option")
        if length == 4:
            options[kind] = struct.unpack(">I", value)[0]
        at += 2 + length
    return options


@dataclass(frozen=True)
class Reply:
    request_id: int
    code: int
    data: bytes  # empty when the data went into the caller's buffer
    length: int


class DsiConnection:
    """One TCP connection speaking DSI. Sends are serialised by a lock (the tickle thread sends too); replies are
    read by one thread, the caller's."""

    def __init__(self, sock: socket.socket, where: str) -> None:
        self.sock = sock
        self.where = where
        self._next_id = 0
        self._id_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._last_send = time.monotonic()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self.server_quantum_bytes = 0
        self.attentions: list[int] = []  # attention codes the server sent (shutdown notices, messages)
        self.requests_sent = 0  # DSICommand and DSIWrite requests, counted for tests and details
        self._pipe: tuple[int, int] | None = None  # (read end, write end) of the splice pipe, made on first use

    @classmethod
    def connect(cls, host: str, port: int, connect_timeout_s: float, timeout_s: float) -> DsiConnection:
        sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        try:
            sock.settimeout(timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            sock.close()
            raise
        host_shown = f"[{host}]" if ":" in host else host
        return cls(sock, f"{host_shown}:{port}")

    # -- sending ----------------------------------------------------------------------------------------------

    def _take_id(self) -> int:
        with self._id_lock:  # the tickle thread takes IDs too
            request_id = self._next_id
            self._next_id = (self._next_id + 1) & 0xFFFF
        return request_id

    def _send(self, *parts: bytes | memoryview) -> None:
        buffers = [memoryview(p).cast("B") for p in parts if len(p)]
        with self._send_lock:
            while buffers:
                sent = self.sock.sendmsg(buffers)
                while buffers and sent >= len(buffers[0]):
                    sent -= len(buffers[0])
                    buffers.pop(0)
                if buffers and sent:
                    buffers[0] = buffers[0][sent:]
            self._last_send = time.monotonic()

    def send_request(self, command: int, payload: bytes, data: bytes | memoryview = b"") -> int:
        """Send one request (DSIWrite: `payload` is the AFP header, `data` what it writes); its request ID."""
        request_id = self._take_id()
        offset = len(payload) if command == WRITE else 0
        self._send(pack_header(FLAG_REQUEST, command, request_id, offset, len(payload) + len(data)), payload, data)
        if command in (COMMAND, WRITE):
            self.requests_sent += 1
        return request_id

    def _wait(self, event: int) -> None:
        """Until the socket is ready for `event` (POLLIN, POLLOUT); TimeoutError after the socket's timeout."""
        timeout_s = self.sock.gettimeout()
        poller = select.poll()
        poller.register(self.sock.fileno(), event)
        if not poller.poll(None if timeout_s is None else timeout_s * 1000):
            raise TimeoutError(f"{self.where} did not answer for {timeout_s:g} s")

    # -- receiving --------------------------------------------------------------------------------------------

    def _recv_into(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise DsiError(f"{self.where} closed the connection")
            got += n

    def _recv(self, n: int) -> bytes:
        buf = bytearray(n)
        self._recv_into(memoryview(buf))
        return bytes(buf)

    def _reply_header(self, request_id: int) -> Header:
        """The header of the reply to `request_id`, which must be the next reply the server sends; requests the
        server interleaves are answered on the way."""
        while True:
            header = parse_header(self._recv(HEADER_BYTES))
            if header.flags == FLAG_REQUEST:
                self._serve(header)
                continue
            if header.flags != FLAG_REPLY:
                raise DsiError(f"{self.where} sent a DSI message with flags {header.flags}")
            if header.request_id != request_id:
                raise DsiError(f"{self.where} answered request {header.request_id} while {request_id} was due")
            return header

    def read_reply(self, request_id: int, into: memoryview | None = None) -> Reply:
        """The reply to `request_id` (the next reply the server sends). Its data goes into `into` when given (a
        read's buffer, which must be large enough), else into Reply.data. Requests the server interleaves are
        answered on the way."""
        header = self._reply_header(request_id)
        if into is not None and header.length <= len(into):
            self._recv_into(into[: header.length])
            return Reply(header.request_id, header.code, b"", header.length)
        if into is not None or header.length > MAX_CONTROL_REPLY_BYTES:
            raise DsiError(f"{self.where} sent a reply of {header.length} bytes, more than was asked for")
        return Reply(header.request_id, header.code, self._recv(header.length), header.length)

    def read_reply_to_file(self, request_id: int, fd: int, offset: int, max_bytes: int) -> Reply:
        """As read_reply with `into`, but the data (at most `max_bytes`) go straight into the file `fd` at
        `offset`, spliced through a pipe."""
        header = self._reply_header(request_id)
        if header.length > max_bytes:
            raise DsiError(f"{self.where} sent a reply of {header.length} bytes, more than was asked for")
        self._splice_to(fd, offset, header.length)
        return Reply(header.request_id, header.code, b"", header.length)

    def _splice_to(self, fd: int, offset: int, length: int) -> None:
        pipe_r, pipe_w = self._splice_pipe()
        sock_fd = self.sock.fileno()
        while length:
            try:
                flags = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
                moved = os.splice(sock_fd, pipe_w, min(length, PIPE_BYTES), flags=flags)
            except BlockingIOError:
                self._wait(select.POLLIN)
                continue
            if moved == 0:
                raise DsiError(f"{self.where} closed the connection")
            length -= moved
            while moved:  # the pipe is emptied every time: it never holds more than one splice's bytes
                try:
                    written = os.splice(pipe_r, fd, moved, offset_dst=offset, flags=os.SPLICE_F_MOVE)
                except OSError as exc:
                    raise LocalFileError(str(exc)) from exc
                offset += written
                moved -= written

    def _splice_pipe(self) -> tuple[int, int]:
        if self._pipe is None:
            pipe_r, pipe_w = os.pipe2(os.O_CLOEXEC)
            with contextlib.suppress(OSError):  # a lower pipe-max-size leaves the default (64 KiB)
                fcntl.fcntl(pipe_w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
            self._pipe = (pipe_r, pipe_w)
        return self._pipe

    def _serve(self, header: Header) -> None:
        """A request from the server: answer a tickle or an attention; a close ends the session."""
        if header.length > MAX_CONTROL_REPLY_BYTES:
            raise DsiError(f"{self.where} sent a request of {header.length} bytes")
        data = self._recv(header.length)
        if header.command == TICKLE:
            self._send(pack_header(FLAG_REQUEST, TICKLE, self._take_id(), 0, 0))
        elif header.command == ATTENTION:
            self.attentions.append(struct.unpack(">H", data[:2])[0] if len(data) >= 2 else 0)
            self._send(pack_header(FLAG_REPLY, ATTENTION, header.request_id, 0, 0))
        elif header.command == CLOSE_SESSION:
            raise DsiError(f"{self.where} closed the AFP session")
        else:
            raise DsiError(f"{self.where} sent an unexpected DSI request (command {header.command})")

    # -- whole exchanges --------------------------------------------------------------------------------------

    def request(self, command: int, payload: bytes) -> Reply:
        return self.read_reply(self.send_request(command, payload))

    def get_status(self) -> bytes:
        """DSIGetStatus (FPGetSrvrInfo); the server closes the connection after it."""
        reply = self.request(GET_STATUS, b"")
        return reply.data

    def open_session(self) -> int:
        """DSIOpenSession; the server's request quantum in bytes. Starts the tickles."""
        reply = self.request(OPEN_SESSION, open_session_options())
        if reply.code != 0:
            raise DsiError(f"{self.where} refused the DSI session (code {reply.code})")
        quantum = parse_session_options(reply.data).get(OPTION_SERVER_QUANTUM, 0)
        if quantum < MIN_SERVER_QUANTUM_BYTES:
            raise DsiError(f"{self.where} announced a server quantum of {quantum} bytes")
        self.server_quantum_bytes = quantum
        self._ticker = threading.Thread(target=self._tickle_loop, name="afp-tickle", daemon=True)
        self._ticker.start()
        return quantum

    def _tickle_loop(self) -> None:
        while not self._stop.wait(TICKLE_INTERVAL_S / 3):
            if time.monotonic() - self._last_send < TICKLE_INTERVAL_S:
                continue
            try:
                self._send(pack_header(FLAG_REQUEST, TICKLE, self._take_id(), 0, 0))
            except OSError:
                return  # the connection is gone: the next request says so

    def close(self, session_open: bool = True) -> None:
        """DSICloseSession (best effort, no reply awaited), then the socket; safe to call twice."""
        self._stop.set()
        if session_open and self.sock.fileno() >= 0:
            try:
                self.sock.settimeout(1.0)
                self._send(pack_header(FLAG_REQUEST, CLOSE_SESSION, self._take_id(), 0, 0))
            except OSError:
                pass
        self.sock.close()
        pipe, self._pipe = self._pipe, None
        for end in pipe or ():
            os.close(end)
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=1.0)
