"""curl as the native reference for HTTP and FTP: what a fast C client reaches on the same server.

Credentials go to curl through a config read from stdin (`-K -`), never argv. Every invocation is
bounded with --max-time (curl 7.88 FTP with many URLs in one invocation hung in 5 of 6 tries, never
opening the passive data connection, so FTP file sets use one invocation per file, bounded each; HTTP
sets use one invocation for all).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

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
                # the answer's body to /dev/null: stdout (read whole afterwards) keeps only --write-out's lines,
                # however long a body a server sends
                lines += [f"upload-file = {_quote(local)}", f"url = {_quote(url)}", 'output = "/dev/null"']
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
            str(max(1, round(self.options.connect_timeout_s))),
            "--speed-limit",
            "1",
            "--speed-time",
            str(int(self.options.stall_timeout_s)),
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
            stall_timeout=self.options.stall_timeout_s,
        )
        if done.returncode != 0:
            raise self._error(done, jobs[0].remote)
        self._check_statuses(done, jobs)
        if not upload:
            landed = sum(j.local.stat().st_size for j in jobs)
            progress(max(0, landed - done.reported))

    def _check_statuses(self, done: Completed, jobs: Sequence[FileCopy]) -> None:
        """After curl exited 0: what --fail lets pass may still be no copy (see CurlHttpClient)."""

    def _error(self, done: Completed, remote: str) -> WorkbenchError:
        # curl's own line starts "curl: (N)": the messages below say "curl:" once, not twice
        text = (last_line(done.stderr) or f"exit status {done.returncode}").removeprefix("curl: ")
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
        with Control(self.target, timeout=self.options.stall_timeout_s) as control:
            control.info()

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        self._run([FileCopy(local, remote, 0)], upload=False, progress=progress)

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        self._run([FileCopy(local, remote, local.stat().st_size)], upload=True, progress=progress)

    def details(self) -> ClientDetails:
        return ClientDetails(timed_includes_setup=True, process="one curl process per copy (per set for HTTP sets)")


_STATUS_MARK = "workbench-http-status="  # marks the --write-out line of each transfer on stdout


def _webdav() -> ModuleType:
    """protocols/http.py's WebDAV helpers (paths, auth choice, status errors), shared with aiohttp."""
    from workbench.protocols import http

    return http


class CurlHttpClient(_CurlClient):
    """`workbench serve`'s /f/ files, or a stock WebDAV server's (target.stock: see protocols/http.py).

    Against WebDAV the login scheme is learnt once by connect() from the server's 401 and then named
    (--digest or --basic). Not --anyauth: against WsgiDAV (cheroot answers 100-continue before the login is
    checked) it sent each upload's body twice, a 50 MiB PUT taking 0.19 s instead of 0.10 s on loopback.
    """

    protocol = "http"
    name = "curl"
    _auth_flag: str | None = None  # stock: "--digest" / "--basic"; None: the server asked for no login

    def _url(self, remote: str) -> str:
        if self.target.stock:
            return _webdav().webdav_base(self.target) + _webdav().webdav_path(self.target, remote)
        return f"http://{url_host(self.target.host)}:{self.target.port('http')}/f/{remote}"

    def _argv(self) -> list[str]:
        argv = super()._argv()
        if not self.target.stock:
            return argv
        if self._auth_flag:
            argv.append(self._auth_flag)
        if self.target.tls:
            if not self.options.verify_host_keys:
                argv.append("--insecure")
            elif ca_file := os.environ.get("CURL_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE"):
                argv += ["--cacert", ca_file]  # curl 7.88 ignores SSL_CERT_FILE, which Python honours; no secret
        # Each transfer's status, checked by _check_statuses (a WebDAV call's own --write-out, later, wins)
        return [*argv, "--write-out", f"\\n{_STATUS_MARK}%{{http_code}}\\n"]

    def _check_statuses(self, done: Completed, jobs: Sequence[FileCopy]) -> None:
        """--fail passes a 3xx: curl, not told -L, follows no redirect, and the file was neither sent nor
        fetched (a download would hold the redirect's body). Every transfer must have answered 2xx."""
        if not self.target.stock:
            return
        statuses = re.findall(rf"^{_STATUS_MARK}(\d{{3}})$", done.stdout, re.MULTILINE)
        for job, status in zip(jobs, statuses, strict=False):
            if not 200 <= int(status) < 300:
                raise _webdav().webdav_error(int(status), job.remote)

    def _config(self, pairs: Sequence[tuple[str, str]], upload: bool) -> str:
        text = super()._config(pairs, upload)
        if self.target.stock and self._auth_flag is None:
            # A server that asked for no login never gets the password (curl would send Basic unasked).
            text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("user = "))
        return text

    def _error(self, done: Completed, remote: str) -> WorkbenchError:
        if not self.target.stock:
            return super()._error(done, remote)
        # curl's own error line; for a certificate it is followed by a paragraph of advice.
        found = re.search(r"^curl: \(\d+\) (.+)$", done.stderr, re.MULTILINE)
        text = found[1].strip() if found else (last_line(done.stderr) or f"exit status {done.returncode}")
        if done.returncode in (51, 60, 83):  # the peer certificate, its name or its issuer not verified
            return AuthError(
                f"curl: cannot verify the WebDAV server's certificate ({text})", _webdav().UNTRUSTED_CERT_HINT
            )
        if status := re.search(r"returned error: (\d{3})", text):  # --fail's message for an HTTP error
            return _webdav().webdav_error(int(status[1]), remote)
        return super()._error(done, remote)

    def _dav_call(
        self, method: str, paths: Sequence[str], headers: Sequence[str] = (), login: bool = True, body: str = ""
    ) -> tuple[list[int], str]:
        """One curl run of `method` on the collections `paths` (in order): their HTTP statuses, and stdout
        (the response headers, then each status on a line of its own).

        Without --fail (an answer such as MKCOL's 405 is not a failure); a transport error still is.
        """
        dav = _webdav()
        argv = [a for a in self._argv() if a != "--fail"]
        argv += ["--request", method, "--dump-header", "-", "--write-out", "%{http_code}\\n"]
        for header in headers:
            argv += ["--header", header]
        if body:
            argv += ["--data-binary", body]
        urls = [dav.webdav_base(self.target) + dav.webdav_path(self.target, p, collection=True) for p in paths]
        config = self._config([], upload=False) if login else ""
        config += "".join(f'url = {_quote(u)}\noutput = "/dev/null"\n' for u in urls)
        done = run_native(argv, progress=lambda n: None, total_bytes=None, timeout=MAX_TIME_S + 10, stdin_text=config)
        if done.returncode != 0:
            raise self._error(done, paths[0] or "/")
        return [int(code) for code in re.findall(r"^(\d{3})$", done.stdout, re.MULTILINE)], done.stdout

    def connect(self) -> None:
        if not self.target.stock:
            super().connect()
            return
        # The prefix directory answers PROPFIND; the first try carries no login, its 401 names the scheme.
        dav = _webdav()
        status, out = self._propfind(login=False)
        if status == 401:
            challenges = re.findall(r"^www-authenticate:\s*(.*?)\s*$", out, re.MULTILINE | re.IGNORECASE)
            self._auth_flag = "--" + dav.pick_auth(challenges)
            status, _ = self._propfind(login=True)
        if status != 207:
            raise dav.webdav_error(status, f"the directory {dav.webdav_path(self.target, '', collection=True)}")

    def _propfind(self, login: bool) -> tuple[int, str]:
        """PROPFIND (Depth 0) of the prefix directory: its status and the response headers."""
        headers = ["Depth: 0", "Content-Type: application/xml; charset=utf-8"]
        statuses, out = self._dav_call("PROPFIND", [""], headers, login, _webdav().PROPFIND_BODY.decode())
        return statuses[-1], out

    def mkdir(self, remote_dir: str) -> None:
        if not self.target.stock:
            with Control(self.target, timeout=self.options.stall_timeout_s) as control:
                control.mkdir(remote_dir)
            return
        dav = _webdav()
        parents = dav.webdav_parents(remote_dir)
        if parents:
            for path, status in zip(parents, self._dav_call("MKCOL", parents)[0], strict=True):
                if status not in dav.MKCOL_OK:
                    raise dav.webdav_error(status, path)

    def remove_tree(self, remote_dir: str) -> None:
        if not self.target.stock:
            super().remove_tree(remote_dir)
            return
        dav = _webdav()
        dav.removable(self.target, remote_dir)
        statuses, _ = self._dav_call("DELETE", [remote_dir], headers=["Depth: infinity"])
        dav.check_deleted(statuses[-1], remote_dir)

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._run(files, upload=False, progress=progress)

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._run(files, upload=True, progress=progress)


class CurlFtpClient(_CurlClient):
    protocol = "ftp"
    name = "curl"

    def _url(self, remote: str) -> str:
        # Stock servers: beneath the URL's directory. The path is relative to the login directory either way
        # (curl CWDs through it), percent-encoded so spaces and '#' survive.
        path = quote(self.target.remote_path(remote) if self.target.stock else remote)
        return f"ftp://{url_host(self.target.host)}:{self.target.port('ftp')}/{path}"

    def _argv(self) -> list[str]:
        argv = [*super()._argv(), "--ftp-pasv"]
        if self.target.tls:
            # Explicit TLS (AUTH TLS, then PROT P) on an ftp:// URL; curl's own ftps:// means implicit TLS.
            argv.append("--ssl-reqd")
            if not self.options.verify_host_keys:
                argv.append("--insecure")
            elif ca_file := os.environ.get("CURL_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE"):
                argv += ["--cacert", ca_file]  # as ftplib honours SSL_CERT_FILE; a path, no secret
        return argv

    def _error(self, done: Completed, remote: str) -> WorkbenchError:
        # curl's own "curl: (N) ..." line: after a certificate failure a paragraph of advice follows it.
        said = [line for line in done.stderr.splitlines() if line.startswith("curl: (")]
        text = (said[-1] if said else last_line(done.stderr)) or f"exit status {done.returncode}"
        if done.returncode in (51, 60, 83):  # peer certificate, its name or its issuer not verified
            return AuthError(
                f"curl: the FTPS server's certificate is not trusted ({text})",
                "trust its CA via CURL_CA_BUNDLE or SSL_CERT_FILE, or --insecure-host-keys on a trusted link",
            )
        if done.returncode == 64:  # --ssl-reqd and the server has no AUTH TLS
            return WorkbenchError(f"curl: the FTP server does not offer explicit TLS ({text})", "use ftp://")
        if done.returncode == 9:  # curl CWDs into the file's directory first: it is missing (or not ours)
            return NotFoundError(f"curl: the directory of {remote} is not on the server ({text})", "check the path")
        return super()._error(done, remote)

    def connect(self) -> None:
        # FTP may be served without the HTTP control API (a stock server never has it): check the FTP login
        # itself, over TLS for ftps://, with ftplib's errors.
        from workbench.protocols.ftp import FtplibClient

        with FtplibClient(self.target, self.options):
            pass

    def mkdir(self, remote_dir: str) -> None:
        from workbench.protocols.ftp import FtplibClient

        with FtplibClient(self.target, self.options) as ftp:
            ftp.mkdir(remote_dir)

    def remove_tree(self, remote_dir: str) -> None:
        from workbench.protocols.ftp import FtplibClient

        with FtplibClient(self.target, self.options) as ftp:
            ftp.remove_tree(remote_dir)
