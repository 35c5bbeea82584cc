"""A real WebDAV server whose answers are hostile, for tests of how workbench shows (and reads) a server's words.

`HostileDavFront` stands on its own loopback port in front of the stock WebDAV server (WsgiDAV,
workbench/server/stock/webdav.py). It reads each request (head, and a body of the length it says) and passes it
on to the stock server, and the stock server's answer back, unchanged; except for the requests its `HostileCase`
names (a method, and a piece of the path), which get the case's answer instead. That answer is raw bytes, so that
it can break HTTP as a hostile server would: control sequences or line breaks in the status line, a megabyte
header, 100 000 levels of XML, a 50 MB body. The connection is closed after it. The front counts the bytes of each
hostile answer it got onto the socket before the client hung up, so that a test can tell whether the client read
all of a huge one.

It runs an asyncio loop in a thread of the test's process: the case is set per test, one front serves them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tests.helpers import free_port

HEAD_MAX_BYTES = 64 << 10  # a request's or a stock answer's head; the client's are a few hundred bytes
BODY_MAX_BYTES = 64 << 20  # a request body the front takes (the tests' files are a few KiB)


@dataclass(frozen=True)
class HostileCase:
    """Answer `method` requests whose path `path` (a regular expression) finds something in with the bytes
    `answer` makes (status line, headers, body, all as sent)."""

    method: str = ""
    path: str = ""
    answer: Callable[[], Iterable[bytes]] = field(default=lambda: ())


NO_CASE = HostileCase()


@dataclass
class Counts:
    answered: int = 0  # hostile answers started
    sent: list[tuple[str, int]] = field(default_factory=list)  # per answer: the User-Agent, the bytes sent
    requests: list[str] = field(default_factory=list)  # "METHOD path" of every request, in order


class HostileDavFront:
    """Passes requests on to the stock WebDAV server at `upstream_port`, but those the case names."""

    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.upstream_port = upstream_port
        self.port = free_port(host)
        self.case = NO_CASE
        self.counts = Counts()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hostile-dav", daemon=True)
        self._server: asyncio.Server | None = None

    def url(self, user: str) -> str:
        return f"http://{user}@{self.host}:{self.port}/"

    def set_case(self, case: HostileCase = NO_CASE) -> None:
        """From the next request on, answer as `case` says; the counts start again."""
        self.case = case
        self.counts = Counts()

    def start(self) -> None:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, self.host, self.port, limit=HEAD_MAX_BYTES), self._loop
        ).result(timeout=10)

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await _read_message(client_in, is_request=True, continue_to=client_out)
                if request is None:
                    return
                method, path = request.first_line.split(" ")[:2]
                self.counts.requests.append(f"{method} {path}")
                case = self.case
                if case.method == method and re.search(case.path, path):
                    await self._answer(case, client_out, request.headers.get("user-agent", ""))
                    return
                if upstream is None:
                    upstream = await asyncio.open_connection("127.0.0.1", self.upstream_port, limit=HEAD_MAX_BYTES)
                upstream[1].write(request.raw)
                await upstream[1].drain()
                answer = await _read_message(upstream[0], is_request=False, method=method)
                while answer is not None and answer.first_line.split(" ")[1].startswith("1"):
                    answer = await _read_message(upstream[0], is_request=False, method=method)  # the front said 100
                if answer is None:
                    return
                client_out.write(answer.raw)
                await client_out.drain()
                if not answer.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return  # a client or stock server that went away, or sent what the front does not take: hang up
        finally:
            for writer in (client_out, upstream[1] if upstream else None):
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()

    async def _answer(self, case: HostileCase, out: asyncio.StreamWriter, user_agent: str) -> None:
        self.counts.answered += 1
        self.counts.sent.append((user_agent, 0))
        sent_bytes = 0
        for chunk in case.answer():
            out.write(chunk)
            try:
                await out.drain()
            except ConnectionError:
                return  # the client read what it wanted and hung up
            sent_bytes += len(chunk)
            self.counts.sent[-1] = (user_agent, sent_bytes)


@dataclass
class _Message:
    first_line: str
    headers: dict[str, str]
    raw: bytes
    keep_alive: bool


async def _read_message(
    reader: asyncio.StreamReader,
    is_request: bool,
    method: str = "",
    continue_to: asyncio.StreamWriter | None = None,
) -> _Message | None:
    """One HTTP/1.1 message as sent (head and body), or None at a clean end of the stream before one. A request
    that expects "100 Continue" gets it on `continue_to` before its body is read (the stock server's own 100 is
    then not passed on)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    first = lines[0]
    keep_alive = headers.get("connection", "").lower() != "close"
    if continue_to is not None and headers.get("expect", "").lower() == "100-continue":
        continue_to.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await continue_to.drain()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return _Message(first, headers, head + await _read_chunks(reader), keep_alive)
    if "content-length" in headers:
        length = int(headers["content-length"])
        if length > BODY_MAX_BYTES:
            raise ValueError(f"body of {length} bytes")
        return _Message(first, headers, head + await reader.readexactly(length), keep_alive)
    status = 0 if is_request else int(first.split(" ")[1])
    if is_request or method == "HEAD" or status in (204, 304) or status < 200:
        return _Message(first, headers, head, keep_alive)
    return _Message(first, headers, head + await reader.read(BODY_MAX_BYTES), keep_alive=False)  # ends with the stream


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    """A chunked body as sent, through its last chunk and trailers."""
    raw = b""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        raw += size_line
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        raw += await reader.readexactly(size + 2)
        if len(raw) > BODY_MAX_BYTES:
            raise ValueError("chunked body too long")
    while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
        raw += trailer
    return raw + b"\r\n"
