"""FTP with ftplib: passive mode, 1 MiB blocks (the 8 KiB default downloads 535 MB/s on loopback, 1 MiB 924).

Against a stock server (target.stock) every path lies beneath target.prefix, relative to the login
directory; ftps:// (target.tls) is explicit TLS: AUTH TLS, then PROT P so the data connections are
encrypted too, with the certificate checked against the system's CA store (SSL_CERT_FILE names another)
unless ClientOptions.verify_host_keys is off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ftplib
import re
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from workbench.protocols.base import Client, LeftInPlace, Progress, Removal, RemovalBudget, listed_name
from workbench.protocols.details import ClientDetails
from workbench.shared.errors import (
    AuthError,
    NetworkError,
    NotFoundError,
    UsageError,
    WorkbenchError,
    from_os_error,
)

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
            return NetworkError(f"FTP {what} stalled for {self.options.stall_timeout_s:.0f} s", "the server stopped?")
        if isinstance(exc, EOFError | ftplib.error_temp | ftplib.error_proto | ftplib.error_reply):
            return NetworkError(f"FTP {what} failed: {exc or 'connection closed'}", "the server stopped mid-transfer")
        if isinstance(exc, OSError):
            return from_os_error(exc, f"FTP {what}", self.target.host, self.target.port("ftp"))
        return WorkbenchError(f"FTP {what} failed: {exc}")

    def _login_refused(self, exc: ftplib.Error) -> WorkbenchError:
        """A refusal of the login: whatever its code (a 550 to PASS is no missing path), the credentials' fault,
        but 421, the server going away."""
        if str(exc).startswith(("421", "530")):
            return self._translate(exc, "login")
        return AuthError(f"FTP server refused the login: {exc}", "check --credentials / WORKBENCH_PASSWORD")

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
            return ftplib.FTP_TLS(context=self.tls_context(), timeout=self.options.stall_timeout_s)
        return ftplib.FTP(timeout=self.options.stall_timeout_s)

    def connect(self) -> None:
        ftp = self._session()
        try:
            ftp.connect(self.target.host, self.target.port("ftp"), timeout=self.options.connect_timeout_s)
        except OSError as exc:  # refused, unreachable, or a silent host (a timeout here is no stalled transfer)
            ftp.close()
            raise from_os_error(exc, "connecting over FTP", self.target.host, self.target.port("ftp")) from exc
        except (EOFError, ftplib.Error) as exc:  # something answered, but not an FTP server's greeting
            ftp.close()
            raise self._translate(exc, "login") from exc
        try:
            # from here on (and for every data connection) a stall is options.stall_timeout_s without a byte
            ftp.timeout = self.options.stall_timeout_s
            assert ftp.sock is not None  # connect() above opened it
            ftp.sock.settimeout(self.options.stall_timeout_s)
            if isinstance(ftp, ftplib.FTP_TLS):
                self._secure(ftp)
            try:
                ftp.login(self.target.credentials.user, self.target.credentials.password)
            except (ftplib.error_perm, ftplib.error_temp) as exc:  # USER, PASS or ACCT refused
                ftp.close()
                raise self._login_refused(exc) from exc
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

    # -- remove_tree: depth first; a directory is entered (listed, emptied, RMD-ed) only when its parent's listing
    # proves it a real directory, and never when it changed since; links are deleted as entries, never followed.

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
        except ValueError as exc:  # ftplib refuses a path holding CR or LF
            raise UsageError(f"FTP cannot name the path {path!r}: {exc}", "use a path without line breaks") from exc

    def _removal(self) -> _FtpRemoval:
        return _FtpRemoval(self.ftp, f"the FTP server {self.target.host}:{self.target.port('ftp')}")

    def check_real_dir(self, remote: str) -> None:
        path = self._path(remote)
        try:
            self._removal().real_top(path)
        except WorkbenchError:
            raise
        except (OSError, EOFError, ftplib.Error) as exc:
            raise self._translate(exc, f"looking up {path}") from exc
        except Exception as exc:  # ftplib's ValueError on a CR or LF
            raise WorkbenchError(f"FTP: looking up {path} failed: {exc!r}") from exc

    def remove_tree(self, remote_dir: str) -> None:
        """Delete remote_dir and what it holds; what cannot be proven a real directory is left (LeftInPlace).

        The top is looked up in its parent's listing like every other entry, so a scratch directory swapped for
        a link is left alone, and whatever the link points to is never listed or touched.
        """
        top = self._path(remote_dir)
        if not top:
            raise UsageError("refusing to delete the FTP login directory itself", "name a directory beneath it")
        walk = self._removal()
        try:
            walk.remove_top(top)
        except WorkbenchError:
            raise
        except ftplib.error_perm as exc:  # a 550 here is a refusal (not empty, no permission), not a missing path
            raise WorkbenchError(f"FTP: could not remove {top}: {exc}", "see what is left there") from exc
        except (OSError, EOFError, ftplib.Error) as exc:
            raise self._translate(exc, f"removing {top}") from exc
        except Exception as exc:  # ftplib's ValueError on a CR or LF, a reply it cannot parse: one line, never a trace
            raise WorkbenchError(f"FTP: removing {top} stopped: {exc!r}", "delete what is left by hand") from exc
        walk.raise_first()

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


@dataclass(frozen=True)
class _Entry:
    """What a directory's listings say of one entry."""

    mlsd: str | None = None  # MLSD's type fact: "dir", "file" or another ("os.unix=symlink"); None: not in MLSD
    listed: str | None = None  # a parsed LIST line's "dir", "link" or "other"; None: not in LIST
    unique: str | None = None  # MLSD's unique fact (device and inode on Unix servers), when the server gives one


@dataclass
class _Listing:
    """A directory's entries by name, from MLSD and LIST both: each can hide a link the other shows."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    by_mlsd: bool = False  # the server answered MLSD
    by_list: bool = False  # at least one LIST line parsed

    def real_dir(self, entry: _Entry) -> bool:
        """Whether every listing that spoke says "directory". MLSD alone is not enough where LIST parses: servers
        such as pyftpdlib describe a link to a directory as the directory in MLSD, and LIST (lstat) as a link."""
        if self.by_mlsd and entry.mlsd != "dir":
            return False
        if self.by_list and entry.listed != "dir":
            return False
        return self.by_mlsd or self.by_list


def _child(path: str, name: str) -> str:
    return f"{path}/{name}" if path != "/" else f"/{name}"


def _parent(path: str) -> tuple[str, str]:
    """(parent, name) of a path as the server sees it; the parent "" is the login directory."""
    if "/" not in path:
        return "", path
    parent, name = path.rsplit("/", 1)
    return parent or "/", name


class _FtpRemoval(Removal):
    """One remove_tree over an FTP session; `problems` collects what was left in place and why.

    Every directory entered was listed as a real directory by its parent (MLSD type=dir and LIST "d" where each
    is available). Its unique fact (from MLST) is checked again just before each DELE, listing and RMD in it, so a
    directory swapped for a link mid-way is left, not followed. A server that gives no unique fact (vsftpd has no
    MLST at all) cannot show such a swap: its nested directories are never entered but left in place, said once.
    """

    def __init__(self, ftp: ftplib.FTP, where: str) -> None:
        super().__init__(where)
        self.ftp = ftp
        self.mlst = True  # MLST answers (switched off at its first refusal)

    def remove_top(self, top: str) -> None:
        self._remove_dir(top, self.real_top(top), 0)

    def real_top(self, top: str) -> str | None:
        """Raise unless the parent's listing proves `top` a real directory; its unique fact (None: not given)."""
        parent, name = _parent(top)
        listed_name(name, f"the scratch path {top!r} on {self.where}")
        with contextlib.suppress(ftplib.error_perm, ftplib.error_reply):
            self.ftp.sendcmd("OPTS MLST type;unique;")  # servers that leave unique out by default
        try:
            listing = self._listing(parent, RemovalBudget(self.where))
        except ftplib.error_perm as exc:
            if str(exc).startswith("550"):
                raise NotFoundError(f"FTP: no directory {parent or 'login directory'} holding {name} ({exc})") from exc
            raise
        entry = listing.entries.get(name)
        if entry is None:
            raise NotFoundError(f"FTP: no directory {top} to remove", "someone removed it already?")
        if not listing.real_dir(entry):
            raise LeftInPlace(
                f"{top} on {self.where} is not a real directory ({_described(entry)}): left in place, nothing "
                "through it touched",
                "delete it by hand if it is yours",
            )
        return entry.unique

    def _remove_dir(self, path: str, unique: str | None, depth: int) -> bool:
        """Empty and remove `path`; False when something in it had to stay (noted in problems)."""
        self.budget.enter(depth, path)
        self._unchanged(path, unique)
        listing = self._listing(path, self.budget)

        def remove(item: tuple[str, _Entry]) -> bool:
            name, entry = item
            child = _child(path, listed_name(name, f"{self.where}, in {path},"))
            if listing.real_dir(entry):
                if entry.unique is None or not self.mlst:
                    raise LeftInPlace(
                        f"{child} on {self.where} was left in place with what it holds: the server gives no MLST "
                        "unique fact, without which a directory swapped for a link while it is deleted goes unnoticed",
                        "delete it by hand",
                    )
                return self._remove_dir(child, entry.unique, depth + 1)
            self._unchanged(path, unique)
            self.ftp.delete(child)  # files, specials and links alike: DELE unlinks, never follows
            return True

        def refused(item: tuple[str, _Entry], exc: Exception) -> WorkbenchError | None:
            if not isinstance(exc, ftplib.error_perm):
                return None
            # a refusal, not a link: a later run may delete it (no LeftInPlace)
            return WorkbenchError(
                f"{path}/{item[0]} on {self.where} was left: DELE refused ({exc})", "delete it by hand"
            )

        complete = self.each(listing.entries.items(), remove, refused)
        if not complete:
            return False  # its RMD would only say "not empty" again
        self._unchanged(path, unique)
        self.ftp.rmd(path)
        return True

    def _unchanged(self, path: str, unique: str | None) -> None:
        """Refuse to go on in `path` when MLST shows it is no longer the directory its parent listed."""
        if unique is None or not self.mlst:
            return
        try:
            reply = self.ftp.sendcmd(f"MLST {path}")
        except ftplib.error_perm as exc:
            if str(exc)[:3] in _UNSUPPORTED:
                self.mlst = False
                return
            raise LeftInPlace(
                f"{path} on {self.where} is gone or was swapped for a link while it was being deleted ({exc}): left "
                "in place, nothing through it touched",
                "delete it by hand if it is yours",
            ) from exc
        facts = _mlst_facts(reply)
        if facts.get("type", "").lower() != "dir" or facts.get("unique") != unique:
            raise LeftInPlace(
                f"{path} on {self.where} was swapped for a link or another directory while it was being deleted: "
                "left in place, nothing through it touched",
                "delete it by hand if it is yours",
            )

    def _listing(self, path: str, budget: RemovalBudget) -> _Listing:
        listing = _Listing()
        found: dict[str, dict[str, str | None]] = {}

        def note(name: str, **facts: str | None) -> None:
            budget.count(1, path or "the login directory")
            found.setdefault(name, {}).update(facts)

        try:
            for name, fact in self.ftp.mlsd(path):
                kind = fact.get("type", "").lower()
                if kind in ("cdir", "pdir") or name in (".", ".."):
                    continue
                note(name, mlsd=kind, unique=fact.get("unique"))
            listing.by_mlsd = True
        except ftplib.error_perm as exc:
            if str(exc)[:3] not in _UNSUPPORTED:
                raise

        def line(text: str) -> None:
            if entry := parse_list_line(text):
                listing.by_list = True
                note(entry[0], listed=entry[1])

        self.ftp.retrlines(f"LIST {path}" if path else "LIST", line)
        listing.entries = {name: _Entry(**facts) for name, facts in found.items()}
        return listing


def _described(entry: _Entry) -> str:
    said = [f"MLSD type={entry.mlsd}" if entry.mlsd else "", f"LIST says {entry.listed}" if entry.listed else ""]
    return ", ".join(s for s in said if s) or "no listing says what it is"


def _mlst_facts(reply: str) -> dict[str, str]:
    """The facts of an MLST reply ("250-...", " type=dir;unique=801g2; /path", "250 End"), keys lowercased."""
    for text in reply.splitlines():
        if text.startswith(" "):
            facts = text[1:].split(" ", 1)[0]
            return {k.lower(): v for k, _, v in (f.partition("=") for f in facts.split(";") if f)}
    return {}
