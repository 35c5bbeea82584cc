"""FTP with ftplib: passive mode, 1 MiB blocks (the 8 KiB default downloads 535 MB/s on loopback, 1 MiB 924).

Against a stock server (target.stock) every path lies beneath target.prefix, relative to the login
directory; ftps:// (target.tls) is explicit TLS: AUTH TLS, then PROT P so the data connections are
encrypted too, with the certificate checked against the system's CA store (SSL_CERT_FILE names another)
unless ClientOptions.verify_host_keys is off.
"""

from __future__ import annotations

import dataclasses
import ftplib
import re
import socket
import ssl
from pathlib import Path, PurePosixPath
from typing import Any

from workbench.protocols.base import Client, Progress, listed_name
from workbench.protocols.details import ClientDetails
from workbench.shared.errors import (
    AuthError,
    NetworkError,
    NotFoundError,
    UsageError,
    WorkbenchError,
    from_os_error,
)

# remove_tree's depth limit: deeper than any scratch directory, shallow enough to stop a server's link loop.
MAX_TREE_DEPTH = 64
_UNSUPPORTED = ("500", "501", "502", "504")  # reply codes of a server that lacks a command (e.g. MLSD)

# One line of a Unix-style LIST: type and permissions, links, owner [group], size, month day time-or-year, one
# space, the name (which may hold spaces).
_UNIX_LINE = re.compile(
    r"^(?P<kind>[-dlbcps])[-rwxsStT]{9}\S*\s+\d+\s+(?:\S+\s+){1,2}\d+\s+"
    r"\S+\s+\d{1,2}\s+(?:\d{1,2}:\d{2}|\d{4}) (?P<name>.+)$"
)
# One line of a DOS-style LIST (IIS): date time <DIR>-or-size name.
_DOS_LINE = re.compile(r"^\d{2}-\d{2}-\d{2,4}\s+\d{1,2}:\d{2}(?:[AaPp][Mm])?\s+(?P<size><DIR>|\d+)\s+(?P<name>.+)$")


def parse_list_line(line: str) -> tuple[str, str] | None:
    """(name, kind) of one LIST line, kind "dir", "link" or "other" (files and specials); None if no entry.

    LIST comes from lstat on Unix servers, so "dir" there is a real directory and a link says "link".
    """
    if m := _UNIX_LINE.match(line):
        kind = {"d": "dir", "l": "link"}.get(m["kind"], "other")
        name = m["name"].split(" -> ", 1)[0] if kind == "link" else m["name"]
    elif m := _DOS_LINE.match(line):
        kind, name = ("dir" if m["size"] == "<DIR>" else "other"), m["name"]
    else:
        return None  # "total 12" and the like
    return None if name in (".", "..") else (name, kind)


class FtplibClient(Client):
    protocol = "ftp"
    name = "ftplib"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ftp: ftplib.FTP | None = None

    def _translate(self, exc: BaseException, what: str) -> WorkbenchError:
        if isinstance(exc, ftplib.error_perm):
            code = str(exc)[:3]
            if code == "530":
                return AuthError("FTP server refused the credentials", "check --credentials / WORKBENCH_PASSWORD")
            if code == "550":
                return NotFoundError(f"FTP: {what}: {str(exc)[4:]}", "check the remote path")
            return WorkbenchError(f"FTP {what} refused: {exc}")
        if isinstance(exc, ssl.SSLCertVerificationError):
            return AuthError(
                f"FTPS: the certificate of {self.target.host}:{self.target.port('ftp')} is not trusted "
                f"({exc.verify_message})",
                "point SSL_CERT_FILE at its CA certificate, or --insecure-host-keys on a trusted link",
            )
        if isinstance(exc, ssl.SSLError):
            return NetworkError(f"FTPS {what}: TLS failed: {exc.reason or exc}", "is the server speaking FTPS?")
        if isinstance(exc, socket.timeout | TimeoutError):
            return NetworkError(f"FTP {what} stalled for {self.options.timeout:.0f} s", "the server stopped?")
        if isinstance(exc, EOFError | ftplib.error_temp | ftplib.error_proto | ftplib.error_reply):
            return NetworkError(f"FTP {what} failed: {exc or 'connection closed'}", "the server stopped mid-transfer")
        if isinstance(exc, OSError):
            return from_os_error(exc, f"FTP {what}", self.target.host, self.target.port("ftp"))
        return WorkbenchError(f"FTP {what} failed: {exc}")

    def _path(self, remote: str) -> str:
        """The path as the server sees it, relative to the login directory."""
        return self.target.remote_path(remote) if self.target.stock else remote

    def tls_context(self) -> ssl.SSLContext:
        """Verifies the server's certificate and name (system CA store, or SSL_CERT_FILE) unless told not to."""
        context = ssl.create_default_context()
        if not self.options.verify_host_keys:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _session(self) -> ftplib.FTP:
        if self.target.tls:
            return ftplib.FTP_TLS(context=self.tls_context(), timeout=self.options.timeout)
        return ftplib.FTP(timeout=self.options.timeout)

    def connect(self) -> None:
        ftp = self._session()
        try:
            ftp.connect(self.target.host, self.target.port("ftp"), timeout=self.options.connect_timeout)
        except OSError as exc:  # refused, unreachable, or a silent host (a timeout here is no stalled transfer)
            ftp.close()
            raise from_os_error(exc, "connecting over FTP", self.target.host, self.target.port("ftp")) from exc
        except (EOFError, ftplib.Error) as exc:  # something answered, but not an FTP server's greeting
            ftp.close()
            raise self._translate(exc, "login") from exc
        try:
            # from here on (and for every data connection) a stall is options.timeout without a byte
            ftp.timeout = self.options.timeout
            ftp.sock.settimeout(self.options.timeout)
            if isinstance(ftp, ftplib.FTP_TLS):
                self._secure(ftp)
            ftp.login(self.target.credentials.user, self.target.credentials.password)
            if isinstance(ftp, ftplib.FTP_TLS):
                ftp.prot_p()  # encrypt the data connections too, not only the login
            ftp.voidcmd("TYPE I")
        except (OSError, EOFError, ftplib.Error) as exc:
            ftp.close()
            raise self._translate(exc, "login") from exc
        ftp.set_pasv(True)
        self._ftp = ftp

    def _secure(self, ftp: ftplib.FTP_TLS) -> None:
        """AUTH TLS before the password is sent; a server without it is named, not sent the password in clear."""
        try:
            ftp.auth()
        except ftplib.error_perm as exc:
            raise WorkbenchError(
                f"{self.target.host}:{self.target.port('ftp')} does not offer explicit TLS (AUTH TLS): {exc}",
                "use ftp:// if plain FTP is acceptable on this link",
            ) from exc

    @property
    def ftp(self) -> ftplib.FTP:
        if self._ftp is None:  # a reconnect after a failed row did not get through: fail the row, not the run
            raise NetworkError("not connected to the FTP server", "the server stopped or refused the login")
        return self._ftp

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        try:
            with open(local, "wb", buffering=0) as fh:

                def write(chunk: bytes) -> None:
                    fh.write(chunk)
                    progress(len(chunk))

                self.ftp.retrbinary(f"RETR {self._path(remote)}", write, blocksize=self.options.block_size)
        except (OSError, EOFError, ftplib.Error) as exc:
            raise self._translate(exc, f"download of {remote}") from exc

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        try:
            with open(local, "rb", buffering=0) as fh:
                self.ftp.storbinary(
                    f"STOR {self._path(remote)}",
                    fh,
                    blocksize=self.options.block_size,
                    callback=lambda c: progress(len(c)),
                )
        except (OSError, EOFError, ftplib.Error) as exc:
            raise self._translate(exc, f"upload of {remote}") from exc

    def mkdir(self, remote_dir: str) -> None:
        path = PurePosixPath()
        for part in PurePosixPath(self._path(remote_dir)).parts:
            path /= part
            try:
                self.ftp.mkd(str(path))
            except ftplib.error_perm as exc:
                if not str(exc).startswith("550"):  # 550: exists already
                    raise self._translate(exc, f"mkdir {path}") from exc
            except (OSError, EOFError, ftplib.Error) as exc:
                raise self._translate(exc, f"mkdir {path}") from exc

    # -- remove_tree: depth first, deleting links as entries and never listing or entering through one

    def is_dir(self, remote: str) -> bool:
        return self._is_dir_path(self._path(remote))

    def _is_dir_path(self, path: str) -> bool:
        """CWD there and back: the one test every FTP server answers (MLST is optional, SIZE is for files)."""
        if not path:
            return True  # the login directory
        try:
            here = self.ftp.pwd()
            try:
                self.ftp.cwd(path)
            except ftplib.error_perm as exc:
                if str(exc).startswith("550"):
                    return False
                raise
            self.ftp.cwd(here)
            return True
        except (OSError, EOFError, ftplib.Error) as exc:
            raise self._translate(exc, f"looking up {path}") from exc

    def remove_tree(self, remote_dir: str) -> None:
        top = self._path(remote_dir)
        if not top:
            raise UsageError("refusing to delete the FTP login directory itself", "name a directory beneath it")
        try:
            self._remove_dir(top, 0)
        except ftplib.error_perm as exc:  # a 550 here is a refusal (not empty, no permission), not a missing path
            raise WorkbenchError(f"FTP: could not remove {top}: {exc}", "see what is left there") from exc
        except (OSError, EOFError, ftplib.Error) as exc:
            raise self._translate(exc, f"removing {top}") from exc

    def _remove_dir(self, path: str, depth: int) -> None:
        if depth > MAX_TREE_DEPTH:
            raise WorkbenchError(f"FTP: {path} is nested deeper than {MAX_TREE_DEPTH} levels", "delete it by hand")
        try:
            entries = self._mlsd(path)
            from_mlsd = entries is not None
            if entries is None:
                entries = self._list(path)
        except ftplib.error_perm as exc:
            # 550 is also "permission denied" (vsftpd): only a directory that is not there is "not found"
            if depth == 0 and str(exc).startswith("550") and not self._is_dir_path(path):
                raise NotFoundError(f"FTP: no directory {path} to remove ({exc})", "check the path") from exc
            raise
        self._remove_entries(path, entries, from_mlsd, depth)
        try:
            self.ftp.rmd(path)
        except ftplib.error_perm as exc:
            # MLSD may leave out what it cannot stat (pyftpdlib hides dangling links): LIST shows them
            leftovers = self._list(path) if from_mlsd and str(exc).startswith("550") else []
            if not leftovers:
                raise
            self._remove_entries(path, leftovers, False, depth)
            self.ftp.rmd(path)

    def _remove_entries(self, path: str, entries: list[tuple[str, str]], from_mlsd: bool, depth: int) -> None:
        links: set[str] | None = None
        for name, kind in entries:
            child = f"{path}/{listed_name(name, f'the FTP server, in {path},')}"
            if kind != "dir":
                self.ftp.delete(child)  # files, specials and links alike: DELE unlinks, never follows
                continue
            if from_mlsd:
                # MLSD may describe a link to a directory as the directory (pyftpdlib stats through links).
                # DELE unlinks a link and is refused on a real directory, so try it first.
                try:
                    self.ftp.delete(child)
                    continue
                except ftplib.error_perm:
                    pass
                if links is None:
                    links = {n for n, k in self._list(path) if k == "link"}
                if name in links:
                    raise WorkbenchError(
                        f"FTP: the server refused to delete the link {child}", "delete it by hand; it was not followed"
                    )
            self._remove_dir(child, depth + 1)

    def _mlsd(self, path: str) -> list[tuple[str, str]] | None:
        """(name, kind) of each entry by MLSD, or None when the server has no MLSD."""
        try:
            facts = list(self.ftp.mlsd(path))
        except ftplib.error_perm as exc:
            if str(exc)[:3] in _UNSUPPORTED:
                return None
            raise
        entries = []
        for name, fact in facts:
            kind = fact.get("type", "").lower()
            if kind in ("cdir", "pdir") or name in (".", ".."):
                continue
            entries.append((name, "dir" if kind == "dir" else "other"))
        return entries

    def _list(self, path: str) -> list[tuple[str, str]]:
        lines: list[str] = []
        self.ftp.retrlines(f"LIST {path}", lines.append)
        return [entry for line in lines if (entry := parse_list_line(line))]

    def close(self) -> None:
        if self._ftp is not None:
            try:
                self._ftp.quit()
            except (OSError, EOFError, ftplib.Error):
                self._ftp.close()
            self._ftp = None

    def row_details(self, direction: str) -> ClientDetails:
        # Per file, ftplib's retrbinary/storbinary send TYPE I, PASV, open the data connection and send the
        # command, each a round trip before the data; an upload then waits a round trip for the 226 after its
        # data connection closes, which a download receives right behind its data.
        trips = 4 if direction == "upload" else 3
        return dataclasses.replace(self.details(), round_trips_per_file=trips)

    def details(self) -> ClientDetails:
        mode = "passive, binary, explicit TLS (PROT P)" if self.target.tls else "passive, binary"
        # A stock server's sending is not known; workbench's own serve uses sendfile.
        return ClientDetails(
            block_bytes=self.options.block_size, mode=mode, server_sendfile=None if self.target.stock else True
        )
