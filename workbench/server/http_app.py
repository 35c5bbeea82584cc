"""The HTTP side of `workbench serve` (aiohttp): file GET with sendfile, streaming PUT, and a small
authenticated control API the runner uses to prepare files, verify uploads and read server CPU.

Routes (all behind HTTP Basic auth, all confined to the served root by workbench.server.confine: no symlink is
followed on any component, only regular files are opened, nothing outside the root is reachable):
  GET  /f/<path>               the file, sent from the descriptor that was checked (sendfile)
  PUT  /f/<path>               streamed to a new random temporary file (O_EXCL), then renamed over <path>
  POST /ctl/mkdir?path=P       create a directory and its parents
  GET  /ctl/hash?path=P        {"size", "xxh3_128"} of a file (upload verification)
  POST /ctl/delete?path=P      remove a file or tree under incoming/ only (links removed, never followed)
  POST /ctl/files              generate test files server-side: {"sizes", "small", "profile", "seed"}
  GET  /ctl/info               host metadata (kernel, TCP settings, versions)
  GET  /ctl/cpu                CPU seconds of this process, the supervised servers' groups and all their descendants
  GET  /ctl/iperf3-key         the public RSA key of serve's authenticated iperf3 server
  GET  /ctl/crypto-cost        CPU seconds per byte of SMB's signing and encryption algorithms on this host
                               (workbench.shared.cryptocost; measured on each call, tens of milliseconds of CPU)
  POST /ctl/tcp-watch?role=R   start sampling this host's TCP sockets to the caller ("sender"/"receiver"): {"id"}
                               (bounded per client: workbench.server.remote_watches)
  POST /ctl/tcp-watch/stop?id= stop the caller's own watch: {"tcp": the triage (workbench.shared.triage) or null}

A connection that has not sent an authorized request AUTH_DEADLINE_S after it was accepted is closed
(AuthDeadlineRunner), so slow or silent unauthenticated clients cannot hold connections; an upload that
makes no progress for UPLOAD_STALL_S is aborted and its temporary file removed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import errno
import functools
import hmac
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xxhash
from aiohttp import web

from workbench.fixtures import generate
from workbench.server.confine import PathRefused, ServedRoot, create_temp, replace_from_temp, split_rel
from workbench.server.remote_watches import Watches, WatchRefused
from workbench.shared import hostinfo, schedstat
from workbench.shared.credentials import Credentials
from workbench.shared.errors import UsageError, WorkbenchError
from workbench.shared.paths import FILES_DIR, INCOMING_DIR
from workbench.shared.sizes import SmallSet
from workbench.shared.validate import check_budget

CHUNK = 1 << 20
AUTH_DEADLINE_S = 10.0  # from accept to the first authorized request's headers, whatever the client sends
UPLOAD_STALL_S = 20.0  # a PUT body that delivers nothing for this long is aborted

SERVED_KEY = web.AppKey("served", ServedRoot)
CREDS_KEY = web.AppKey("creds", Credentials)
PGIDS_KEY: web.AppKey[Callable[[], set[int]]] = web.AppKey("pgids")  # a callable is no class to name
# Connections (aiohttp protocols, which take no weak references) accepted and not yet authorized; each
# leaves the set at its first authorized request or at its deadline, whichever comes first.
UNAUTHED_KEY = web.AppKey("unauthed", set)
WATCHES_KEY = web.AppKey("tcp_watches", Watches)
IPERF3_KEY_KEY = web.AppKey("iperf3_key", Path)  # set once serve's iperf3 runs with RSA authentication

# What an OSError from a confined operation tells the client: a missing name is 404, everything
# refused (a link, a special file, '..', a directory where a file was meant) is 403.
_NOT_FOUND = {errno.ENOENT, errno.ENOTDIR}


def _authorized(request: web.Request) -> bool:
    creds = request.app[CREDS_KEY]
    header = request.headers.get("Authorization", "")
    if not header.startswith("Basic "):
        return False
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return False
    ok_user = hmac.compare_digest(user.encode(), creds.user.encode())
    ok_pass = hmac.compare_digest(password.encode(), creds.password.encode())
    return ok_user and ok_pass


@web.middleware
async def _auth_and_errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    if not _authorized(request):
        raise web.HTTPUnauthorized(headers={"WWW-Authenticate": 'Basic realm="workbench"'})
    request.app[UNAUTHED_KEY].discard(request.protocol)  # this connection may now outlive AUTH_DEADLINE_S
    try:
        return await handler(request)
    except UsageError as exc:
        raise web.HTTPForbidden(text=exc.message) from exc
    except PathRefused as exc:
        raise web.HTTPForbidden(text=f"refused: {exc.strerror}") from exc
    except OSError as exc:
        if exc.errno in _NOT_FOUND:
            raise web.HTTPNotFound(text="no such file") from exc
        if exc.errno == errno.ENOSPC:
            raise web.HTTPInsufficientStorage(text="no space left on the server") from exc
        raise web.HTTPForbidden(text=f"refused: {os.strerror(exc.errno or 0)}") from exc
    except WorkbenchError as exc:
        raise web.HTTPInternalServerError(text=exc.one_line()) from exc


class AuthDeadlineRunner(web.AppRunner):
    """An AppRunner whose connections are closed AUTH_DEADLINE_S after accept unless authorized by then.

    aiohttp has no deadline for a request's headers: a client sending one header byte a second holds
    its connection for as long as it likes. The listening socket's protocol factory is wrapped so each
    accepted connection gets a timer; the auth middleware takes connections that sent an authorized
    request off the pending set, and the timer closes every other one.
    """

    def __init__(self, app: web.Application, *, auth_deadline_s: float = AUTH_DEADLINE_S, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._auth_deadline_s = auth_deadline_s
        self._factory: Callable[[], Any] | None = None

    @property
    def server(self) -> Any:  # what the sites hand to loop.create_server
        real = self._server
        if real is None:
            return None
        if self._factory is None:
            pending = self.app[UNAUTHED_KEY]
            deadline_s = self._auth_deadline_s

            def expire(proto: Any) -> None:
                if proto in pending:
                    pending.discard(proto)
                    proto.force_close()

            def factory() -> Any:
                proto = real()
                pending.add(proto)
                asyncio.get_running_loop().call_later(deadline_s, expire, proto)
                return proto

            self._factory = factory
        return self._factory


def _served(request: web.Request) -> ServedRoot:
    return request.app[SERVED_KEY]


class _FdResponse(web.StreamResponse):
    """A response that sends an already opened (and checked) file descriptor with sendfile.

    aiohttp's FileResponse takes a path and opens it itself, which would reopen by name after the
    checks; this sends the very descriptor that was checked.
    """

    def __init__(self, fd: int, size: int) -> None:
        super().__init__(headers={"Content-Type": "application/octet-stream"})
        self.content_length = size
        self._file = os.fdopen(fd, "rb", buffering=0)
        self._size = size

    async def prepare(self, request: web.BaseRequest) -> Any:
        try:
            writer = await super().prepare(request)
            if request.method == "HEAD" or self._size == 0:
                await super().write_eof()
                return writer
            transport = request.transport
            if transport is None:
                raise ConnectionResetError("connection lost")
            loop = asyncio.get_running_loop()
            try:
                await loop.sendfile(transport, self._file, 0, self._size)
            except NotImplementedError:  # e.g. TLS transports: plain reads, still from the checked fd
                while chunk := await loop.run_in_executor(None, self._file.read, CHUNK):
                    await super().write(chunk)
            await super().write_eof()
            return writer
        finally:
            self._file.close()


async def get_file(request: web.Request) -> web.StreamResponse:
    fd = _served(request).open_file(request.match_info["path"], os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise
    return _FdResponse(fd, size)


async def put_file(request: web.Request) -> web.Response:
    rel = request.match_info["path"]
    split_rel(rel)  # refuse '.', '..', NUL before creating any directory
    dir_fd, name = _served(request).parent(rel, create=True)
    try:
        fd, temp = create_temp(dir_fd, name)
        written = 0
        try:
            try:
                while True:
                    # The deadline is per read: a slow but moving upload is fine, a stopped one is not.
                    chunk = await asyncio.wait_for(request.content.read(CHUNK), UPLOAD_STALL_S)
                    if not chunk:
                        break
                    # Writes of up to 1 MiB into the page cache are quick; doing them inline keeps the
                    # stream ordered and avoids an executor hop per chunk.
                    os.write(fd, chunk)
                    written += len(chunk)
            finally:
                os.close(fd)
            # Renamed over the name within the same directory descriptor: a planted symlink or hard
            # link at `name` is replaced, and whatever it pointed to is never written.
            replace_from_temp(dir_fd, temp, name)
        except BaseException as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dir_fd)
            if isinstance(exc, TimeoutError):
                raise web.HTTPRequestTimeout(text=f"upload stalled for {UPLOAD_STALL_S:.0f} s") from exc
            raise
    finally:
        os.close(dir_fd)
    return web.json_response({"bytes": written})


async def ctl_mkdir(request: web.Request) -> web.Response:
    _served(request).mkdirs(request.query.get("path", ""))
    return web.json_response({"ok": True})


def _hash_fd(fd: int) -> tuple[int, str]:
    """(size, xxh3-128) of an open file, as workbench.fixtures.manifest.hash_file computes it for a path."""
    digest = xxhash.xxh3_128()
    buf = bytearray(4 << 20)
    view = memoryview(buf)
    size = 0
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            digest.update(view[:n])
            size += n
    return size, digest.hexdigest()


async def ctl_hash(request: web.Request) -> web.Response:
    fd = _served(request).open_file(request.query.get("path", ""), os.O_RDONLY)
    size, digest = await asyncio.get_running_loop().run_in_executor(None, _hash_fd, fd)
    return web.json_response({"size": size, "xxh3_128": digest})


async def ctl_delete(request: web.Request) -> web.Response:
    rel = request.query.get("path", "")
    parts = split_rel(rel)
    # Beneath incoming/, never incoming/ itself: it holds every client's uploads and the rsync daemon's ACL.
    if parts[0] != INCOMING_DIR or len(parts) < 2:
        raise web.HTTPForbidden(text="only files under incoming/ can be deleted")
    with contextlib.suppress(FileNotFoundError):  # already gone is what the caller wants
        await asyncio.get_running_loop().run_in_executor(None, _served(request).remove_tree, rel)
    return web.json_response({"ok": True})


async def ctl_files(request: web.Request) -> web.Response:
    body = await request.json()
    try:
        sizes = [int(s) for s in body.get("sizes", [])]
        small = [SmallSet(int(c), int(s)) for c, s in body.get("small", [])]
        profile = str(body.get("profile", "random"))
        seed = int(body.get("seed", 1))
    except (TypeError, ValueError) as exc:
        raise web.HTTPBadRequest(text=f"bad file request: {exc}") from exc
    check_budget(sizes, small)  # a client's request is bounded as the CLI's is: no billion files on the far host
    served = _served(request)
    # files/ must be a real directory of the root (a symlink or a file there is refused, not followed).
    dir_fd = served.open_dir(FILES_DIR, create=True)
    try:
        await asyncio.get_running_loop().run_in_executor(None, _drop_links, dir_fd)
        # The generator works on paths; handing it the checked directory through its descriptor means
        # files/ cannot be swapped for a symlink between the check and the writes.
        directory = Path(f"/proc/self/fd/{dir_fd}")
        report = await asyncio.get_running_loop().run_in_executor(
            None, lambda: generate.make(directory, sizes, small, profile, seed)
        )
    finally:
        os.close(dir_fd)
    return web.json_response(report.manifest.to_json())


def _drop_links(dir_fd: int, depth: int = 2) -> None:
    """Remove symlinks and special files from files/ and its set folders before the generator writes
    there by name: it would otherwise follow a planted link when it rewrites a file."""
    for entry in os.scandir(dir_fd):
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            if depth > 1:
                sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                try:
                    _drop_links(sub, depth - 1)
                finally:
                    os.close(sub)
        elif not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            os.unlink(entry.name, dir_fd=dir_fd)


async def ctl_info(request: web.Request) -> web.Response:
    peer = request.remote
    return web.json_response(hostinfo.describe(peer))


async def ctl_iperf3_key(request: web.Request) -> web.Response:
    path = request.app.get(IPERF3_KEY_KEY)
    if path is None:
        raise web.HTTPNotFound(text="no authenticated iperf3 server here")
    return web.Response(body=path.read_bytes(), content_type="application/x-pem-file")


async def ctl_cpu(request: web.Request) -> web.Response:
    pgids = {os.getpgid(0), *request.app[PGIDS_KEY]()}
    seconds, waits = await asyncio.get_running_loop().run_in_executor(None, schedstat.tree_cpu_and_waits, pgids)
    # the TCP triage's sampling runs in this process but is no server's work on the copies
    sampling_s = request.app[WATCHES_KEY].sampling_cpu_s()
    seconds = max(0.0, seconds - sampling_s)
    # waits_ns: each server thread's run-queue wait so far (schedstat), what a loaded host takes from their turns
    waits_ns = {str(tid): ns for tid, ns in waits.items()} if waits is not None else None
    # sampling_cpu_s: that sampling's own, for a caller that counts this host's CPU another way (a lab's cgroup)
    answer = {"cpu_s": seconds, "sampling_cpu_s": sampling_s, "waits_ns": waits_ns, "pgids": sorted(pgids)}
    return web.json_response(answer)


async def ctl_crypto_cost(request: web.Request) -> web.Response:
    from workbench.shared import cryptocost

    # In a worker thread: the measurement counts its own thread's CPU, and the event loop keeps serving.
    costs = await asyncio.get_running_loop().run_in_executor(None, cryptocost.measure)
    return web.json_response(costs.to_json())


async def ctl_tcp_watch(request: web.Request) -> web.Response:
    peer = request.remote
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    if not peer or not sockname:
        raise web.HTTPBadRequest(text="no addresses to watch")
    role = request.query.get("role", "")
    loop = asyncio.get_running_loop()
    try:
        watch_id = await loop.run_in_executor(None, request.app[WATCHES_KEY].start, peer, sockname[0], role)
    except WatchRefused as exc:
        raise web.HTTPForbidden(text=str(exc)) from exc
    except OSError as exc:  # no socket diagnostics here (not Linux, or a kernel without inet_diag)
        raise web.HTTPNotImplemented(text=f"cannot sample TCP sockets: {exc}") from exc
    return web.json_response({"id": watch_id})


async def ctl_tcp_watch_stop(request: web.Request) -> web.Response:
    watches = request.app[WATCHES_KEY]
    stop = functools.partial(watches.stop, request.remote or "", request.query.get("id", ""))
    try:
        triage = await asyncio.get_running_loop().run_in_executor(None, stop)
    except KeyError as exc:
        raise web.HTTPNotFound(text="no such watch") from exc
    return web.json_response({"tcp": triage})


def make_app(
    root: Path, creds: Credentials, server_pgids: Callable[[], set[int]] = set, bind: str = "127.0.0.1"
) -> web.Application:
    app = web.Application(middlewares=[_auth_and_errors], client_max_size=1 << 20)
    served = ServedRoot(root)
    app[SERVED_KEY] = served
    app[UNAUTHED_KEY] = set()

    watches = Watches(bind)
    app[WATCHES_KEY] = watches

    async def close_root(_: web.Application) -> None:
        served.close()
        watches.close()

    app.on_cleanup.append(close_root)
    app[CREDS_KEY] = creds
    app[PGIDS_KEY] = server_pgids
    app.router.add_get("/f/{path:.+}", get_file)
    app.router.add_put("/f/{path:.+}", put_file)
    app.router.add_post("/ctl/mkdir", ctl_mkdir)
    app.router.add_get("/ctl/hash", ctl_hash)
    app.router.add_post("/ctl/delete", ctl_delete)
    app.router.add_post("/ctl/files", ctl_files)
    app.router.add_get("/ctl/info", ctl_info)
    app.router.add_get("/ctl/cpu", ctl_cpu)
    app.router.add_get("/ctl/iperf3-key", ctl_iperf3_key)
    app.router.add_get("/ctl/crypto-cost", ctl_crypto_cost)
    app.router.add_post("/ctl/tcp-watch", ctl_tcp_watch)
    app.router.add_post("/ctl/tcp-watch/stop", ctl_tcp_watch_stop)
    return app
