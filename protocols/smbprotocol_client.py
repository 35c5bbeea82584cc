"""SMB 2/3 through smbprotocol's low-level API, with large requests and several of them in flight.

The library sends one request and waits for its reply unless told otherwise; here reads and writes
are built with ``send=False`` and pipelined, up to `DEPTH` requests of up to the negotiated maximum
each, asking the server for enough credits to keep them all outstanding.

The library copies every 8 MiB message five to eight times (structure packing, signature slicing,
socket buffers). `FastPath` keeps its session, credits and reader thread but moves the payload of
READ replies and WRITE requests with few copies: scatter/gather sends, incremental signatures, one
MSG_WAITALL recv per message. Anything it does not cover (encryption, DFS, an unexpected library
version) falls back to the library's own code. Sets of small files go as related compounds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import socket
import struct
import uuid
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from workbench.protocols.base import Client, ClientOptions, FileCopy, Progress, call_translating
from workbench.protocols.details import ClientDetails
from workbench.protocols.smb import (
    SHARE_ALL,
    DirEntry,
    check_smb_real_dir,
    delete_options,
    posix,
    remove_smb_tree,
    share_path,
)
from workbench.protocols.smb_fastpath import FastPath, read_all, read_payload, size_of
from workbench.protocols.smb_negotiated import BY_NAME, dialect_name, from_smbprotocol, merge
from workbench.protocols.smb_options import cannot
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, WorkbenchError, from_os_error

DEPTH = 4  # requests kept in flight per file
FILES_IN_FLIGHT = 8  # small files of a set copied at once, each as one CREATE+READ/WRITE+CLOSE compound
MAX_REQUEST = 8 * 1024 * 1024  # bytes per read/write, capped further by what the server negotiates
CREDIT_UNIT = 64 * 1024  # one SMB2 credit pays for this many bytes of a read or write


class SmbprotocolClient(Client):
    protocol = "smb"
    name = "smbprotocol"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._conn: Any = None
        self._session: Any = None
        self._tree: Any = None
        self._fast: FastPath | None = None
        self._stalled = False  # the server stopped answering: failing copies skip their polite CLOSE
        self.depth = DEPTH
        self._most_in_flight = 0  # the most requests (or small-file compounds) outstanding since the last row

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            import smbprotocol.connection  # noqa: F401
        except ImportError:
            return "smbprotocol not importable: pip install smbprotocol"
        return None

    @property
    def _where(self) -> str:
        return f"{self.target.host}:{self.target.port('smb')}"

    # -- session -------------------------------------------------------------------------------

    def connect(self) -> None:
        from smbprotocol.connection import Connection
        from smbprotocol.session import Session
        from smbprotocol.tree import TreeConnect

        creds = self.target.credentials
        signing, encryption, dialect = _chosen(self.options)
        # The library signs only what it requires: "on" (sign when the server allows) is "required" here,
        # and the row's negotiated figures say so. Its default (None) is required too: Samba insists.
        conn = Connection(uuid.uuid4(), self.target.host, self.target.port("smb"), require_signing=signing != "off")
        # The reader thread pings after this much silence and gives up after twice it: bounds every wait.
        conn._receive_timeout = max(1, int(self.options.stall_timeout_s))
        self._conn = conn
        try:
            self._guard(conn.connect, dialect, timeout=self.options.connect_timeout_s, what="connecting")
            # smbprotocol's socket blocks with no timeout: a server that stops reading would hold a send
            # forever. A send timeout (the receive side has the reader thread's) makes it fail instead.
            seconds = max(1, int(self.options.stall_timeout_s))
            conn.transport._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, 0))
            # Encryption off unless asked for: the rows measure the transport (a server that requires it still
            # gets it, and the row's negotiated figures say so).
            session = Session(
                conn, creds.user, creds.password, require_encryption=encryption == "required", auth_protocol="ntlm"
            )
            self._guard(session.connect, what=f"logging in as {creds.user!r}")
            self._session = session
            tree = TreeConnect(session, rf"\\{self.target.host}\{self.target.share}")
            try:
                self._guard(tree.connect, what=f"opening share {self.target.share!r}")
            except AuthError as exc:
                if signing == "off" and dialect_name(conn.dialect) == "3.1.1":
                    # SMB 3.1.1 has the tree connect signed; the library signs nothing unless it signs all
                    raise cannot(
                        "smbprotocol",
                        "go unsigned on SMB 3.1.1: the server refused its unsigned tree connect",
                        "use smb_max_dialect 3.0.2 or lower with smb_signing off, or smb/smbclient",
                    ) from exc
                raise
            self._tree = tree
            self._fast = FastPath.attach(conn, session, tree)
            _refuse_what_the_server_imposed(signing, encryption, from_smbprotocol(conn, session, tree, None))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        conn, self._conn, self._session, self._tree, self._fast = self._conn, None, None, None, None
        if conn is None:
            return
        # Logging off a dead server raises; the socket and reader thread must go regardless.
        with contextlib.suppress(Exception):
            conn.disconnect(close=conn.transport is not None and conn.transport.connected, timeout=5)
        with contextlib.suppress(Exception):
            if conn.transport is not None:
                conn.transport.close()

    def details(self) -> ClientDetails:
        info = ClientDetails(requests_in_flight=self.depth, timed_includes_setup=False, files_in_flight=FILES_IN_FLIGHT)
        conn = self._conn
        if conn is not None and conn.dialect is not None:
            info = dataclasses.replace(
                info,
                dialect=dialect_name(conn.dialect),
                request_bytes=self._request_size(min(conn.max_read_size, conn.max_write_size)),
                read_bytes=self._request_size(conn.max_read_size),
                write_bytes=self._request_size(conn.max_write_size),
                multi_credit=bool(conn.supports_multi_credit),
                zero_copy=self._fast is not None,
            )
        return merge(info, from_smbprotocol(conn, self._session, self._tree, credits=self.depth))

    def row_details(self, direction: str) -> ClientDetails:
        """details(), with the credits the row's copies actually kept in flight (a file smaller than one request
        never has two outstanding); the count starts again for the next row."""
        info = self.details()
        used, self._most_in_flight = self._most_in_flight, 0
        return dataclasses.replace(info, credits=used) if used else info

    def _request_size(self, negotiated: int) -> int:
        size = min(MAX_REQUEST, negotiated)
        if not self._conn or not self._conn.supports_multi_credit:
            size = min(size, CREDIT_UNIT)  # SMB 2.0.2: one credit per request, 64 KiB each
        return size

    # -- errors ----------------------------------------------------------------------------------

    def _guard(self, fn: Any, *args: Any, what: str, **kwargs: Any) -> Any:
        """Run one smbprotocol call, translating its exceptions at this boundary."""
        return call_translating(self._translate, what, fn, *args, **kwargs)

    def _translate(self, exc: Exception, what: str) -> WorkbenchError | None:
        from smbprotocol import exceptions as ex

        if isinstance(exc, WorkbenchError):
            return exc
        if isinstance(exc, ex.LogonFailure | ex.WrongPassword | ex.SMBAuthenticationError):
            return AuthError(
                f"SMB login refused by {self._where} while {what}",
                "check the user and password (the server's credentials file)",
            )
        if isinstance(exc, ex.ObjectNameNotFound | ex.ObjectPathNotFound | ex.NoSuchFile):
            return NotFoundError(f"{what}: no such file on the share", "check the remote path")
        if isinstance(exc, ex.ObjectPathSyntaxBad | ex.ObjectNameInvalid):
            return NotFoundError(f"{what}: the server rejects this path", "use a path inside the share, no '..'")
        if isinstance(exc, ex.BadNetworkName):
            return NotFoundError(f"{what}: the server has no such share", "check --share / the server's share name")
        if isinstance(exc, ex.AccessDenied):
            return AuthError(f"{what}: access denied by the server", "check the share's permissions and signing")
        if isinstance(exc, ex.SMBConnectionClosed):
            return NetworkError(f"SMB connection to {self._where} lost while {what}", "the server stopped?")
        if isinstance(exc, ex.SMBResponseException):
            return WorkbenchError(f"{what} failed: NT status 0x{exc.status:08X}", "see the smbd log")
        if isinstance(exc, ex.SMBException):
            if "timeout" in str(exc).lower():
                self._stalled = True
                return NetworkError(
                    f"no reply from {self._where} for {self.options.stall_timeout_s:.0f} s while {what}",
                    "the server stalled"
                )
            return NetworkError(f"SMB failure talking to {self._where} while {what}", "see the smbd log")
        if isinstance(exc, BlockingIOError):  # the send timeout set in connect()
            self._stalled = True
            return NetworkError(
                f"{self._where} took no data for {self.options.stall_timeout_s:.0f} s while {what}",
                "the server stalled"
            )
        if isinstance(exc, ValueError) and isinstance(exc.__cause__, OSError):
            # smbprotocol wraps connect() errors in ValueError("Failed to connect to ...").
            return from_os_error(exc.__cause__, what, self.target.host, self.target.port("smb"))
        if isinstance(exc, OSError):
            return from_os_error(exc, what, self.target.host, self.target.port("smb"))
        return None

    # -- files -----------------------------------------------------------------------------------

    def _require_tree(self) -> Any:
        if self._tree is None:
            raise NetworkError("SMB session is not connected", "call connect() first")
        return self._tree

    def _open(self, remote: str, write: bool, what: str) -> Any:
        from smbprotocol.open import Open

        handle = Open(self._require_tree(), share_path(self.target, remote))
        self._guard(handle.create, *_create_args(write), what=what)
        return handle

    def _close_handle(self, handle: Any, what: str, failing: bool) -> None:
        if failing and self._stalled:
            return  # a CLOSE to a server that stopped answering only waits again; the session is dropped anyway
        if failing:
            with contextlib.suppress(Exception):
                handle.close()
        else:
            self._guard(handle.close, what=what)

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        what = f"downloading {remote}"
        handle = self._open(remote, write=False, what=what)
        failing = True
        try:
            with open(local, "wb") as fh:
                self._guard(self._pull, handle, fh, progress, what=what)
            failing = False
        except OSError as exc:
            raise from_os_error(exc, f"writing {local}") from exc
        finally:
            self._close_handle(handle, what, failing)

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        what = f"uploading {remote}"
        try:
            fh = open(local, "rb")  # noqa: SIM115 - closed below, after the remote handle opens
        except OSError as exc:
            raise from_os_error(exc, f"reading {local}") from exc
        with fh:
            handle = self._open(remote, write=True, what=what)
            failing = True
            try:
                self._guard(self._push, handle, fh, progress, what=what)
                failing = False
            finally:
                self._close_handle(handle, what, failing)

    def mkdir(self, remote_dir: str) -> None:
        from smbprotocol.exceptions import ObjectNameCollision
        from smbprotocol.open import (
            CreateDisposition,
            CreateOptions,
            DirectoryAccessMask,
            FileAttributes,
            ImpersonationLevel,
            Open,
            ShareAccess,
        )

        tree = self._require_tree()
        parts = [p for p in share_path(self.target, remote_dir).split("\\") if p]
        for depth in range(1, len(parts) + 1):
            path = "\\".join(parts[:depth])
            handle = Open(tree, path)
            try:
                handle.create(
                    ImpersonationLevel.Impersonation,
                    DirectoryAccessMask.FILE_LIST_DIRECTORY,
                    FileAttributes.FILE_ATTRIBUTE_DIRECTORY,
                    ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
                    CreateDisposition.FILE_OPEN_IF,
                    CreateOptions.FILE_DIRECTORY_FILE,
                )
            except ObjectNameCollision:
                continue  # a file of that name; the upload into it will say so
            except Exception as exc:
                error = self._translate(exc, f"creating {path}")
                if error is None:
                    raise
                raise error from exc
            self._guard(handle.close, what=f"creating {path}")

    def remove_tree(self, remote_dir: str) -> None:
        self._require_tree()
        remove_smb_tree(
            _SmbprotocolTree(self), share_path(self.target, remote_dir), f"{self._where}/{self.target.share}"
        )

    def check_real_dir(self, remote: str) -> None:
        self._require_tree()
        check_smb_real_dir(
            _SmbprotocolTree(self), share_path(self.target, remote), f"{self._where}/{self.target.share}"
        )

    # -- sets of small files: one compound per file, several files in flight ---------------------

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._many(files, progress, upload=False)

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._many(files, progress, upload=True)

    def _many(self, files: Sequence[FileCopy], progress: Progress, upload: bool) -> None:
        """Small files go as related compounds (one round trip each, FILES_IN_FLIGHT at once); big ones alone."""
        self._require_tree()
        small_limit = self._request_size(self._conn.max_write_size if upload else self._conn.max_read_size)
        in_flight: deque[tuple[FileCopy, list[Any], int]] = deque()
        retry: list[FileCopy] = []

        def finish_oldest() -> None:
            item, requests, size = in_flight.popleft()
            what = f"{'uploading' if upload else 'downloading'} {item.remote}"
            if not self._guard(self._finish_compound, item, requests, size, upload, progress, what=what):
                retry.append(item)  # bigger than its manifest said: copy it the long way

        try:
            for item in files:
                size = size_of(item.local) if upload else item.size
                if size >= small_limit:
                    while in_flight:
                        finish_oldest()
                    if upload:
                        self.upload(item.local, item.remote, progress)
                    else:
                        self.download(item.remote, item.local, progress)
                    continue
                if len(in_flight) >= FILES_IN_FLIGHT:
                    finish_oldest()
                what = f"{'uploading' if upload else 'downloading'} {item.remote}"
                requests, size = self._guard(self._send_compound, item, size, upload, what=what)
                in_flight.append((item, requests, size))
                self._most_in_flight = max(self._most_in_flight, len(in_flight))
            while in_flight:
                finish_oldest()
        except BaseException:
            self._abandon(in_flight)
            raise
        for item in retry:
            self.download(item.remote, item.local, progress)

    def _abandon(self, in_flight: deque[tuple[FileCopy, list[Any], int]]) -> None:
        """Collect the replies of compounds no longer wanted so the session stays usable (none left pending)."""
        from smbprotocol.exceptions import SMBResponseException

        for _, requests, _ in in_flight:
            for request in requests:
                try:
                    self._conn.receive(request, timeout=self.options.stall_timeout_s)
                except SMBResponseException:
                    continue
                except Exception:
                    return  # the connection itself failed: nothing more will arrive
        in_flight.clear()

    def _send_compound(self, item: FileCopy, size: int, upload: bool) -> tuple[list[Any], int]:
        """CREATE + READ/WRITE + CLOSE of one small file, sent as one related compound; returns its requests."""
        from smbprotocol.open import Open, SMB2CloseRequest, SMB2ReadRequest, SMB2WriteRequest

        related = b"\xff" * 16  # "the file the previous request of this compound opened"
        handle = Open(self._tree, share_path(self.target, item.remote))
        if upload:
            body = SMB2WriteRequest()
            body["buffer"] = read_all(item.local)
            size = len(body["buffer"].get_value())
        else:
            body = SMB2ReadRequest()
            body["length"] = size + 1  # one byte more than expected shows a file that grew
            body["padding"] = b"\x50"
        body["file_id"] = related
        create, _ = handle.create(*_create_args(upload), send=False)
        close = SMB2CloseRequest()
        close["file_id"] = related
        messages = [create, body, close]
        need = sum(self._charge(len(m)) for m in messages)
        if self._credits() < need:
            self._top_up(need)
        tree = self._tree
        requests = self._conn.send_compound(messages, tree.session.session_id, tree.tree_connect_id, related=True)
        return requests, size

    def _finish_compound(
        self, item: FileCopy, requests: list[Any], size: int, upload: bool, progress: Progress
    ) -> bool:
        """Collect one compound's three replies; False when a download turned out larger than one read."""
        from smbprotocol.exceptions import EndOfFile

        errors: list[Exception] = []
        replies: list[Any] = []
        for request in requests:  # every reply is collected, even after a failure, so none is left pending
            try:
                replies.append(self._conn.receive(request, timeout=self.options.stall_timeout_s))
            except EndOfFile:
                replies.append(None)  # reading an empty file
            except Exception as exc:
                errors.append(exc)
                replies.append(None)
        if errors:
            raise errors[0]
        from smbprotocol.open import SMB2CreateResponse, SMB2WriteResponse

        created = SMB2CreateResponse()
        created.unpack(replies[0]["data"].get_value())
        if upload:
            written = SMB2WriteResponse()
            written.unpack(replies[1]["data"].get_value())
            count = written["count"].get_value()
            if count != size:
                raise WorkbenchError(f"short write: server took {count} of {size} bytes", "disk full?")
            progress(count)
            return True
        data = read_payload(replies[1]["data"].get_value()) if replies[1] is not None else memoryview(b"")
        if len(data) != created["end_of_file"].get_value():
            return False
        with open(item.local, "wb") as fh:
            fh.write(data)
        progress(len(data))
        return True

    # -- the pipeline ----------------------------------------------------------------------------

    def _credits(self) -> int:
        conn = self._conn
        with conn.sequence_lock:
            return conn.sequence_window["high"] - conn.sequence_window["low"]

    def _charge(self, length: int) -> int:
        if not self._conn.supports_multi_credit:
            return 1
        return max(1, (length - 1) // CREDIT_UNIT + 1)

    def _ask(self, charge: int) -> int:
        """Credits to request with a read/write: enough to keep `depth` such requests outstanding."""
        want = charge * (self.depth + 1)
        return min(charge + max(0, want - self._credits()), 8192)

    def _send(self, message: Any, charge: int) -> Any:
        conn, tree = self._conn, self._tree
        return conn.send(message, tree.session.session_id, tree.tree_connect_id, credit_request=self._ask(charge))

    def _top_up(self, need: int) -> None:
        """Ask for credits with an echo when none are outstanding to bring them back."""
        conn = self._conn
        conn.echo(sid=self._tree.session.session_id, timeout=self.options.stall_timeout_s, credit_request=need + 1)
        if self._credits() < need:
            raise NetworkError(
                f"server at {self._where} granted too few SMB credits for a {need}-credit request",
                "raise 'smb2 max credits' on the server",
            )

    def _read_reply(self, request: Any) -> memoryview:
        response = self._conn.receive(request, timeout=self.options.stall_timeout_s)
        return read_payload(response["data"].get_value())

    def _write_reply(self, request: Any) -> int:
        from smbprotocol.open import SMB2WriteResponse

        response = self._conn.receive(request, timeout=self.options.stall_timeout_s)
        reply = SMB2WriteResponse()
        reply.unpack(response["data"].get_value())
        return reply["count"].get_value()

    def _pull(self, handle: Any, fh: BinaryIO, progress: Progress) -> None:
        size = handle.end_of_file
        chunk = self._request_size(self._conn.max_read_size)
        pending: deque[tuple[Any, int]] = deque()
        offset = 0
        while offset < size or pending:
            while offset < size and len(pending) < self.depth:
                length = min(chunk, size - offset)
                charge = self._charge(length)
                if self._credits() < charge:
                    if pending:
                        break
                    self._top_up(charge)
                message, _ = handle.read(offset, length, send=False)
                pending.append((self._send(message, charge), length))
                self._most_in_flight = max(self._most_in_flight, len(pending))
                offset += length
            request, length = pending.popleft()
            data = self._read_reply(request)
            if len(data) != length:
                raise WorkbenchError(
                    f"short read: got {len(data)} of {length} bytes", "the file changed on the server during the copy"
                )
            fh.write(data)
            progress(length)

    def _push(self, handle: Any, fh: io.BufferedReader, progress: Progress) -> None:
        chunk = self._request_size(self._conn.max_write_size)
        # One reusable buffer: each request leaves the process before the next read refills it.
        buffer = bytearray(chunk)
        view = memoryview(buffer)
        pending: deque[tuple[Any, int]] = deque()
        offset = 0
        length = 0
        eof = False
        while not eof or pending:
            while not eof and len(pending) < self.depth:
                if not length:
                    length = fh.readinto(buffer)
                    if not length:
                        eof = True
                        break
                charge = self._charge(length)
                if self._credits() < charge:
                    if pending:
                        break
                    self._top_up(charge)
                pending.append((self._send_write(handle, offset, view[:length], charge), length))
                self._most_in_flight = max(self._most_in_flight, len(pending))
                offset += length
                length = 0
            if pending:
                request, sent = pending.popleft()
                written = self._write_reply(request)
                if written != sent:
                    raise WorkbenchError(f"short write: server took {written} of {sent} bytes", "disk full?")
                progress(sent)

    def _send_write(self, handle: Any, offset: int, data: memoryview, charge: int) -> Any:
        if self._fast is not None:
            return self._fast.send_write(handle.file_id, offset, data, charge, self._ask(charge))
        message, _ = handle.write(bytes(data), offset, send=False)
        return self._send(message, charge)


def _refuse_what_the_server_imposed(signing: str | None, encryption: str | None, got: ClientDetails) -> None:
    """The library follows a server that requires signing or encryption even when told "off": the row then
    says it could not keep them off rather than measure a session other than the one asked for."""
    if signing == "off" and got.signing:
        raise cannot("smbprotocol", "keep signing off: the server requires it", "use smb_signing on or required")
    if encryption == "off" and got.encryption:
        raise cannot("smbprotocol", "keep encryption off: the server requires it", "use smb_encryption required")


def _chosen(options: ClientOptions) -> tuple[str | None, str | None, int | None]:
    """The user's signing and encryption words, and the dialect revision to offer (None: the library's newest).

    smbprotocol offers either every dialect or exactly one: a highest dialect is offered alone, so a server
    without it refuses the session rather than settling lower."""
    revision = BY_NAME[options.smb_max_dialect].revision if options.smb_max_dialect is not None else None
    return options.smb_signing, options.smb_encryption, revision


def _create_args(write: bool) -> tuple[Any, ...]:
    """CREATE arguments for copying a whole file: overwrite-or-create to write, shared open to read."""
    from smbprotocol.open import (
        CreateDisposition,
        CreateOptions,
        FileAttributes,
        FilePipePrinterAccessMask,
        ImpersonationLevel,
        ShareAccess,
    )

    access = FilePipePrinterAccessMask
    if write:
        mask = access.FILE_WRITE_DATA | access.FILE_READ_ATTRIBUTES | access.FILE_WRITE_ATTRIBUTES
        disposition, share = CreateDisposition.FILE_OVERWRITE_IF, 0
    else:
        mask = access.FILE_READ_DATA | access.FILE_READ_ATTRIBUTES
        disposition, share = CreateDisposition.FILE_OPEN, ShareAccess.FILE_SHARE_READ
    options = CreateOptions.FILE_NON_DIRECTORY_FILE | CreateOptions.FILE_SEQUENTIAL_ONLY
    return (ImpersonationLevel.Impersonation, mask, FileAttributes.FILE_ATTRIBUTE_NORMAL, share, disposition, options)


class _SmbprotocolTree:
    """TreeOps over an smbprotocol session (remove_smb_tree's listing and deleting)."""

    def __init__(self, client: SmbprotocolClient) -> None:
        self.client = client
        self.tree = client._require_tree()

    def list_dir(self, path: str, pattern: str = "*") -> list[DirEntry]:
        from smbprotocol.exceptions import NoMoreFiles
        from smbprotocol.file_info import FileInformationClass
        from smbprotocol.open import CreateDisposition, CreateOptions, DirectoryAccessMask, ImpersonationLevel, Open

        what = f"listing {posix(path) or 'the share root'}"
        handle = Open(self.tree, path)
        guard = self.client._guard
        guard(
            handle.create,
            ImpersonationLevel.Impersonation,
            DirectoryAccessMask.FILE_LIST_DIRECTORY | DirectoryAccessMask.FILE_READ_ATTRIBUTES,
            0,
            SHARE_ALL,
            CreateDisposition.FILE_OPEN,
            CreateOptions.FILE_DIRECTORY_FILE,
            what=what,
        )
        entries: list[DirEntry] = []
        try:
            while True:  # each QUERY_DIRECTORY continues where the last ended, until STATUS_NO_MORE_FILES
                try:
                    batch = handle.query_directory(pattern, FileInformationClass.FILE_ID_BOTH_DIRECTORY_INFORMATION)
                except NoMoreFiles:
                    break
                except Exception as exc:
                    raise self.client._translate(exc, what) or exc from exc
                entries += [_entry(info) for info in batch]
        finally:
            self.client._close_handle(handle, what, failing=False)
        return entries

    def delete_entry(self, path: str, kind: str) -> int:
        from smbprotocol.exceptions import SMBResponseException
        from smbprotocol.file_info import FileDispositionInformation
        from smbprotocol.open import (
            CreateDisposition,
            FilePipePrinterAccessMask,
            ImpersonationLevel,
            Open,
            SMB2SetInfoRequest,
        )

        what = f"deleting {posix(path)}"
        access = FilePipePrinterAccessMask.DELETE | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES
        handle = Open(self.tree, path)
        try:
            handle.create(
                ImpersonationLevel.Impersonation,
                access,
                0,
                SHARE_ALL,
                CreateDisposition.FILE_OPEN,
                delete_options(kind),
            )
        except SMBResponseException as exc:
            return exc.status
        except Exception as exc:
            raise self.client._translate(exc, what) or exc from exc
        status = 0
        try:
            info = FileDispositionInformation()
            info["delete_pending"] = True
            request = SMB2SetInfoRequest()
            request["info_type"] = info.INFO_TYPE
            request["file_info_class"] = info.INFO_CLASS
            request["file_id"] = handle.file_id
            request["buffer"] = info
            conn, session = self.tree.session.connection, self.tree.session
            sent = conn.send(request, session.session_id, self.tree.tree_connect_id)
            conn.receive(sent, timeout=self.client.options.stall_timeout_s)
        except SMBResponseException as exc:
            status = exc.status
        except Exception as exc:
            raise self.client._translate(exc, what) or exc from exc
        finally:
            try:
                handle.close()  # the entry goes when its last handle closes; Samba reports a failed rmdir here
            except SMBResponseException as exc:
                status = status or exc.status
        return status


def _entry(info: Any) -> DirEntry:
    return DirEntry(
        info["file_name"].get_value().decode("utf-16-le"),
        info["file_attributes"].get_value(),
        info["file_id"].get_value(),
    )
