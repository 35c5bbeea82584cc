"""Client of `serve`'s control API: prepare files on the far host, verify uploads, read its CPU and info.

Plain urllib (blocking, tiny requests); the password goes in an Authorization header, never a URL.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from protocols.base import Target, url_host
from workbench.errors import AuthError, NetworkError, NotFoundError, WorkbenchError, from_os_error


class Control:
    def __init__(self, target: Target, timeout: float = 600.0) -> None:
        self.target = target
        self.base = f"http://{url_host(target.host)}:{target.port('http')}/ctl/"
        token = base64.b64encode(f"{target.credentials.user}:{target.credentials.password}".encode()).decode()
        self._auth = f"Basic {token}"
        self.timeout = timeout
        self._where = (target.host, target.port("http"))

    def _call(
        self, method: str, name: str, params: dict[str, str] | None = None, body: Any = None, raw: bool = False
    ) -> Any:
        url = self.base + name + ("?" + urllib.parse.urlencode(params) if params else "")
        data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", self._auth)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
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
            reason = exc.reason if isinstance(exc.reason, OSError) else OSError(str(exc.reason))
            raise from_os_error(
                reason, "talking to workbench serve", self.target.host, self.target.port("http")
            ) from exc
        except OSError as exc:
            raise from_os_error(exc, "talking to workbench serve", self.target.host, self.target.port("http")) from exc
        except ValueError as exc:
            raise NetworkError("the server's control API answered garbage", "is it workbench serve?") from exc

    def mkdir(self, path: str) -> None:
        self._call("POST", "mkdir", {"path": path})

    def hash(self, path: str) -> dict[str, Any]:
        return self._call("GET", "hash", {"path": path})

    def delete(self, path: str) -> None:
        self._call("POST", "delete", {"path": path})

    def make_files(self, sizes: list[int], small: list[tuple[int, int]], profile: str, seed: int) -> dict[str, Any]:
        return self._call("POST", "files", body={"sizes": sizes, "small": small, "profile": profile, "seed": seed})

    def info(self) -> dict[str, Any]:
        return self._call("GET", "info")

    def iperf3_key(self) -> bytes | None:
        """The public key of the far host's authenticated iperf3 server, or None if it runs none."""
        try:
            return self._call("GET", "iperf3-key", raw=True)
        except NotFoundError:
            return None

    def cpu_seconds(self) -> float | None:
        try:
            return float(self._call("GET", "cpu")["cpu_s"])
        except (WorkbenchError, KeyError, TypeError, ValueError):
            return None
