"""curl as the native reference for HTTP and FTP: what a fast C client reaches on the same server.

Credentials go to curl through a config read from stdin (`-K -`), never argv. Every invocation is
bounded with --max-time (curl 7.88 FTP with many URLs in one invocation hung in 5 of 6 tries, never
opening the passive data connection, so FTP file sets use one invocation per file, bounded each; HTTP
sets use one invocation for all).
"""

from __future__ import annotations

import ftplib
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from workbench.protocols.base import Client, FileCopy, Progress
from workbench.protocols.control import Control
from workbench.protocols.details import ClientDetails
from workbench.protocols.process import Completed, last_line, run_native
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, WorkbenchError
from workbench.shared.target import url_host

# Generous: a copy on a slow link (100 Mbit/s WAN, 1 GiB) takes ~90 s; the stall guard ends dead ones sooner.
MAX_TIME_S = 1800


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _CurlClient(Client):
    scheme: str

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None if shutil.which("curl") else "curl not installed: apt-get install curl"

    def _url(self, remote: str) -> str:
        raise NotImplementedError

    def _config(self, pairs: Sequence[tuple[str, str]], upload: bool) -> str:
        creds = self.target.credentials
        lines = [f"user = {_quote(creds.user + ':' + creds.password)}"]
        for local, url in pairs:
            if upload:
                lines += [f"upload-file = {_quote(local)}", f"url = {_quote(url)}"]
            else:
                lines += [f"url = {_quote(url)}", f"output = {_quote(local)}"]
        return "\n".join(lines) + "\n"

    def _argv(self) -> list[str]:
        return [
            "curl",
            "--silent",
            "--show-error",
            "--fail",
            "--max-time",
            str(MAX_TIME_S),
            "--connect-timeout",
            str(max(1, round(self.options.connect_timeout))),
            "--speed-limit",
            "1",
            "--speed-time",
            str(int(self.options.timeout)),
            "-K",
            "-",
        ]

    def _run(self, jobs: Sequence[FileCopy], upload: bool, progress: Progress) -> None:
        pairs = [(str(j.local), self._url(j.remote)) for j in jobs]
        total = sum(j.size for j in jobs) if upload else None
        done = run_native(
            self._argv(),
            progress=progress,
            total_bytes=total,
            timeout=MAX_TIME_S + 10,
            watch=None if upload else (lambda: sum(_size(j.local) for j in jobs)),
            watch_reads=upload,
            stdin_text=self._config(pairs, upload),
            stall_timeout=self.options.timeout,
        )
        if done.returncode != 0:
            raise self._error(done, jobs[0].remote)
        if not upload:
            landed = sum(j.local.stat().st_size for j in jobs)
            progress(max(0, landed - done.reported))

    def _error(self, done: Completed, remote: str) -> WorkbenchError:
        text = last_line(done.stderr) or f"exit status {done.returncode}"
        code = done.returncode
        if code == 67 or re.search(r"\b(401|530)\b", text):
            return AuthError(f"curl: the server refused the credentials ({text})", "check the credentials file")
        if code == 78 or re.search(r"\b(404|550)\b", text):
            return NotFoundError(f"curl: {remote} not found on the server", "check the remote path")
        if code in (6, 7, 28, 18, 52, 55, 56, 35):
            return NetworkError(f"curl: {text}", "the server stopped, or the host is unreachable")
        return WorkbenchError(f"curl failed: {text}")

    def connect(self) -> None:
        """curl opens a connection per invocation; check reachability and credentials once up front."""
        Control(self.target, timeout=self.options.timeout).info()

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        self._run([FileCopy(local, remote, 0)], upload=False, progress=progress)

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        self._run([FileCopy(local, remote, local.stat().st_size)], upload=True, progress=progress)

    def details(self) -> ClientDetails:
        return ClientDetails(timed_includes_setup=True, process="one curl process per copy (per set for HTTP sets)")


class CurlHttpClient(_CurlClient):
    protocol = "http"
    name = "curl"

    def _url(self, remote: str) -> str:
        return f"http://{url_host(self.target.host)}:{self.target.port('http')}/f/{remote}"

    def mkdir(self, remote_dir: str) -> None:
        Control(self.target, timeout=self.options.timeout).mkdir(remote_dir)

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._run(files, upload=False, progress=progress)

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._run(files, upload=True, progress=progress)


class CurlFtpClient(_CurlClient):
    protocol = "ftp"
    name = "curl"

    def _url(self, remote: str) -> str:
        return f"ftp://{url_host(self.target.host)}:{self.target.port('ftp')}/{remote}"

    def _argv(self) -> list[str]:
        return [*super()._argv(), "--ftp-pasv"]

    def connect(self) -> None:
        # FTP may be served without the HTTP control API: check the FTP login itself.
        try:
            with ftplib.FTP(timeout=self.options.timeout) as ftp:
                ftp.connect(self.target.host, self.target.port("ftp"), timeout=self.options.connect_timeout)
                ftp.sock.settimeout(self.options.timeout)
                ftp.login(self.target.credentials.user, self.target.credentials.password)
        except ftplib.error_perm as exc:
            raise AuthError("FTP server refused the credentials", "check the credentials file") from exc
        except (OSError, EOFError, ftplib.Error) as exc:
            raise NetworkError(f"cannot reach the FTP server: {exc}", "is 'workbench serve' running?") from exc

    def mkdir(self, remote_dir: str) -> None:
        from workbench.protocols.ftp import FtplibClient

        with FtplibClient(self.target, self.options) as ftp:
            ftp.mkdir(remote_dir)
