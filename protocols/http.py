"""HTTP with aiohttp: GET streamed into a file with large reads, PUT streamed from a file.

Against `workbench serve` (target.stock False) files live under /f/ and directories are made through the
control API. Against a stock WebDAV server (a URL given to `run`) every path is target.remote_path(remote),
percent-quoted, at the server's root: PROPFIND checks the directory and the login, MKCOL makes directories,
DELETE removes them. The login answers the server's own challenge (Digest when offered, else Basic), so a
password never goes out in clear to a server that asked for Digest. No redirect is followed (as curl, which
is not told -L): aiohttp would send a DELETE with Depth: infinity, or a PUT, on to wherever a Location header
points, so a 3xx is an error. The WebDAV helpers at the top are shared with curl (protocols/curl.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import ssl
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree

import aiohttp
from yarl import URL

from workbench.protocols.base import Client, LeftInPlace, Progress
from workbench.protocols.details import ClientDetails
from workbench.shared.errors import (
    AuthError,
    DiskError,
    NetworkError,
    NotFoundError,
    UsageError,
    WorkbenchError,
    from_os_error,
)
from workbench.shared.target import Target, url_host

# aiohttp's default 64 KiB read buffer halves download speed (~500-600 MB/s on loopback, 1 GiB on tmpfs);
# 4 MiB reached ~1 GB/s (1013 MB/s) on the same path.
READ_BUFSIZE = 4 << 20

# --- WebDAV on a stock server (shared with curl) ---

PROPFIND_BODY = b'<?xml version="1.0" encoding="utf-8"?><propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>'
PUT_OK = (200, 201, 204)
# MKCOL: 201 made it; 405 (RFC 4918: the resource exists) and 301 (a server adding the trailing slash) mean
# it was already there.
MKCOL_OK = (201, 301, 405)
DELETE_OK = (200, 204)
UNTRUSTED_CERT_HINT = (
    "trust its certificate (SSL_CERT_FILE, or CURL_CA_BUNDLE for curl), or pass --insecure-host-keys on a "
    "link you trust"
)
_CHALLENGE = re.compile(r"(?:^|,)\s*([A-Za-z][\w-]*)(?=\s+[\w-]+=|\s*$|\s*,)")
# aiohttp's parser quotes the bytes it refused (a repr, on its first line or the next): what follows goes
_QUOTED_BYTES = re.compile(r"[:\s]*(?:bytearray\()?b?['\"].*")


def _parser_said(message: str) -> str:
    """What aiohttp's parser found wrong in an answer ('Invalid header token'), without the server's bytes."""
    return _QUOTED_BYTES.sub("", message.split("\n")[0]).rstrip(": ") or "unreadable answer"


def webdav_base(target: Target) -> str:
    return f"{'https' if target.tls else 'http'}://{url_host(target.host)}:{target.port('http')}"


def webdav_path(target: Target, remote: str, collection: bool = False) -> str:
    """The percent-quoted request path of `remote` beneath the target's prefix; a collection ends in "/"."""
    path = "/" + quote(target.remote_path(remote), safe="/")
    return path + "/" if collection and not path.endswith("/") else path


def webdav_parents(remote_dir: str) -> list[str]:
    """Every directory from the first component of `remote_dir` down to itself: "a/b" -> ["a", "a/b"]."""
    parts = [p for p in remote_dir.split("/") if p]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


PROPFIND_MAX_BYTES = 1 << 20  # a Depth: 0 answer about one resource is a few hundred bytes


async def read_bounded(resp: aiohttp.ClientResponse, max_bytes: int = PROPFIND_MAX_BYTES) -> bytes:
    """At most `max_bytes` of an answer's body (the rest is never read: aiohttp then closes the connection
    instead of reusing it), so that no server can make the client read and hold a body of any size, such as
    an endless one, to learn a status. Read to its end when shorter: one read may return only a part."""
    body = b""
    while len(body) < max_bytes and (chunk := await resp.content.read(max_bytes - len(body))):
        body += chunk
    return body


def is_plain_collection(body: bytes) -> bool:
    """Whether a PROPFIND (Depth: 0) answer says its resource is a collection and not a redirect reference."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return False
    kinds = root.findall(".//{DAV:}resourcetype")
    if len(kinds) != 1:
        return False
    children = {child.tag for child in kinds[0]}
    return "{DAV:}collection" in children and "{DAV:}redirectref" not in children


def removable(target: Target, remote_dir: str) -> str:
    """remote_dir, refused when it names the export's root (a DELETE of "/" would empty the whole share)."""
    if not target.remote_path(remote_dir):
        raise UsageError("refusing to delete the WebDAV server's root directory", "name a directory beneath it")
    return remote_dir


def pick_auth(challenges: Iterable[str]) -> str:
    """'digest' or 'basic' from a 401's WWW-Authenticate values: Digest when offered (no password in clear)."""
    schemes = {m.lower() for value in challenges for m in _CHALLENGE.findall(value)}
    for scheme in ("digest", "basic"):
        if scheme in schemes:
            return scheme
    if not schemes:
        raise AuthError("the WebDAV server refused the request without saying how to log in (HTTP 401)")
    offered = ", ".join(sorted(schemes))
    raise AuthError(f"the WebDAV server asks for {offered} authentication", "workbench speaks Basic and Digest")


def tls_context(verify: bool) -> ssl.SSLContext | bool:
    """The system's CA store, read now (so SSL_CERT_FILE/SSL_CERT_DIR set for this run apply); False: no check."""
    return ssl.create_default_context() if verify else False


def check_deleted(status: int, what: str) -> None:
    """Raise unless `status` says a DELETE of the collection `what` removed all of it."""
    if status == 207:  # Multi-Status: some members could not be deleted, the rest were
        raise WorkbenchError(f"the WebDAV server deleted only part of {what}", "see the server's log")
    if status not in DELETE_OK:
        raise webdav_error(status, what)


def webdav_error(status: int, what: str) -> WorkbenchError:
    """A stock WebDAV server's answer `status` to a request for `what`, as a one-line error."""
    if status == 401:
        return AuthError(
            f"the WebDAV server refused the login for {what}", "check the URL's user and WORKBENCH_PASSWORD or ~/.netrc"
        )
    if status == 403:
        return DiskError(f"the WebDAV server forbids access to {what} (HTTP 403)", "check the user's rights there")
    if status == 404:
        return NotFoundError(f"not on the WebDAV server: {what}", "check the URL's path")
    if status == 405:
        return WorkbenchError(f"the server refused a WebDAV request on {what} (HTTP 405)", "is it a WebDAV share?")
    if status == 409:
        return NotFoundError(f"the parent directory of {what} is missing on the WebDAV server (HTTP 409)")
    if 300 <= status < 400:
        return WorkbenchError(
            f"the WebDAV server redirects {what} elsewhere (HTTP {status}); workbench follows no redirect",
            "give the URL the server redirects to",
        )
    if status in (413, 507):
        return DiskError(f"the WebDAV server has no room for {what} (HTTP {status})", "free space there or copy less")
    return WorkbenchError(f"HTTP {status} from the WebDAV server for {what}")


class WebDavAuth:
    """Client middleware that logs in the way the server asked: Digest (aiohttp's, preemptive once it has a
    nonce: one round trip per request) or Basic; nothing until `choose` was told the server's challenge.

    A PUT goes out once even under Digest: aiohttp's middleware answers a 401 by sending the request again,
    but a streamed body cannot be sent twice (the second try waits for bytes that never come, until the
    stall timeout). The 401 of a nonce gone stale (Apache ends them after AuthDigestNonceLifetime, 300 s)
    goes back to the caller instead, and the middleware has already learnt the new nonce from it.
    """

    def __init__(self, user: str, password: str, origin: URL) -> None:
        self.scheme: str | None = None
        self._origin = origin  # the server's scheme://host:port: a redirect elsewhere gets no password
        self._basic = aiohttp.encode_basic_auth(user, password)
        self._digest = aiohttp.DigestAuthMiddleware(user, password)

    def choose(self, challenges: Iterable[str]) -> None:
        self.scheme = pick_auth(challenges)

    async def __call__(self, request: aiohttp.ClientRequest, handler: Any) -> aiohttp.ClientResponse:
        if self.scheme == "digest":
            return await self._digest(request, _send_once(handler) if request.method == "PUT" else handler)
        if self.scheme == "basic" and request.url.origin() == self._origin:
            request.headers[aiohttp.hdrs.AUTHORIZATION] = self._basic
        return await handler(request)


def _send_once(handler: Any) -> Any:
    """`handler`, except that a second call returns the first call's response instead of sending again."""
    sent: list[aiohttp.ClientResponse] = []

    async def send(request: aiohttp.ClientRequest) -> aiohttp.ClientResponse:
        if not sent:
            sent.append(await handler(request))
        return sent[0]

    return send


# --- the client ---


class AiohttpClient(Client):
    protocol = "http"
    name = "aiohttp"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None
        self._moved_at = 0.0  # loop time of the last byte moved (see _watchdog)
        self._auth: WebDavAuth | None = None  # stock: the login the server asked for (see _open_stock)
        self.stock = self.target.stock
        self.base = (
            webdav_base(self.target)
            if self.stock
            else f"http://{url_host(self.target.host)}:{self.target.port('http')}"
        )

    def _url(self, remote: str, collection: bool = False) -> URL | str:
        if self.stock:
            # Quoted here, once: yarl must send it as is (Digest signs the path exactly as sent).
            return URL(self.base + webdav_path(self.target, remote, collection), encoded=True)
        return f"{self.base}/f/{remote}"

    def _run(self, coro: Any) -> Any:
        assert self._loop is not None, "connect() first"
        try:
            return self._loop.run_until_complete(self._watchdog(coro))
        except WorkbenchError:
            raise
        except aiohttp.ClientResponseError as exc:
            if isinstance(exc.__cause__, aiohttp.http_exceptions.HttpProcessingError):  # no status: aiohttp's 400
                raise WorkbenchError(
                    f"the answer to {exc.request_info.url} is not valid HTTP: {_parser_said(exc.message)}",
                    "is it an HTTP server?",
                ) from exc
            raise self._status_error(exc.status, str(exc.request_info.url)) from exc
        except aiohttp.ConnectionTimeoutError as exc:  # before TimeoutError: a silent host is not a stall
            raise from_os_error(
                TimeoutError(), "connecting over HTTP", self.target.host, self.target.port("http")
            ) from exc
        except TimeoutError as exc:
            raise NetworkError(
                f"HTTP transfer stalled for {self.options.stall_timeout_s:.0f} s",
                "the server stopped or the link is down"
            ) from exc
        except aiohttp.ClientConnectorCertificateError as exc:  # https only: before the connector errors
            raise AuthError(
                f"cannot verify the certificate of {self.target.host}:{self.target.port('http')}: "
                f"{exc.certificate_error}",
                UNTRUSTED_CERT_HINT,
            ) from exc
        except aiohttp.ClientConnectorError as exc:
            raise from_os_error(
                exc.os_error, "connecting over HTTP", self.target.host, self.target.port("http")
            ) from exc
        except (aiohttp.ClientError, ConnectionError) as exc:
            raise NetworkError(f"HTTP transfer failed: {exc}", "the server stopped or dropped the connection") from exc
        except OSError as exc:
            raise from_os_error(exc, "copying over HTTP", self.target.host, self.target.port("http")) from exc
        except BaseException:
            # Ctrl-C or SIGTERM mid-copy: end the copy's task here, so closing the loop neither warns of a
            # pending task nor leaves an exception "never retrieved" on the way out.
            self._cancel_pending()
            raise

    def _cancel_pending(self) -> None:
        assert self._loop is not None
        pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))

    async def _watchdog(self, coro: Any) -> Any:
        """Run coro, cancelling it when no bytes moved for options.stall_timeout_s seconds.

        aiohttp's sock_read only bounds reads: an upload to a server that stopped reading waits in the
        transport's drain forever. Progress (a chunk read, or the next chunk asked for) resets the clock.
        """
        loop = asyncio.get_running_loop()
        self._moved_at = loop.time()
        task = asyncio.ensure_future(coro)
        while True:
            done, _ = await asyncio.wait({task}, timeout=min(1.0, self.options.stall_timeout_s / 4))
            if done:
                return task.result()
            if loop.time() - self._moved_at > self.options.stall_timeout_s:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                raise TimeoutError

    def _moved(self, n: int, progress: Progress) -> None:
        self._moved_at = asyncio.get_running_loop().time()
        progress(n)

    def _status_error(self, status: int, what: str) -> WorkbenchError:
        if self.stock:
            return webdav_error(status, what)
        if status == 401:
            return AuthError("HTTP server refused the credentials", "check --credentials / WORKBENCH_PASSWORD")
        if status == 404:
            return NotFoundError(f"not on the server: {what}", "generate the files on the server first")
        if status == 507:
            return DiskError(f"the far host's disk is full (HTTP 507) for {what}", "free space there or copy less")
        return WorkbenchError(f"HTTP {status} for {what}")

    def connect(self) -> None:
        self._loop = asyncio.new_event_loop()
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.options.connect_timeout_s, sock_read=self.options.stall_timeout_s
        )
        if self.stock:
            self._run(self._open_stock(timeout))
            return

        async def open_session() -> None:
            creds = self.target.credentials
            token = base64.b64encode(f"{creds.user}:{creds.password}".encode()).decode()
            connector = aiohttp.TCPConnector(limit=4, force_close=False)
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Basic {token}"},
                timeout=timeout,
                read_bufsize=READ_BUFSIZE,
                connector=connector,
            )
            # A cheap authenticated request checks reachability and credentials before any timing.
            async with self._session.get(self.base + "/ctl/info") as resp:
                if resp.status != 200:
                    raise self._status_error(resp.status, "/ctl/info")
                await read_bounded(resp)

        self._run(open_session())

    async def _open_stock(self, timeout: aiohttp.ClientTimeout) -> None:
        """Open the session and check, before any timing, that the prefix directory answers a PROPFIND.

        The first PROPFIND carries no credentials: the server's 401 says which scheme it wants.
        """
        creds = self.target.credentials
        self._auth = auth = WebDavAuth(creds.user, creds.password, URL(self.base).origin())
        connector = aiohttp.TCPConnector(limit=4, force_close=False, ssl=tls_context(self.options.verify_host_keys))
        self._session = aiohttp.ClientSession(
            timeout=timeout, read_bufsize=READ_BUFSIZE, connector=connector, middlewares=(auth,)
        )
        url = self._url("", collection=True)
        status, challenges = await self._propfind(url)
        if status == 401:
            auth.choose(challenges)
            status, _ = await self._propfind(url)
        if status != 207:
            raise webdav_error(status, f"the directory {webdav_path(self.target, '', collection=True)}")

    async def _propfind(self, url: URL | str) -> tuple[int, list[str]]:
        assert self._session is not None
        headers = {"Depth": "0", "Content-Type": "application/xml; charset=utf-8"}
        async with self._session.request(
            "PROPFIND", url, data=PROPFIND_BODY, headers=headers, allow_redirects=False
        ) as resp:
            await read_bounded(resp)
            return resp.status, resp.headers.getall("WWW-Authenticate", [])

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        async def get() -> None:
            assert self._session is not None
            async with self._session.get(self._url(remote), allow_redirects=False) as resp:
                if resp.status != 200:
                    raise self._status_error(resp.status, remote)
                fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    while chunk := await resp.content.read(self.options.block_size):
                        os.write(fd, chunk)
                        self._moved(len(chunk), progress)
                finally:
                    os.close(fd)
                if resp.content_length is not None and os.path.getsize(local) != resp.content_length:
                    raise NetworkError(f"HTTP download of {remote} ended early", "the server stopped mid-transfer")

        self._run(get())

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        async def put() -> None:
            status, answer = await self._put_file(local, self._url(remote), progress)
            if status != 200:
                raise self._status_error(status, remote)
            stored = json.loads(answer).get("bytes")
            size = os.path.getsize(local)
            if stored != size:
                raise NetworkError(f"server stored {stored} of {size} bytes of {remote}", "retry the copy")

        async def put_stock() -> None:
            assert self._auth is not None
            for attempt in (1, 2):
                # 201 (made) or 204/200 (replaced), with no body worth reading
                status, _ = await self._put_file(local, self._url(remote), progress, allow_redirects=False)
                if status == 401 and attempt == 1 and self._auth.scheme == "digest":
                    continue  # a stale nonce (see WebDavAuth): the file once more, with the new one
                if status not in PUT_OK:
                    raise self._status_error(status, remote)
                return

        self._run(put_stock() if self.stock else put())

    async def _put_file(self, local: Path, url: URL | str, progress: Progress, **kwargs: Any) -> tuple[int, bytes]:
        """PUT local's bytes, streamed; return the answer's status and body.

        A server may close a kept-alive connection at any moment, also just as the client sends its next
        request on it (HTTP allows it, and says to send an idempotent request such as PUT once more when
        the connection broke before any answer came). aiohttp does so only for a body it can rewind, which
        a stream is not: here the file is sent once more, from its start, on a new connection. The bytes of
        the broken try stay counted: they did cross the wire, and the copy's time includes them.
        """
        assert self._session is not None
        headers = {"Content-Length": str(os.path.getsize(local)), "Content-Type": "application/octet-stream"}
        block = self.options.block_size

        async def body():  # type: ignore[no-untyped-def]
            with open(local, "rb", buffering=0) as fh:
                while chunk := fh.read(block):
                    yield chunk
                    self._moved(len(chunk), progress)

        for last_try in (False, True):
            try:
                resp = await self._session.put(url, data=body(), headers=headers, **kwargs)
            except aiohttp.ClientConnectorError:
                raise  # no connection at all: nothing to send again
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
                if last_try:
                    raise
                continue
            async with resp:
                return resp.status, await read_bounded(resp)
        raise AssertionError("unreachable")

    def mkdir(self, remote_dir: str) -> None:
        if self.stock:
            self._run(self._mkcol(remote_dir))
            return

        async def call() -> None:
            assert self._session is not None
            async with self._session.post(f"{self.base}/ctl/mkdir", params={"path": remote_dir}) as resp:
                if resp.status != 200:
                    raise self._status_error(resp.status, remote_dir)

        self._run(call())

    async def _mkcol(self, remote_dir: str) -> None:
        """MKCOL each directory from the prefix down (the prefix itself was checked by connect)."""
        assert self._session is not None
        for path in webdav_parents(remote_dir):
            async with self._session.request("MKCOL", self._url(path, collection=True), allow_redirects=False) as resp:
                await read_bounded(resp)
                if resp.status not in MKCOL_OK:
                    raise self._status_error(resp.status, path)

    def is_dir(self, remote: str) -> bool:
        if not self.stock:
            return super().is_dir(remote)

        async def propfind() -> bool:
            assert self._session is not None
            headers = {"Depth": "0", "Content-Type": "application/xml; charset=utf-8"}
            async with self._session.request(
                "PROPFIND", self._url(remote, collection=True), data=PROPFIND_BODY, headers=headers,
                allow_redirects=False,
            ) as resp:
                body = await read_bounded(resp, PROPFIND_MAX_BYTES)
                status = resp.status
            if status == 404:
                return False
            if status != 207:
                raise webdav_error(status, webdav_path(self.target, remote, collection=True))
            # a server may answer a file's name with a slash as the file: only a collection is a directory
            return is_plain_collection(body)

        return bool(self._run(propfind()))

    def check_real_dir(self, remote: str) -> None:
        if self.stock:
            self._run(self._collection(remote))

    async def _collection(self, remote: str) -> None:
        """Raise unless PROPFIND says `remote` is a plain collection (not a redirect reference, not a file)."""
        assert self._session is not None
        url = self._url(remote, collection=True)
        headers = {"Depth": "0", "Content-Type": "application/xml; charset=utf-8"}
        async with self._session.request(
            "PROPFIND", url, data=PROPFIND_BODY, headers=headers, allow_redirects=False
        ) as resp:
            body = await read_bounded(resp, PROPFIND_MAX_BYTES)
            status = resp.status
        path = webdav_path(self.target, remote, collection=True)
        if status != 207:
            raise webdav_error(status, path)  # 404: NotFoundError; a redirect: an error, never followed
        if not is_plain_collection(body):
            raise LeftInPlace(
                f"{path} on the WebDAV server is not a plain collection (its resourcetype says otherwise): left in "
                "place, nothing through it touched",
                "delete it by hand if it is yours",
            )

    def remove_tree(self, remote_dir: str) -> None:
        if not self.stock:
            super().remove_tree(remote_dir)
            return
        removable(self.target, remote_dir)

        async def delete() -> None:
            assert self._session is not None
            # A link is the server's to see (WebDAV has no links, only redirect references): the server walks the
            # collection; the client makes sure the top is a plain collection first.
            await self._collection(remote_dir)
            # DELETE of a collection is always recursive (RFC 4918 9.6.1); the server, not the client, walks it.
            url = self._url(remote_dir, collection=True)
            async with self._session.delete(url, headers={"Depth": "infinity"}, allow_redirects=False) as resp:
                await read_bounded(resp)
                check_deleted(resp.status, remote_dir)

        self._run(delete())

    def close(self) -> None:
        if self._loop is None:
            return
        if self._session is not None:
            self._loop.run_until_complete(self._session.close())
            self._session = None
        self._loop.close()
        self._loop = None

    def details(self) -> ClientDetails:
        # A stock server's way of sending files is unknown (None: not said); `serve` uses sendfile.
        sendfile = None if self.stock else True
        # One request per file on a kept-alive connection: its round trip is the file's only one besides the data.
        return ClientDetails(
            read_bufsize=READ_BUFSIZE,
            block_bytes=self.options.block_size,
            server_sendfile=sendfile,
            round_trips_per_file=0,
        )
