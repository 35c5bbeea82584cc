"""Client of `serve`'s control API: prepare files on the far host, verify uploads, read its CPU and info.

Plain urllib (blocking, tiny requests); the password goes in an Authorization header, never a URL.
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from workbench.shared.errors import AuthError, NetworkError, NotFoundError, WorkbenchError, from_os_error
from workbench.shared.jsontypes import JSONValue
from workbench.shared.target import Target, url_host

# Deadlines: nothing hangs. A reachable host answers a TCP connect in milliseconds, so a few
# seconds separate "unreachable" from "slow"; every call then waits at most CALL_TIMEOUT_S per read.
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 30.0
# /ctl/files writes the test files before it answers: several GiB on a slow far disk (an SD card, a NAS on
# USB 2) legitimately take minutes, so that one call's deadline grows with the bytes asked for, assuming
# the far host writes at least this fast (first-touch tmpfs here is ~370 MB/s, a USB 2 disk ~30 MB/s).
SLOWEST_GENERATE_BYTES_PER_S = 10_000_000
# /ctl/hash reads the uploaded file once (xxh3 runs at GB/s; the far disk is the bound).
SLOWEST_HASH_BYTES_PER_S = 20_000_000


class _DeadlineConnection(http.client.HTTPConnection):
    """An HTTP connection whose connect has its own, short deadline (urllib uses one timeout for both)."""

    def __init__(
        self,
        host: str,
        port: int | None = None,
        timeout: float | None = None,  # urllib always passes the request's
        source_address: tuple[str, int] | None = None,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        super().__init__(host, port, timeout, source_address)
        self.bind_to = source_address
        self.connect_timeout_s = connect_timeout_s

    def connect(self) -> None:
        limit = self.connect_timeout_s if self.timeout is None else min(self.connect_timeout_s, self.timeout)
        self.sock = socket.create_connection((self.host, self.port), limit, self.bind_to)
        self.sock.settimeout(self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _DeadlineHandler(urllib.request.HTTPHandler):
    def __init__(self, connect_timeout_s: float) -> None:
        super().__init__()
        self.connect_timeout_s = connect_timeout_s

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_DeadlineConnection, connect_timeout_s=self.connect_timeout_s), req)


class Control:
    def __init__(
        self, target: Target, timeout: float = CALL_TIMEOUT_S, connect_timeout: float = CONNECT_TIMEOUT_S
    ) -> None:
        self.target = target
        self.base = f"http://{url_host(target.host)}:{target.port('http')}/ctl/"
        token = base64.b64encode(f"{target.credentials.user}:{target.credentials.password}".encode()).decode()
        self._auth = f"Basic {token}"
        self.timeout = min(timeout, CALL_TIMEOUT_S)
        self._opener = urllib.request.build_opener(_DeadlineHandler(connect_timeout))
        self._where = (target.host, target.port("http"))
        # each server thread's run-queue wait (ns) as of the last cpu_seconds(), by thread id; None: unread
        self.waits_ns: dict[int, int] | None = None
        # CPU seconds serve's TCP-watch sampling has used so far, as of the last cpu_seconds(); None: unread
        self.sampling_cpu_s: float | None = None

    def _call(
        self,
        method: str,
        name: str,
        params: dict[str, str] | None = None,
        body: JSONValue = None,
        raw: bool = False,
        timeout: float | None = None,
    ) -> Any:
        url = self.base + name + ("?" + urllib.parse.urlencode(params) if params else "")
        data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", self._auth)
        request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=timeout or self.timeout) as response:
                data = response.read()
                return data if raw else json.loads(data or b"null")
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")[:200]
            if exc.code == 401:
                raise AuthError(
                    "the server refused the credentials", "check --credentials / WORKBENCH_PASSWORD"
                ) from exc
            if exc.code == 404:
                raise NotFoundError(f"not found on the server: {params}", "check the path") from exc
            raise WorkbenchError(f"server control call {name} failed: HTTP {exc.code} {text}") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, http.client.HTTPException):
                raise self._not_serve(name, exc.reason) from exc
            reason = exc.reason if isinstance(exc.reason, OSError) else OSError(str(exc.reason))
            raise from_os_error(
                reason, "talking to workbench serve", self.target.host, self.target.port("http")
            ) from exc
        except http.client.HTTPException as exc:  # before OSError: RemoteDisconnected is both
            raise self._not_serve(name, exc) from exc
        except OSError as exc:
            raise from_os_error(exc, "talking to workbench serve", self.target.host, self.target.port("http")) from exc
        except ValueError as exc:
            raise NetworkError("the server's control API answered garbage", "is it workbench serve?") from exc

    def _not_serve(self, name: str, exc: http.client.HTTPException) -> NetworkError:
        """Something listens on the HTTP port but did not answer HTTP as serve does (BadStatusLine and kin)."""
        host, port = self._where
        where = f"{url_host(host)}:{port}"
        if isinstance(exc, http.client.RemoteDisconnected):
            return NetworkError(
                f"control call {name} on {where} got no HTTP answer (the connection closed)",
                "is another service on that port, or did workbench serve stop?",
            )
        return NetworkError(
            f"control call {name} on {where} did not answer as workbench serve ({type(exc).__name__})",
            "is another service on that port?",
        )

    def mkdir(self, path: str) -> None:
        self._call("POST", "mkdir", {"path": path})

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]:
        return self._call("GET", "hash", {"path": path}, timeout=self.timeout + size_bytes / SLOWEST_HASH_BYTES_PER_S)

    def delete(self, path: str) -> None:
        self._call("POST", "delete", {"path": path})

    def make_files(self, sizes: list[int], small: list[tuple[int, int]], profile: str, seed: int) -> dict[str, Any]:
        total_bytes = sum(sizes) + sum(count * size for count, size in small)
        return self._call(
            "POST",
            "files",
            body={"sizes": sizes, "small": small, "profile": profile, "seed": seed},
            timeout=self.timeout + total_bytes / SLOWEST_GENERATE_BYTES_PER_S,
        )

    def info(self) -> dict[str, Any]:
        return self._call("GET", "info")

    def iperf3_key(self) -> bytes | None:
        """The public key of the far host's authenticated iperf3 server, or None if it runs none."""
        try:
            return self._call("GET", "iperf3-key", raw=True)
        except NotFoundError:
            return None

    def cpu_seconds(self) -> float | None:
        """CPU seconds of the far host's servers so far; their threads' run-queue waits, read with it, are kept
        in waits_ns."""
        self.waits_ns = self.sampling_cpu_s = None
        try:
            answer = self._call("GET", "cpu")
            cpu_s = float(answer["cpu_s"])
            waits = answer.get("waits_ns")  # an older serve says none
            self.waits_ns = {int(t): int(ns) for t, ns in waits.items()} if isinstance(waits, dict) else None
            sampling = answer.get("sampling_cpu_s")  # an older serve says none
            self.sampling_cpu_s = float(sampling) if isinstance(sampling, int | float) else None
            return cpu_s
        except (WorkbenchError, KeyError, TypeError, ValueError, AttributeError):
            return None

    def cpu_waits_ns(self) -> dict[int, int] | None:
        """The server threads' run-queue waits read with the last cpu_seconds() (None: not known)."""
        return self.waits_ns

    def crypto_costs(self) -> dict[str, Any] | None:
        """The far host's own CPU cost per byte of SMB's signing and encryption (workbench.shared.cryptocost, as
        JSON), or None where it cannot say (an older serve)."""
        try:
            answer = self._call("GET", "crypto-cost")
        except WorkbenchError:
            return None
        return answer if isinstance(answer, dict) else None

    def tcp_watch_start(self, role: str) -> str | None:
        """Start sampling the far host's sockets to this client as `role`; the watch id, or None where the far
        host cannot (an older serve, or no socket diagnostics there)."""
        try:
            return str(self._call("POST", "tcp-watch", {"role": role})["id"])
        except (WorkbenchError, KeyError, TypeError):
            return None

    def tcp_watch_stop(self, watch_id: str) -> dict[str, Any] | None:
        """The far host's triage of the watch (workbench.shared.triage.TcpTriage as JSON), or None."""
        try:
            answer = self._call("POST", "tcp-watch/stop", {"id": watch_id})
        except WorkbenchError:
            return None
        return answer.get("tcp") if isinstance(answer, dict) else None
