"""The AFP client's bytes on fixed vectors: DSI framing, AFP requests and replies, the DHX2 arithmetic and ciphers.

The live exchanges (netatalk accepting these bytes) are in tests/contract/test_afp.py; here every layout is pinned
byte for byte, each parser is fed truncated and hostile replies, and the DSI reader runs over a real socket pair
with a peer that interleaves its own requests.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import struct
import threading

import pytest

from workbench.protocols import afp_dhx2 as dhx2
from workbench.protocols import afp_wire as wire
from workbench.protocols.afp_dsi import (
    ATTENTION,
    COMMAND,
    OPEN_SESSION,
    TICKLE,
    WRITE,
    DsiConnection,
    DsiError,
    pack_header,
    parse_header,
    parse_session_options,
)

# RFC 2409's first Oakley group: a 768-bit safe prime with generator 2.
OAKLEY1 = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A63A3620FFFFFFFFFFFFFFFF",
    16,
)
L = 96
# FPWriteExt's header: command, flag, fork (2), offset (8), count (8); the DSIWrite's data starts after it
WRITE_EXT_HEADER_BYTES = 20


# --- DSI -------------------------------------------------------------------------------------------------------


def test_dsi_header_layout() -> None:
    raw = pack_header(0, COMMAND, 0x0102, 0, 20)
    assert raw == bytes.fromhex("00 02 0102 00000000 00000014 00000000")
    assert parse_header(raw).length == 20
    # a reply's error code is signed: -5018 is 0xFFFFEC66 on the wire
    reply = parse_header(bytes.fromhex("01 02 0102 FFFFEC66 00000000 00000000"))
    assert (reply.flags, reply.code) == (1, -5018)


def test_dsi_session_options() -> None:
    assert parse_session_options(bytes.fromhex("00 04 00100000 02 04 00000000")) == {0: 1 << 20, 2: 0}
    with pytest.raises(DsiError):
        parse_session_options(bytes.fromhex("00 04 0010"))


class Peer:
    """The server's end of a socket pair: reads what the client sends, writes what the test scripts."""

    def __init__(self) -> None:
        self.client_sock, self.sock = socket.socketpair()
        self.client_sock.settimeout(5)
        self.sock.settimeout(5)
        self.conn = DsiConnection(self.client_sock, "peer")

    def read_message(self) -> tuple[bytes, bytes]:
        header = self._exact(16)
        return header, self._exact(parse_header(header).length)

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "client closed"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()
        self.client_sock.close()


@pytest.fixture
def peer():
    p = Peer()
    yield p
    p.close()


def test_requests_count_up_and_writes_carry_their_offset(peer: Peer) -> None:
    first = peer.conn.send_request(COMMAND, b"\x14\x00")
    second = peer.conn.send_request(WRITE, wire.write_ext(7, 0, 3), b"abc")
    assert (first, second) == (0, 1)
    header, data = peer.read_message()
    assert header == pack_header(0, COMMAND, 0, 0, 2) and data == b"\x14\x00"
    header, data = peer.read_message()
    assert parse_header(header).code == WRITE_EXT_HEADER_BYTES  # the DSIWrite's data offset
    assert data == wire.write_ext(7, 0, 3) + b"abc"
    assert peer.conn.requests_sent == 2


def test_reply_after_a_tickle_and_an_attention_from_the_server(peer: Peer) -> None:
    request_id = peer.conn.send_request(COMMAND, b"\x14\x00")
    peer.read_message()
    peer.sock.sendall(pack_header(0, TICKLE, 900, 0, 0))
    peer.sock.sendall(pack_header(0, ATTENTION, 901, 0, 2) + struct.pack(">H", 0x8000))
    peer.sock.sendall(pack_header(1, COMMAND, request_id, 0, 4) + b"data")
    reply = peer.conn.read_reply(request_id)
    assert (reply.code, reply.data) == (0, b"data")
    assert peer.conn.attentions == [0x8000]
    tickle, _ = peer.read_message()  # answered with a tickle of the client's own
    assert parse_header(tickle).command == TICKLE and parse_header(tickle).flags == 0
    answer, _ = peer.read_message()  # the attention answered with an empty reply of its ID
    assert parse_header(answer) == parse_header(pack_header(1, ATTENTION, 901, 0, 0))


def test_read_data_lands_in_the_callers_buffer(peer: Peer) -> None:
    buffer = bytearray(8)
    peer.sock.sendall(pack_header(1, COMMAND, 5, wire.ERR_EOF, 3) + b"xyz")
    reply = peer.conn.read_reply(5, memoryview(buffer))
    assert (reply.code, reply.length, reply.data, bytes(buffer[:3])) == (wire.ERR_EOF, 3, b"", b"xyz")


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (pack_header(1, COMMAND, 6, 0, 0), "answered request 6"),  # a reply to another request
        (pack_header(1, COMMAND, 5, 0, 100 << 20), "104857600 bytes"),  # a reply past any control reply's size
        (pack_header(7, COMMAND, 5, 0, 0), "flags 7"),
        (pack_header(0, 1, 77, 0, 0), "closed the AFP session"),  # the server's DSICloseSession
        (pack_header(0, 99, 77, 0, 0), "unexpected DSI request"),
        (b"\x01\x02", "closed the connection"),  # a header cut short by the end of the stream
    ],
)
def test_broken_framing_is_a_dsi_error(peer: Peer, message: bytes, why: str) -> None:
    peer.sock.sendall(message)
    peer.sock.shutdown(socket.SHUT_WR)
    with pytest.raises(DsiError, match=why):
        peer.conn.read_reply(5)


def test_a_read_reply_larger_than_the_buffer_is_refused(peer: Peer) -> None:
    peer.sock.sendall(pack_header(1, COMMAND, 5, 0, 9) + b"123456789")
    with pytest.raises(DsiError, match="more than was asked for"):
        peer.conn.read_reply(5, memoryview(bytearray(8)))


def test_open_session_reads_the_quantum_and_close_sends_close_session(peer: Peer) -> None:
    def server() -> None:
        header, data = peer.read_message()
        assert parse_header(header).command == OPEN_SESSION
        assert data == bytes.fromhex("01 04 00000002")  # the client's attention quantum: 2 bytes
        options = bytes.fromhex("00 04 00080000")
        peer.sock.sendall(pack_header(1, OPEN_SESSION, parse_header(header).request_id, 0, len(options)) + options)

    thread = threading.Thread(target=server)
    thread.start()
    assert peer.conn.open_session() == 0x80000
    thread.join()
    peer.conn.close()
    header, _ = peer.read_message()
    assert parse_header(header).command == 1


def test_a_tiny_quantum_is_refused(peer: Peer) -> None:
    options = bytes.fromhex("00 04 00000010")
    peer.sock.sendall(pack_header(1, OPEN_SESSION, 0, 0, len(options)) + options)
    with pytest.raises(DsiError, match="server quantum of 16 bytes"):
        peer.conn.open_session()


# --- AFP requests ----------------------------------------------------------------------------------------------


def test_login_ext_layout() -> None:
    # command, pad, flags; version and UAM as Pascal strings; the user as type 3 + length + UTF-8; an empty
    # directory-service path; 25 bytes, left odd when no UAM data follows
    expected = bytes.fromhex("3F 00 0000") + b"\x06AFP3.4" + b"\x04DHX2" + bytes.fromhex("03 0003") + b"bob"
    expected += bytes.fromhex("03 0000")
    assert wire.login_ext("AFP3.4", "DHX2", "bob") == expected
    # with UAM data (the cleartext password field), padded to an even offset first
    clear = wire.login_ext("AFP3.4", "Cleartxt Passwrd", "bob", wire.cleartext_password("pw"))
    assert len(clear) % 2 == 0 and clear.endswith(b"\0pw" + b"\0" * 6)


def test_cleartext_password_field() -> None:
    assert wire.cleartext_password("12345678") == b"12345678"
    with pytest.raises(ValueError, match="at most 8 bytes"):
        wire.cleartext_password("123456789")


def test_paths_and_names() -> None:
    assert wire.utf8_path(["a", "bé"]) == bytes.fromhex("03 08000103 0005") + b"a\0b\xc3\xa9"
    assert wire.utf8_path([]) == bytes.fromhex("03 08000103 0000")
    assert wire.split_path("/files/set/") == ["files", "set"]
    for bad in ("a/../b", "a//b", "./a", "a/\0"):
        with pytest.raises(ValueError):
            wire.split_path(bad)


def test_request_layouts() -> None:
    assert wire.read_ext(5, 1024, 1 << 20) == bytes.fromhex("3C 00 0005 0000000000000400 0000000000100000")
    assert wire.write_ext(5, 0, 3) == bytes.fromhex("3D 00 0005 0000000000000000 0000000000000003")
    assert len(wire.write_ext(5, 0, 3)) == WRITE_EXT_HEADER_BYTES
    assert wire.open_vol("wb") == bytes.fromhex("18 00 0021") + b"\x02wb"
    assert wire.create_file(1, 2, ["d", "f"]) == bytes.fromhex("07 80 0001 00000002") + wire.utf8_path(["d", "f"])
    assert wire.create_dir(1, 2, ["d"]) == bytes.fromhex("06 00 0001 00000002") + wire.utf8_path(["d"])
    assert wire.delete(1, 9, ["f"])[:8] == bytes.fromhex("08 00 0001 00000009")
    assert wire.open_fork(1, 2, ["f"], wire.FORK_READ)[:12] == bytes.fromhex("1A 00 0001 00000002 0800 0001")
    enum = wire.enumerate_ext2(1, 2, 0x2920, 0x2100, 512, 1, 65536, ["d"])
    assert enum == bytes.fromhex("44 00 0001 00000002 2920 2100 0200 00000001 00010000") + wire.utf8_path(["d"])
    assert wire.login_cont(b"\x12\x34rest") == b"\x13\x00\x12\x34rest"


# --- AFP replies -----------------------------------------------------------------------------------------------


def _server_info(versions: list[bytes], uams: list[bytes]) -> bytes:
    name = b"\x02vm"
    fixed = 10 + len(name)
    versions_at = fixed
    body = bytes([len(versions)]) + b"".join(bytes([len(v)]) + v for v in versions)
    uams_at = versions_at + len(body)
    body += bytes([len(uams)]) + b"".join(bytes([len(u)]) + u for u in uams)
    return struct.pack(">HHHHH", 0, versions_at, uams_at, 0, 0x8000) + name + body


def test_server_info() -> None:
    info = wire.parse_server_info(_server_info([b"AFP2.2", b"AFP3.3", b"AFP3.4"], [b"DHX2", b"No User Authent"]))
    assert (info.name, info.uams) == ("vm", ("DHX2", "No User Authent"))
    assert wire.choose_version(info.versions) == "AFP3.4"
    assert wire.choose_version(("AFP2.2",)) is None
    with pytest.raises(ValueError):
        wire.parse_server_info(_server_info([b"AFP3.4"], [b"DHX2"])[:-3])  # a UAM cut short


def _params(fields: bytes, name: str) -> bytes:
    """Parameters with the UTF-8 name's offset patched in: fixed part, then hint, length, name."""
    raw = name.encode()
    return fields + struct.pack(">IH", wire.TEXT_ENCODING_UTF8, len(raw)) + raw


def _file_params(node: int, size: int, name: str, kind: bytes = b"BINA", mode: int = 0o100644) -> bytes:
    fixed = 32 + 4 + 8 + 6 + 16
    finder = kind + b"????" + bytes(24)
    fields = finder + struct.pack(">IQ", node, size) + struct.pack(">HI", fixed, 0)
    fields += struct.pack(">IIIBBBB", 0, 0, mode, 7, 7, 7, 7)
    return _params(fields, name)


def _dir_params(node: int, name: str, mode: int = 0o040755) -> bytes:
    fixed = 4 + 6 + 16
    fields = struct.pack(">I", node) + struct.pack(">HI", fixed, 0) + struct.pack(">IIIBBBB", 0, 0, mode, 7, 7, 7, 7)
    return _params(fields, name)


def _enumeration(entries: list[tuple[bool, bytes]]) -> bytes:
    out = struct.pack(">HHH", wire.file_bitmap(True), wire.dir_bitmap(True), len(entries))
    for is_dir, params in entries:
        length = 4 + len(params) + (len(params) % 2)
        out += struct.pack(">HBB", length, 0x80 if is_dir else 0, 0) + params + b"\0" * (len(params) % 2)
    return out


def test_enumeration_tells_files_dirs_and_links_apart() -> None:
    reply = _enumeration(
        [
            (False, _file_params(17, 5_000_000_000, "big.bin")),
            (True, _dir_params(18, "sub")),
            (False, _file_params(19, 4, "link", kind=b"slnk", mode=0o120777)),
            (False, _file_params(20, 4, "odd link", mode=0o120777)),  # a link known by its mode alone
        ]
    )
    big, sub, link, odd = wire.parse_enumerate_ext2(reply)
    assert (big.name, big.size, big.is_dir, big.is_link) == ("big.bin", 5_000_000_000, False, False)
    assert (sub.name, sub.node_id, sub.is_real_dir) == ("sub", 18, True)
    assert link.is_link and odd.is_link and not link.is_real_dir


def test_a_directory_whose_mode_says_link_is_no_real_directory() -> None:
    (entry,) = wire.parse_enumerate_ext2(_enumeration([(True, _dir_params(30, "d", mode=0o120777))]))
    assert entry.is_dir and not entry.is_real_dir


@pytest.mark.parametrize(
    "reply",
    [
        b"\x00\x01",  # shorter than the header
        _enumeration([(True, _dir_params(18, "sub"))])[:-4],  # an entry cut short
        struct.pack(">HHH", 0, 0, 1) + struct.pack(">HBB", 2, 0, 0),  # an entry shorter than its own header
        struct.pack(">HHH", 0x0001, 0, 1) + struct.pack(">HBB", 6, 0, 0) + b"\0\0",  # a bit this client never asks
    ],
)
def test_malformed_enumerations_are_refused(reply: bytes) -> None:
    with pytest.raises(ValueError):
        wire.parse_enumerate_ext2(reply)


def test_a_name_offset_past_the_parameters_is_refused() -> None:
    fields = struct.pack(">I", 1) + struct.pack(">HI", 500, 0) + bytes(16)
    with pytest.raises(ValueError, match="name past the end"):
        wire.parse_params(fields, wire.dir_bitmap(True), True)


def test_open_vol_and_open_fork_replies() -> None:
    vol = wire.parse_open_vol(struct.pack(">HHH", 0x21, wire.VOL_ATTR_UNIX_PRIVS, 3))
    assert (vol.vol_id, vol.attributes) == (3, wire.VOL_ATTR_UNIX_PRIVS)
    assert wire.parse_open_fork(struct.pack(">HHQ", 0x0800, 12, 123)) == (12, 123)
    with pytest.raises(ValueError):
        wire.parse_open_vol(b"\0\x21\0")


# --- DHX2 ------------------------------------------------------------------------------------------------------


def test_cast5_cbc_matches_rfc_2144() -> None:
    # RFC 2144's 128-bit test vector; CBC with a zero IV leaves the first block as the bare cipher's
    key = bytes.fromhex("0123456712345678234567893456789A")
    assert dhx2.encrypt(key, bytes(8), bytes.fromhex("0123456789ABCDEF")) == bytes.fromhex("238B4FE5847E44B2")
    assert dhx2.decrypt(key, bytes(8), bytes.fromhex("238B4FE5847E44B2")) == bytes.fromhex("0123456789ABCDEF")
    assert dhx2.cast5_missing() is None


def test_nonce_plus_one_wraps() -> None:
    assert dhx2.plus_one(b"\xff" * 16) == bytes(16)
    assert dhx2.plus_one(bytes(15) + b"\x01") == bytes(15) + b"\x02"


def _challenge(ra: int, session_id: int = 0x1234) -> bytes:
    ma = pow(2, ra, OAKLEY1)
    return struct.pack(">HIH", session_id, 2, L) + OAKLEY1.to_bytes(L, "big") + ma.to_bytes(L, "big")


def test_dhx2_exchange_against_an_independent_server_side() -> None:
    """The client's messages read by the server's steps written out here: key, nonces and password all agree."""
    ra, rb = 0x1F2E3D4C5B6A7988, 0x0123456789ABCDEF0123
    client_nonce = bytes(range(16))
    server_nonce = bytes(range(100, 116))
    challenge = dhx2.parse_challenge(_challenge(ra))
    assert (challenge.session_id, challenge.g, challenge.prime_bytes) == (0x1234, 2, L)

    first, key = dhx2.first_reply(challenge, rb, client_nonce)
    # server: ID, Mb (L bytes), the nonce under K = MD5(Mb^Ra mod p on L bytes) with the IV "LWallace"
    assert struct.unpack_from(">H", first)[0] == 0x1234 and len(first) == 2 + L + 16
    mb = int.from_bytes(first[2 : 2 + L], "big")
    assert mb == pow(2, rb, OAKLEY1)
    server_key = hashlib.md5(pow(mb, ra, OAKLEY1).to_bytes(L, "big")).digest()
    assert server_key == key
    assert dhx2.decrypt(server_key, b"LWallace", first[2 + L :]) == client_nonce

    # server: ID + 1, then nonce + 1 and its own nonce under the IV "CJalbert"
    answer = struct.pack(">H", 0x1235) + dhx2.encrypt(
        server_key, b"CJalbert", dhx2.plus_one(client_nonce) + server_nonce
    )
    assert dhx2.server_nonce(key, client_nonce, answer) == (0x1235, server_nonce)

    proof = dhx2.password_reply(key, 0x1235, server_nonce, "pässword")
    assert struct.unpack_from(">H", proof)[0] == 0x1235 and len(proof) == 2 + 16 + 256
    clear = dhx2.decrypt(server_key, b"LWallace", proof[2:])
    assert clear[:16] == dhx2.plus_one(server_nonce)
    assert clear[16:].rstrip(b"\0") == "pässword".encode()


def test_dhx2_pinned_vector() -> None:
    """The same exchange as bytes: a change to any layout or cipher shows here."""
    challenge = dhx2.parse_challenge(_challenge(12345))
    first, key = dhx2.first_reply(challenge, 67890, bytes(16))
    assert key.hex() == hashlib.md5(pow(2, 12345 * 67890, OAKLEY1).to_bytes(L, "big")).digest().hex()
    assert first[2 + L :] == dhx2.encrypt(key, b"LWallace", bytes(16))
    assert len(set(first[2 + L :])) > 1  # encrypted, not the zero nonce in clear


def test_a_server_without_our_key_is_refused() -> None:
    challenge = dhx2.parse_challenge(_challenge(777))
    _, key = dhx2.first_reply(challenge, 888, bytes(16))
    forged = struct.pack(">H", 1) + dhx2.encrypt(bytes(16), b"CJalbert", dhx2.plus_one(bytes(16)) + bytes(16))
    with pytest.raises(ValueError, match="nonce"):
        dhx2.server_nonce(key, bytes(16), forged)


@pytest.mark.parametrize(
    "challenge",
    [
        struct.pack(">HIH", 1, 2, 8) + bytes(16),  # a 64-bit prime: breakable
        _challenge(5)[:-1],  # Ma cut short
        struct.pack(">HIH", 1, 1, L) + OAKLEY1.to_bytes(L, "big") + (5).to_bytes(L, "big"),  # g = 1
        struct.pack(">HIH", 1, 2, L) + OAKLEY1.to_bytes(L, "big") + (1).to_bytes(L, "big"),  # Ma = 1
    ],
)
def test_weak_or_broken_challenges_are_refused(challenge: bytes) -> None:
    with pytest.raises(ValueError):
        dhx2.parse_challenge(challenge)


def test_a_password_that_fills_the_field_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 255 bytes"):
        dhx2.password_reply(bytes(16), 1, bytes(16), "x" * 256)


# --- which login the client chooses ---------------------------------------------------------------------------


class StatusOnlyServer:
    """A listener on loopback that answers DSIGetStatus with the given login methods and records whether any
    client went further (opened a session: where a password would follow)."""

    def __init__(self, uams: list[bytes]) -> None:
        self.status = _server_info([b"AFP3.4"], uams)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.commands: list[int] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(5)
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                header = parse_header(conn.recv(16, socket.MSG_WAITALL))
                self.commands.append(header.command)
                if header.command == 3:  # DSIGetStatus
                    conn.sendall(pack_header(1, 3, header.request_id, 0, len(self.status)) + self.status)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self.listener.close()
        self.thread.join(timeout=5)


@pytest.mark.parametrize(
    ("uams", "login", "refusal"),
    [
        ([b"Cleartxt Passwrd"], "secure", "offers no 'DHX2' login"),  # never the password in clear unasked
        ([b"No User Authent"], "secure", "offers no 'DHX2' login"),
        ([b"DHX2"], "cleartext", "offers no 'Cleartxt Passwrd' login"),
        ([b"DHX2", b"Cleartxt Passwrd"], "guest", "offers no 'No User Authent' login"),
    ],
)
def test_a_login_the_server_lacks_is_refused_before_any_session(uams: list[bytes], login: str, refusal: str) -> None:
    from workbench.protocols.afp import AfpPythonClient
    from workbench.protocols.base import ClientOptions
    from workbench.shared.credentials import Credentials
    from workbench.shared.errors import AuthError
    from workbench.shared.target import Target

    server = StatusOnlyServer(uams)
    try:
        target = Target("127.0.0.1", Credentials("bob", "pw"), ports={"afp": server.port}, share="v")
        client = AfpPythonClient(target, ClientOptions(afp_login=login))
        with pytest.raises(AuthError, match=refusal) as caught:
            client.connect()
        client.close()
    finally:
        server.close()
    assert server.commands == [3]  # the status asked for, no session opened, no login sent
    assert caught.value.exit_code == 4 and "pw" not in caught.value.one_line().replace("password", "")
