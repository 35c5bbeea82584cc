"""SMB through pysmb: SMB 2.0.2 only, so every request carries at most 64 KiB and only one is in flight.

pysmb asks the server for no extra credits and sends the next read or write only after the previous
reply, so its ceiling is request_bytes x 1 / RTT; details() reports both numbers for the ceiling code.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from workbench.protocols.base import (
    Client,
    LeftInPlace,
    Progress,
    Removal,
    call_translating,
    listed_name,
)
from workbench.protocols.details import ClientDetails
from workbench.protocols.smb_negotiated import from_pysmb, merge
from workbench.protocols.smb_options import cannot
from workbench.shared.errors import (
    AuthError,
    NetworkError,
    NotFoundError,
    UsageError,
    WorkbenchError,
    from_os_error,
)
from workbench.shared.target import Target

STATUS_OBJECT_NAME_NOT_FOUND = 0xC0000034
STATUS_OBJECT_NAME_COLLISION = 0xC0000035
STATUS_OBJECT_PATH_NOT_FOUND = 0xC000003A
STATUS_ACCESS_DENIED = 0xC0000022
STATUS_OBJECT_NAME_INVALID = 0xC0000033
STATUS_OBJECT_PATH_SYNTAX_BAD = 0xC000003B
STATUS_BAD_NETWORK_NAME = 0xC00000CC
STATUS_DIRECTORY_NOT_EMPTY = 0xC0000101
_NOT_FOUND = {STATUS_OBJECT_NAME_NOT_FOUND, STATUS_OBJECT_PATH_NOT_FOUND}
# smb_signing -> pysmb's sign_options (smb.base.SMB): never; whenever the server allows; only when it requires.
# pysmb cannot insist on signing, so "required" signs whenever allowed and connect() refuses an unsigned session.
_PYSMB_SIGNING = {"off": 0, "on": 1, "required": 1, None: 2}
FILE_ATTRIBUTE_DIRECTORY = 0x10
FILE_ATTRIBUTE_REPARSE_POINT = 0x400  # a symlink, junction or mount point, as Windows and macOS servers show one
# CREATE options and access for deleting one entry (MS-SMB2 2.2.13)
DELETE_ACCESS = 0x00010000 | 0x00000080  # DELETE | FILE_READ_ATTRIBUTES
SHARE_ALL = 0x1 | 0x2 | 0x4  # FILE_SHARE_READ | WRITE | DELETE
FILE_DIRECTORY_FILE = 0x1
FILE_NON_DIRECTORY_FILE = 0x40
FILE_OPEN_REPARSE_POINT = 0x00200000  # open a link itself, never what it points to
FILE_DISPOSITION_INFORMATION = 13


def smb_path(remote: str) -> str:
    """A POSIX path relative to the share as SMB wants it (backslashes, no leading separator)."""
    return remote.strip("/").replace("/", "\\")


def posix(path: str) -> str:
    """An SMB path as messages show it (forward slashes)."""
    return path.replace("\\", "/")


def share_path(target: Target, remote: str) -> str:
    """`remote` as a path in the share: beneath the URL's directory (the prefix) on a stock server."""
    return smb_path(target.remote_path(remote) if target.stock else remote)


def delete_options(kind: str) -> int:
    """CREATE options to delete a "file", a "dir" or a "link" (the link itself, whatever it leads to)."""
    by_kind = {"file": FILE_NON_DIRECTORY_FILE, "dir": FILE_DIRECTORY_FILE, "link": 0}
    return FILE_OPEN_REPARSE_POINT | by_kind[kind]


# -- deleting a directory tree, shared by the SMB clients -----------------------------------------


@dataclass(frozen=True)
class DirEntry:
    """One entry of a directory listing (FileIdBothDirectoryInformation)."""

    name: str
    attributes: int
    file_id: int

    @property
    def is_link(self) -> bool:
        return bool(self.attributes & FILE_ATTRIBUTE_REPARSE_POINT)

    @property
    def is_dir(self) -> bool:
        return bool(self.attributes & FILE_ATTRIBUTE_DIRECTORY)


class TreeOps(Protocol):
    """What remove_smb_tree needs from a client: list a directory, delete one entry."""

    def list_dir(self, path: str, pattern: str = "*") -> list[DirEntry]:
        """The entries of directory `path` (SMB form) matching `pattern` (a name: that entry alone), "." and ".."
        included when the server lists them."""

    def delete_entry(self, path: str, kind: str) -> int:
        """Delete one entry ("file", "dir" or "link", opened with FILE_OPEN_REPARSE_POINT); its NT status, 0 = done."""


SMB_SEPARATORS = "\\/"  # a listed name holding either would lead out of its directory


def remove_smb_tree(ops: TreeOps, path: str, where: str) -> None:
    """Delete directory `path` (SMB form) and everything in it, never following a link, the top included.

    An entry the server flags as a reparse point is deleted itself, never entered. Samba shows a symlink as
    what it points to (and hides one that leads out of the share: wide links = no); a directory reached
    through such a link is told apart by its file id: the same id as another entry of the same listing (a link
    to a sibling), or as the listing's own "." (a link to its parent), or a ".." whose id is not the parent's
    (a link to elsewhere). Such an entry is deleted as a link when the server allows, else left and reported.
    The top is judged so too, from its parent's listing: a scratch directory swapped for a link stays as it is.
    Entries the server hides cannot be deleted over SMB; the directory holding them is then reported as not
    empty. Everything else is deleted before the first problem is raised. Depth and entries are bounded
    (RemovalBudget); whatever the client raises otherwise comes out as a WorkbenchError.
    """
    if not path:
        raise UsageError("refusing to delete the share's root directory", "give a directory beneath it")
    walk = Removal(where)
    try:
        ids = _top_ids(ops, path, where)
        _remove_dir(ops, path, ids, walk, 0)
    except WorkbenchError:
        raise
    except Exception as exc:  # a reply the library cannot parse: one line, never a trace
        raise WorkbenchError(f"SMB: removing {posix(path)} on {where} stopped: {exc!r}", "delete what is left") from exc
    walk.raise_first()


def check_smb_real_dir(ops: TreeOps, path: str, where: str) -> None:
    """Raise LeftInPlace unless directory `path` (SMB form) is a real directory, judged as its removal judges
    the top: from its parent's listing (reparse flag, a file id another entry has), and its own ".." leading back
    to that parent where the server gives ids (a link to elsewhere). NotFoundError when it is not there."""
    try:
        parent_id, own_id = _top_ids(ops, path, where)
        entries = ops.list_dir(path)
    except WorkbenchError:
        raise
    except Exception as exc:  # a reply the library cannot parse: one line, never a trace
        raise WorkbenchError(
            f"SMB: looking up {posix(path)} on {where} failed: {exc!r}", "see the server's log"
        ) from exc
    dotdot = next((e for e in entries if e.name == ".."), None)
    here = _own_id(entries)
    moved_parent = parent_id is not None and dotdot is not None and bool(dotdot.file_id) and dotdot.file_id != parent_id
    if moved_parent or (own_id is not None and here is not None and here != own_id):
        raise _not_real(path, where)


def _top_ids(ops: TreeOps, path: str, where: str) -> tuple[int | None, int | None]:
    """The file ids of the top's parent and of the top, from the parent's listing (None: the server gives none);
    LeftInPlace when that listing shows the top as no real directory."""
    if not path:
        raise UsageError("refusing to work on the share's root directory", "give a directory beneath it")
    parent, _, name = path.rpartition("\\")
    listed_name(name, f"the scratch path {posix(path)!r} on {where}", SMB_SEPARATORS)
    siblings = ops.list_dir(parent)
    entry = next((e for e in siblings if e.name == name), None)
    if entry is None:
        raise NotFoundError(f"no directory {posix(path)} on {where}", "someone removed it already?")
    if not _real_dir(entry, siblings):
        raise _not_real(path, where)
    return _own_id(siblings), entry.file_id or None


def _not_real(path: str, where: str) -> LeftInPlace:
    return LeftInPlace(
        f"{posix(path)} on {where} is not a real directory (a link or a file, as the share lists it): left in "
        "place, nothing through it touched",
        "delete it by hand if it is yours",
    )


def _own_id(entries: list[DirEntry]) -> int | None:
    """The file id of the listed directory itself (its "." entry); None when the server gives none."""
    dot = next((e for e in entries if e.name == "."), None)
    return dot.file_id if dot is not None and dot.file_id else None


def _real_dir(entry: DirEntry, listing: list[DirEntry]) -> bool:
    """Whether `entry` of `listing` is a directory and nothing says it is a link: no reparse flag, and (where the
    server gives file ids) an id no other entry of the listing, nor the listed directory itself, has."""
    if not entry.is_dir or entry.is_link:
        return False
    if not entry.file_id:
        return True
    return not any(e is not entry and e.name != ".." and e.file_id == entry.file_id for e in listing)


def _remove_dir(ops: TreeOps, path: str, ids: tuple[int | None, int | None], walk: Removal, depth: int) -> bool:
    """Delete `path` and its contents; False (with the reason in `walk.problems`) when something had to stay.

    `ids`: the parent's file id and this directory's, as the parent's listing gave them (None: not given).
    """
    where, problems = walk.where, walk.problems
    parent_id, own_id = ids
    walk.budget.enter(depth, path)
    entries = ops.list_dir(path)
    walk.budget.count(len(entries), posix(path))
    dotdot = next((e for e in entries if e.name == ".."), None)
    if parent_id is not None and dotdot is not None and dotdot.file_id and dotdot.file_id != parent_id:
        # Its real parent is elsewhere: `path` is a link the server resolved. Delete the link, never its contents.
        return _deleted(ops.delete_entry(path, "link"), path, where, problems, through_link=True)
    here = _own_id(entries)
    if own_id is not None and here is not None and here != own_id:
        raise _swapped(path, where)

    def remove(entry: DirEntry) -> bool:
        child = f"{path}\\{listed_name(entry.name, f'{where}, in {posix(path)},', SMB_SEPARATORS)}"
        if own_id is not None:  # SMB deletes by path: is the path still this directory, not a link swapped in?
            _unchanged(ops, path, own_id, where)
        if entry.is_link or (entry.is_dir and not _real_dir(entry, entries)):
            return _deleted(ops.delete_entry(child, "link"), child, where, problems, through_link=entry.is_dir)
        if entry.is_dir:
            try:
                return _remove_dir(ops, child, (here, entry.file_id or None), walk, depth + 1)
            except NotFoundError:
                return True  # gone since the listing (or a link whose target went: Samba hides it from now on)
        return _deleted(ops.delete_entry(child, "file"), child, where, problems)

    # A directory still holding what could not be deleted stays: its own "not empty" would only repeat that.
    if not walk.each((e for e in entries if e.name not in (".", "..")), remove):
        return False
    if own_id is not None:
        _unchanged(ops, path, own_id, where)
    return _deleted(ops.delete_entry(path, "dir"), path, where, problems)


def _unchanged(ops: TreeOps, path: str, own_id: int, where: str) -> None:
    """Raise LeftInPlace unless `path` still resolves to the directory whose file id is `own_id`."""
    parent, _, name = path.rpartition("\\")
    try:  # the parent's listing of this one name: the id of what the path leads to now, through any link
        now = next((e.file_id for e in ops.list_dir(parent, name) if e.name == name), -1)
    except NotFoundError:
        now = -1
    if now != own_id:
        raise _swapped(path, where)


def _swapped(path: str, where: str) -> LeftInPlace:
    return LeftInPlace(
        f"{posix(path)} on {where} was swapped for a link or another directory while it was being deleted: left "
        "in place, nothing through it touched",
        "delete it by hand if it is yours",
    )


def _deleted(status: int, path: str, where: str, problems: list[WorkbenchError], through_link: bool = False) -> bool:
    """True when `status` says the entry is gone; otherwise note why in `problems`."""
    if status == 0 or status in _NOT_FOUND:
        return True  # deleted, or gone already
    problems.append(_delete_failure(status, path, where, through_link))
    return False


def _delete_failure(status: int, path: str, where: str, through_link: bool) -> WorkbenchError:
    shown = posix(path)
    if status == STATUS_DIRECTORY_NOT_EMPTY and through_link:
        return WorkbenchError(
            f"{shown} on {where} leads to a directory elsewhere (a symlink): not followed, and the server "
            "will not delete the link itself",
            "remove it on the server",
        )
    if status == STATUS_DIRECTORY_NOT_EMPTY:
        return WorkbenchError(
            f"{shown} on {where} is not empty after deleting everything the server lists in it",
            "the server hides some entries (Samba hides symlinks that lead out of the share): remove them there",
        )
    if status == STATUS_ACCESS_DENIED:
        return AuthError(f"deleting {shown} on {where}: access denied", "check the share's permissions")
    return WorkbenchError(f"deleting {shown} on {where} failed (NT status 0x{status:08X})", "see the server's log")


class _ProgressWriter:
    """File object for retrieveFile that reports every chunk as it lands."""

    def __init__(self, fh: BinaryIO, progress: Progress) -> None:
        self.fh = fh
        self.progress = progress

    def write(self, data: bytes) -> int:
        n = self.fh.write(data)
        self.progress(len(data))
        return n


class _ProgressReader:
    """File object for storeFile that reports every chunk as it is handed to the socket."""

    def __init__(self, fh: BinaryIO, progress: Progress) -> None:
        self.fh = fh
        self.progress = progress

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        if data:
            self.progress(len(data))
        return data


def _status(exc: Exception) -> int | None:
    """The NT status of the reply that failed a pysmb OperationFailure."""
    for message in reversed(getattr(exc, "smb_messages", [])):
        status = getattr(message, "status", 0)
        if status:
            return status
    return None


@functools.cache
def _connection_class() -> type:
    """pysmb's SMBConnection plus what it lacks: the negotiated dialect and a delete that never follows a link."""
    from smb.base import _PendingRequest
    from smb.smb2_constants import SMB2_INFO_FILE
    from smb.smb2_structs import SMB2CloseRequest, SMB2CreateRequest, SMB2Message, SMB2SetInfoRequest
    from smb.smb_constants import FILE_OPEN, SEC_IMPERSONATE
    from smb.SMBConnection import SMBConnection

    class _Connection(SMBConnection):
        # pysmb keeps no record of the negotiated dialect; catch it as the reply goes by.
        dialect_revision: int | None = None

        def _updateServerInfo_SMB2(self, payload: Any) -> None:
            self.dialect_revision = getattr(payload, "dialect_revision", None)
            super()._updateServerInfo_SMB2(payload)

        def delete_entry(self, tid: int, path: str, options: int, timeout: float) -> int:
            """CREATE (DELETE access, `options`) + SET_INFO delete pending + CLOSE; the first failing NT status.

            pysmb's own deleteFiles/deleteDirectory open without FILE_OPEN_REPARSE_POINT (a Windows server
            would then delete what a link points to), skip missing files silently and ignore CLOSE's status.
            """
            outcome: list[int] = []

            def send(request: Any, callback: Callable[..., None], **kwargs: Any) -> None:
                message = SMB2Message(request)
                message.tid = tid
                self._sendSMBMessage(message)
                self.pending_requests[message.mid] = _PendingRequest(
                    message.mid, time.time() + timeout, callback, errback, **kwargs
                )

            def errback(failure: Exception) -> None:
                self.is_busy = False
                raise failure

            def finish(status: int) -> None:
                outcome.append(status)
                self.is_busy = False

            def created(reply: Any, **_: Any) -> None:
                if reply.status != 0:
                    finish(reply.status)
                    return
                fid = reply.payload.fid
                # FileDispositionInformation: delete pending = 1
                send(SMB2SetInfoRequest(fid, 0, SMB2_INFO_FILE, FILE_DISPOSITION_INFORMATION, b"\x01"), marked, fid=fid)

            def marked(reply: Any, fid: bytes, **_: Any) -> None:
                send(SMB2CloseRequest(fid), closed, marked_status=reply.status)

            def closed(reply: Any, marked_status: int, **_: Any) -> None:
                finish(marked_status or reply.status)

            create = SMB2CreateRequest(
                path,
                access_mask=DELETE_ACCESS,
                share_access=SHARE_ALL,
                create_disp=FILE_OPEN,
                create_options=options,
                impersonation=SEC_IMPERSONATE,
            )
            self.is_busy = True
            try:
                send(create, created)
                while self.is_busy:
                    self._pollForNetBIOSPacket(timeout)
            finally:
                self.is_busy = False
            return outcome[0]

    return _Connection


class PysmbClient(Client):
    protocol = "smb"
    name = "pysmb"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._conn: Any = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            import smb.SMBConnection  # noqa: F401
        except ImportError:
            return "pysmb not importable: pip install pysmb"
        return None

    @property
    def _where(self) -> str:
        return f"{self.target.host}:{self.target.port('smb')}"

    def connect(self) -> None:
        self._refuse_what_pysmb_cannot()
        creds = self.target.credentials
        conn = _connection_class()(
            creds.user,
            creds.password,
            "workbench",
            self.target.host,
            sign_options=_PYSMB_SIGNING[self.options.smb_signing],
            is_direct_tcp=True,
        )
        try:
            # pysmb's timeout bounds the TCP connect and each reply of the login alike (replies take ms)
            ok = self._call(
                conn.connect, self.target.host, self.target.port("smb"), timeout=self.options.connect_timeout_s
            )
        except WorkbenchError:
            conn.close()
            raise
        if not ok:
            conn.close()
            raise AuthError(
                f"SMB login as {creds.user!r} refused by {self._where}",
                "check the user and password (the server's credentials file)",
            )
        if self.options.smb_signing == "required" and not conn.is_signing_active:
            conn.close()
            raise cannot("pysmb", "require signing here: the server does not offer it", "use smb_signing on or off")
        self._conn = conn

    def _refuse_what_pysmb_cannot(self) -> None:
        """pysmb speaks SMB 2.0.2 at most (so any highest dialect suits it) and has no encryption."""
        if self.options.smb_encryption == "required":
            raise cannot("pysmb", "encrypt: it speaks SMB 2.0.2, which has none", "use smbprotocol or smbclient")

    def _call(self, fn: Any, *args: Any, what: str = "connecting", **kwargs: Any) -> Any:
        """Run one pysmb call, translating its exceptions at this boundary."""
        return call_translating(self._translate, what, fn, *args, **kwargs)

    def _translate(self, exc: Exception, what: str) -> WorkbenchError | None:
        from smb.base import NotConnectedError, NotReadyError, SMBTimeout
        from smb.smb_structs import OperationFailure, ProtocolError

        if isinstance(exc, OperationFailure):
            status = _status(exc)
            if status in _NOT_FOUND:
                return NotFoundError(f"{what}: no such file on the share", "check the remote path")
            if status == STATUS_BAD_NETWORK_NAME:
                return NotFoundError(f"{what}: the server has no share {self.target.share!r}", "check the share name")
            if status in (STATUS_OBJECT_NAME_INVALID, STATUS_OBJECT_PATH_SYNTAX_BAD):
                return NotFoundError(f"{what}: the server rejects this path", "use a path inside the share, no '..'")
            if status == STATUS_ACCESS_DENIED:
                return AuthError(f"{what}: access denied by the server", "check the share's permissions")
            code = f" (NT status 0x{status:08X})" if status else ""
            return WorkbenchError(f"{what} failed{code}: {exc.message}", "see the smbd log")
        if isinstance(exc, SMBTimeout):
            return NetworkError(
                f"no reply from {self._where} for {self.options.stall_timeout_s:.0f} s while {what}",
                "the server stalled"
            )
        if isinstance(exc, NotConnectedError | NotReadyError):
            return NetworkError(f"SMB connection to {self._where} lost while {what}", "the server stopped?")
        if isinstance(exc, ProtocolError):
            return NetworkError(f"SMB protocol error from {self._where} while {what}", "see the smbd log")
        if isinstance(exc, OSError):
            return from_os_error(exc, what, self.target.host, self.target.port("smb"))
        return None

    def _require(self) -> Any:
        if self._conn is None:
            raise NetworkError("SMB session is not connected", "call connect() first")
        return self._conn

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        conn = self._require()
        what = f"downloading {remote}"
        try:
            with open(local, "wb") as fh:
                self._call(
                    conn.retrieveFile,
                    self.target.share,
                    share_path(self.target, remote),
                    _ProgressWriter(fh, progress),
                    timeout=self.options.stall_timeout_s,
                    what=what,
                )
        except OSError as exc:
            raise from_os_error(exc, f"writing {local}") from exc

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        conn = self._require()
        try:
            with open(local, "rb") as fh:
                self._call(
                    conn.storeFile,
                    self.target.share,
                    share_path(self.target, remote),
                    _ProgressReader(fh, progress),
                    timeout=self.options.stall_timeout_s,
                    what=f"uploading {remote}",
                )
        except OSError as exc:
            raise from_os_error(exc, f"reading {local}") from exc

    def mkdir(self, remote_dir: str) -> None:
        conn = self._require()
        parts = [p for p in share_path(self.target, remote_dir).split("\\") if p]
        for depth in range(1, len(parts) + 1):
            path = "\\".join(parts[:depth])
            try:
                conn.createDirectory(self.target.share, path, timeout=self.options.stall_timeout_s)
            except Exception as exc:
                if _status(exc) == STATUS_OBJECT_NAME_COLLISION:
                    continue  # already there: mkdir is idempotent
                error = self._translate(exc, f"creating {path}")
                if error is None:
                    raise
                raise error from exc

    def is_dir(self, remote: str) -> bool:
        path = share_path(self.target, remote)
        what = f"looking up {posix(path) or 'the share root'}"
        try:
            found = self._call(
                self._require().getAttributes, self.target.share, path, timeout=self.options.stall_timeout_s, what=what
            )
        except NotFoundError:
            return False
        return bool(found.isDirectory)

    def remove_tree(self, remote_dir: str) -> None:
        remove_smb_tree(_PysmbTree(self), share_path(self.target, remote_dir), f"{self._where}/{self.target.share}")

    def check_real_dir(self, remote: str) -> None:
        check_smb_real_dir(_PysmbTree(self), share_path(self.target, remote), f"{self._where}/{self.target.share}")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def row_details(self, direction: str) -> ClientDetails:
        # Per file, pysmb opens (CREATE) and closes (CLOSE) around its data; a read goes on until the server
        # says end of file, one more READ after a file that fits in one request.
        trips = 3 if direction == "download" else 2
        return dataclasses.replace(self.details(), round_trips_per_file=trips)

    def details(self) -> ClientDetails:
        conn = self._conn
        if conn is None:
            # SMB 2.0.2 has no multi-credit requests
            return ClientDetails(requests_in_flight=1, timed_includes_setup=False, request_bytes=64 * 1024)
        # pysmb reads with max_read_size and writes with max_write_size, one request at a time.
        info = ClientDetails(
            requests_in_flight=1,
            timed_includes_setup=False,
            request_bytes=min(conn.max_read_size, conn.max_write_size),
        )
        return merge(info, from_pysmb(conn, client_requires_signing=self.options.smb_signing == "required"))


class _PysmbTree:
    """TreeOps over a pysmb session (remove_smb_tree's listing and deleting)."""

    def __init__(self, client: PysmbClient) -> None:
        self.client = client
        self.conn = client._require()
        self.share = client.target.share
        self.timeout = client.options.stall_timeout_s

    def list_dir(self, path: str, pattern: str = "*") -> list[DirEntry]:
        what = f"listing {posix(path) or 'the share root'}"
        found = self.client._call(
            self.conn.listPath, self.share, path, pattern=pattern, timeout=self.timeout, what=what
        )
        return [DirEntry(f.filename, f.file_attributes, f.file_id or 0) for f in found]

    def delete_entry(self, path: str, kind: str) -> int:
        what = f"deleting {posix(path)}"
        if not self.conn.is_using_smb2:
            return self._delete_smb1(path, kind, what)
        tid = self.conn.connected_trees[self.share]  # connected by the listing that came first
        return self.client._call(self.conn.delete_entry, tid, path, delete_options(kind), self.timeout, what=what)

    def _delete_smb1(self, path: str, kind: str, what: str) -> int:
        """SMB1 (a server too old for SMB2): pysmb's own deletes, which name the entry and never open it."""
        from smb.smb_structs import OperationFailure

        delete = self.conn.deleteDirectory if kind == "dir" else self.conn.deleteFiles
        try:
            self.client._call(delete, self.share, path, timeout=self.timeout, what=what)
        except WorkbenchError as exc:
            if isinstance(exc.__cause__, OperationFailure):
                return _status(exc.__cause__) or STATUS_ACCESS_DENIED
            raise
        return 0
