"""The fast data path of the smbprotocol client: READ replies and WRITE requests moved with few copies.

smbprotocol copies every 8 MiB message five to eight times (structure packing, signature slicing,
socket buffers). This keeps the library's session, credits and reader thread but sends WRITEs with one
scatter/gather sendmsg and a signature computed piece by piece, and receives each message with one
MSG_WAITALL recv. It relies on smbprotocol internals (checked against 1.17); `attach()` falls back to
the library's own path when anything it needs is missing.
"""

from __future__ import annotations

import hashlib
import hmac
import select
import socket
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workbench.protocols.smb_negotiated import SIGNING_IDS, default_signing_algorithm, dialect_name
from workbench.shared.errors import from_os_error

# -- zero-copy READ/WRITE on top of the library's session ---------------------------------------

Buffer = bytes | bytearray | memoryview
_WRITE_FIXED = struct.Struct("<HHIQ16sIIHHI")  # SMB2 WRITE request body before its data (48 bytes)
_SIGNED = 0x00000008  # SMB2_FLAGS_SIGNED
_SMB2_WRITE = 0x0009


def _signer(conn: Any, key: bytes) -> Callable[[Sequence[Buffer], int, bool], bytes]:
    """The session's signing function over a message given in pieces (no concatenation)."""
    from cryptography.hazmat.primitives import cmac
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    negotiated = SIGNING_IDS.get(conn.signing_algorithm_id) if conn.signing_algorithm_id is not None else None
    # a 3.1.1 session that negotiated no algorithm signs as 3.0 does, with AES-128-CMAC
    algorithm = negotiated or default_signing_algorithm(dialect_name(conn.dialect)) or "AES-128-CMAC"

    def sign(parts: Sequence[Buffer], message_id: int, response: bool) -> bytes:
        if algorithm == "AES-128-GMAC":
            nonce = message_id.to_bytes(8, "little") + (1 if response else 0).to_bytes(4, "little")
            gmac = Cipher(algorithms.AES(key), modes.GCM(nonce)).encryptor()
            for part in parts:
                gmac.authenticate_additional_data(part)
            gmac.finalize()
            return gmac.tag
        if algorithm == "AES-128-CMAC":
            mac = cmac.CMAC(algorithms.AES(key))
            for part in parts:
                mac.update(part)  # type: ignore[arg-type]  # its stub says bytes; it takes any buffer, as GMAC does
            return mac.finalize()
        digest = hmac.new(key, digestmod=hashlib.sha256)
        for part in parts:
            digest.update(part)
        return digest.digest()[:16]

    return sign


def _sendmsg_all(sock: socket.socket, parts: list[Buffer]) -> None:
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        sent = sock.sendmsg(views)
        while views and sent >= len(views[0]):
            sent -= len(views[0])
            views.pop(0)
        if views and sent:
            views[0] = views[0][sent:]


class FastPath:
    """Signed SMB2 READ replies and WRITE requests moved without copying their payload."""

    def __init__(self, conn: Any, session: Any, tree: Any) -> None:
        self.conn = conn
        self.session = session
        self.tree = tree
        self.signing = bool(session.signing_required and session.signing_key)
        self.sign = _signer(conn, session.signing_key) if self.signing else None

    @classmethod
    def attach(cls, conn: Any, session: Any, tree: Any) -> FastPath | None:
        """Install the fast receive path on a connected session; None where only the library's path is safe."""
        try:
            if session.encrypt_data or tree.encrypt_data or tree.is_dfs_share:
                return None
            transport = conn.transport
            needed = (transport._sock, transport._sock_lock, transport._close_lock, conn.sequence_window)
            if any(n is None for n in needed) or not hasattr(conn, "outstanding_requests"):
                return None
            fast = cls(conn, session, tree)
        except AttributeError:
            return None
        # Both run on the library's reader thread, which looks them up on the instance each message.
        transport.recv = fast._recv
        conn.verify_signature = fast._verify
        return fast

    # -- reader thread -------------------------------------------------------------------------

    def _recv(self, timeout: float) -> bytes:
        """Transport.recv receiving each message straight into one bytes object (the library copies it twice)."""
        size, timeout = self._recv_exact(4, timeout)
        if size is None:
            return b""
        body, _ = self._recv_exact(struct.unpack(">L", size)[0], timeout)
        return body if body is not None else b""

    def _recv_exact(self, length: int, timeout: float) -> tuple[bytes | None, float]:
        transport = self.conn.transport
        parts: list[bytes] = []
        missing = length
        while missing:
            with transport._close_lock:
                if not transport.connected:
                    return None, timeout
                ready = select.select([transport._sock], [], [], max(timeout, 1))[0]
                if not ready:
                    raise TimeoutError(f"recv idle ({length - missing}/{length} bytes)")
                try:
                    # MSG_WAITALL: one syscall fills one bytes object; close() shuts the socket down to end it.
                    chunk = transport._sock.recv(missing, socket.MSG_WAITALL)
                except (ConnectionResetError, ConnectionAbortedError):
                    chunk = b""
            if not chunk:
                transport.close()
                return None, timeout
            parts.append(chunk)
            missing -= len(chunk)
        return (parts[0] if len(parts) == 1 else b"".join(parts)), timeout

    def _verify(self, header: Any, session_id: int, force: bool = False) -> None:
        """Connection.verify_signature without re-packing the whole message."""
        conn = self.conn
        message_id = header["message_id"].get_value()
        flags = header["flags"]
        if not force and (
            message_id == 0xFFFFFFFFFFFFFFFF
            or not flags.has_flag(_SIGNED)
            or header["status"].get_value() == 0x00000103  # STATUS_PENDING
            or header["command"].get_value() == 0x0001  # SESSION_SETUP
        ):
            return
        session = conn.session_table.get(session_id)
        if session is not self.session or self.sign is None:
            type(conn).verify_signature(conn, header, session_id, force)
            return
        head = b"".join(f.pack() for name, f in header.fields.items() if name != "data")
        expected = self.sign([head[:48], bytes(16), header["data"].get_value()], message_id, True)
        if not hmac.compare_digest(expected, header["signature"].get_value()):
            from smbprotocol.exceptions import SMBException

            raise SMBException("Server message signature could not be verified")

    # -- caller thread -------------------------------------------------------------------------

    def send_write(self, file_id: bytes, offset: int, data: Buffer, charge: int, credit_request: int) -> Any:
        """Send one WRITE; returns the library Request its reply will be delivered to."""
        from smbprotocol.connection import Request
        from smbprotocol.exceptions import SMBException
        from smbprotocol.header import SMB2HeaderRequest
        from smbprotocol.open import SMB2WriteRequest

        conn = self.conn
        with conn.sequence_lock:
            low, high = conn.sequence_window["low"], conn.sequence_window["high"]
            if charge > high - low:
                raise SMBException(f"Request requires {charge} credits but only {high - low} credits are available")
            conn.sequence_window["low"] += charge
        header = SMB2HeaderRequest()
        header["credit_charge"] = charge
        header["command"] = _SMB2_WRITE
        header["credit_request"] = credit_request
        header["message_id"] = low
        header["session_id"] = self.session.session_id
        header["tree_id"] = self.tree.tree_connect_id
        header["data"] = b""
        if self.signing:
            header["flags"].set_flag(_SIGNED)
        head = header.pack()
        body = _WRITE_FIXED.pack(49, 0x70, len(data), offset, file_id, 0, 0, 0, 0, 0)
        if self.sign is not None:
            signature = self.sign([head, body, data], low, False)
            head = head[:48] + signature
            header["signature"] = signature
        request = Request(header, SMB2WriteRequest, conn, session_id=self.session.session_id)
        conn.outstanding_requests[low] = request
        conn._check_worker_running()
        frame = struct.pack(">L", len(head) + len(body) + len(data))
        with conn.transport._sock_lock:
            _sendmsg_all(conn.transport._sock, [frame, head, body, data])
        return request


def read_all(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise from_os_error(exc, f"reading {path}") from exc


def size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as exc:
        raise from_os_error(exc, f"reading {path}") from exc


def read_payload(raw: bytes) -> memoryview:
    """The data of an SMB2 READ reply body, without copying it out."""
    data_offset = raw[2] - 64  # offsets count from the start of the SMB2 header
    data_length = int.from_bytes(raw[4:8], "little")
    return memoryview(raw)[data_offset : data_offset + data_length]
