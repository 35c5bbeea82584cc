"""The HTTP side of `workbench serve` (aiohttp): file GET with sendfile, streaming PUT, and a small
authenticated control API the runner uses to prepare files, verify uploads and read server CPU.

Routes (all behind HTTP Basic auth, all confined to the served root):
  GET  /f/<path>               the file, via sendfile (aiohttp FileResponse)
  PUT  /f/<path>               streamed to <path>.part, then renamed over <path> (clean overwrite)
  POST /ctl/mkdir?path=P       create a directory and its parents
  GET  /ctl/hash?path=P        {"size", "xxh3_128"} of a file (upload verification)
  POST /ctl/delete?path=P      remove a file or tree under incoming/ only
  POST /ctl/files              generate test files server-side: {"sizes", "small", "profile", "seed"}
  GET  /ctl/info               host metadata (kernel, TCP settings, versions)
  GET  /ctl/cpu                CPU seconds of this process, the supervised servers' groups and all their descendants
  GET  /ctl/iperf3-key         the public RSA key of serve's authenticated iperf3 server
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from fixtures import generate
from fixtures.manifest import hash_file
from workbench import hostinfo
from workbench.confine import confine
from workbench.credentials import Credentials
from workbench.errors import UsageError, WorkbenchError
from workbench.sizes import SmallSet

CHUNK = 1 << 20
FILES_DIR = "files"
INCOMING_DIR = "incoming"

ROOT_KEY = web.AppKey("root", Path)
CREDS_KEY = web.AppKey("creds", Credentials)
PGIDS_KEY = web.AppKey("pgids", Callable)
IPERF3_KEY_KEY = web.AppKey("iperf3_key", Path)  # set once serve's iperf3 runs with RSA authentication


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
    try:
        return await handler(request)
    except UsageError as exc:
        raise web.HTTPForbidden(text=exc.message) from exc
    except FileNotFoundError as exc:
        raise web.HTTPNotFound(text="no such file") from exc
    except WorkbenchError as exc:
        raise web.HTTPInternalServerError(text=exc.one_line()) from exc


def _path(request: web.Request, rel: str) -> Path:
    return confine(request.app[ROOT_KEY], rel)


async def get_file(request: web.Request) -> web.StreamResponse:
    path = _path(request, request.match_info["path"])
    if not path.is_file():
        raise web.HTTPNotFound(text="no such file")
    return web.FileResponse(path, chunk_size=CHUNK)


async def put_file(request: web.Request) -> web.Response:
    path = _path(request, request.match_info["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    loop = asyncio.get_running_loop()
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    try:
        while True:
            chunk = await request.content.read(CHUNK)
            if not chunk:
                break
            # Writes of up to 1 MiB into the page cache are quick; doing them inline keeps the
            # stream ordered and avoids an executor hop per chunk.
            os.write(fd, chunk)
            written += len(chunk)
    except BaseException:
        os.close(fd)
        await loop.run_in_executor(None, lambda: part.unlink(missing_ok=True))
        raise
    os.close(fd)
    os.replace(part, path)
    return web.json_response({"bytes": written})


async def ctl_mkdir(request: web.Request) -> web.Response:
    path = _path(request, request.query.get("path", ""))
    path.mkdir(parents=True, exist_ok=True)
    return web.json_response({"ok": True})


async def ctl_hash(request: web.Request) -> web.Response:
    path = _path(request, request.query.get("path", ""))
    if not path.is_file():
        raise web.HTTPNotFound(text="no such file")
    digest = await asyncio.get_running_loop().run_in_executor(None, hash_file, path)
    return web.json_response({"size": path.stat().st_size, "xxh3_128": digest})


async def ctl_delete(request: web.Request) -> web.Response:
    rel = request.query.get("path", "")
    incoming = _path(request, INCOMING_DIR)
    path = _path(request, rel)
    if path != incoming and incoming not in path.parents:
        raise web.HTTPForbidden(text="only files under incoming/ can be deleted")
    if path.is_dir():
        await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, path, True)
    else:
        path.unlink(missing_ok=True)
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
    directory = _path(request, FILES_DIR)
    report = await asyncio.get_running_loop().run_in_executor(
        None, lambda: generate.make(directory, sizes, small, profile, seed)
    )
    return web.json_response(report.manifest.to_json())


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
    seconds = await asyncio.get_running_loop().run_in_executor(None, hostinfo.process_tree_cpu, pgids)
    return web.json_response({"cpu_s": seconds, "pgids": sorted(pgids)})


def make_app(root: Path, creds: Credentials, server_pgids: Callable[[], set[int]] = set) -> web.Application:
    app = web.Application(middlewares=[_auth_and_errors], client_max_size=1 << 20)
    app[ROOT_KEY] = root
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
    return app
