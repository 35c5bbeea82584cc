"""SMB through pysmb: SMB 2.0.2 only, so every request carries at most 64 KiB and only one is in flight.

pysmb asks the server for no extra credits and sends the next read or write only after the previous
reply, so its ceiling is request_bytes x 1 / RTT; details() reports both numbers for the ceiling code.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, BinaryIO

from workbench.protocols.base import Client, Progress, call_translating
from workbench.protocols.details import ClientDetails
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, WorkbenchError, from_os_error

STATUS_OBJECT_NAME_NOT_FOUND = 0xC0000034
STATUS_OBJECT_NAME_COLLISION = 0xC0000035
STATUS_OBJECT_PATH_NOT_FOUND = 0xC000003A
STATUS_ACCESS_DENIED = 0xC0000022
STATUS_OBJECT_NAME_INVALID = 0xC0000033
STATUS_OBJECT_PATH_SYNTAX_BAD = 0xC000003B
STATUS_BAD_NETWORK_NAME = 0xC00000CC
_NOT_FOUND = {STATUS_OBJECT_NAME_NOT_FOUND, STATUS_OBJECT_PATH_NOT_FOUND}
_DIALECTS = {0x0202: "2.0.2", 0x0210: "2.1", 0x0300: "3.0", 0x0302: "3.0.2", 0x0311: "3.1.1"}


def smb_path(remote: str) -> str:
    """A POSIX path relative to the share as SMB wants it (backslashes, no leading separator)."""
    return remote.strip("/").replace("/", "\\")


def _proc_net_address(host: str, port: int) -> str:
    """host:port as /proc/net/tcp{,6} writes it (each 32-bit word of the address in host byte order)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    packed = socket.inet_pton(family, host)
    words = [packed[i : i + 4][::-1].hex().upper() for i in range(0, len(packed), 4)]
    return f"{''.join(words)}:{port:04X}"


def local_peer_pids(sock: socket.socket | None) -> list[int]:
    """PIDs of local processes holding the far end of a TCP connection (the smbd child serving it)."""
    if sock is None:
        return []
    try:
        near, far = sock.getsockname()[:2], sock.getpeername()[:2]
    except OSError:
        return []
    want_local, want_remote = _proc_net_address(*far), _proc_net_address(*near)
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                rows = [line.split() for line in fh][1:]
        except OSError:
            continue
        inodes.update(r[9] for r in rows if len(r) > 9 and r[1] == want_local and r[2] == want_remote)
    if not inodes:
        return []  # the server is on another host or in another network namespace
    targets = {f"socket:[{inode}]" for inode in inodes}
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") in targets for fd in os.listdir(f"/proc/{entry}/fd")):
                pids.append(int(entry))
        except OSError:
            continue
    return sorted(pids)


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
        from smb.SMBConnection import SMBConnection

        class _Connection(SMBConnection):
            # pysmb keeps no record of the negotiated dialect; catch it as the reply goes by.
            dialect_revision: int | None = None

            def _updateServerInfo_SMB2(self, payload: Any) -> None:
                self.dialect_revision = getattr(payload, "dialect_revision", None)
                super()._updateServerInfo_SMB2(payload)

        creds = self.target.credentials
        conn = _Connection(creds.user, creds.password, "workbench", self.target.host, is_direct_tcp=True)
        try:
            # pysmb's timeout bounds the TCP connect and each reply of the login alike (replies take ms)
            ok = self._call(
                conn.connect, self.target.host, self.target.port("smb"), timeout=self.options.connect_timeout
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
        self._conn = conn

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
                f"no reply from {self._where} for {self.options.timeout:.0f} s while {what}", "the server stalled"
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
                    smb_path(remote),
                    _ProgressWriter(fh, progress),
                    timeout=self.options.timeout,
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
                    smb_path(remote),
                    _ProgressReader(fh, progress),
                    timeout=self.options.timeout,
                    what=f"uploading {remote}",
                )
        except OSError as exc:
            raise from_os_error(exc, f"reading {local}") from exc

    def mkdir(self, remote_dir: str) -> None:
        conn = self._require()
        parts = [p for p in remote_dir.strip("/").split("/") if p]
        for depth in range(1, len(parts) + 1):
            path = "\\".join(parts[:depth])
            try:
                conn.createDirectory(self.target.share, path, timeout=self.options.timeout)
            except Exception as exc:
                if _status(exc) == STATUS_OBJECT_NAME_COLLISION:
                    continue  # already there: mkdir is idempotent
                error = self._translate(exc, f"creating {path}")
                if error is None:
                    raise
                raise error from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def server_pids(self) -> list[int]:
        return local_peer_pids(self._conn.sock if self._conn is not None else None)

    def details(self) -> ClientDetails:
        conn = self._conn
        if conn is None:
            # SMB 2.0.2 has no multi-credit requests
            return ClientDetails(requests_in_flight=1, timed_includes_setup=False, request_bytes=64 * 1024)
        revision = getattr(conn, "dialect_revision", None)
        # pysmb reads with max_read_size and writes with max_write_size, one request at a time.
        return ClientDetails(
            requests_in_flight=1,
            timed_includes_setup=False,
            dialect=_DIALECTS.get(revision, f"0x{revision:04x}") if revision else "1.0",
            request_bytes=min(conn.max_read_size, conn.max_write_size),
            read_bytes=conn.max_read_size,
            write_bytes=conn.max_write_size,
            signing=bool(conn.is_signing_active),
            encryption=False,
        )
