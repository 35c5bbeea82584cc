"""AFP 3.x requests and replies as bytes: the commands workbench's AFP client sends, and the replies it reads.

Pure functions, no sockets: each builder returns one AFP request (the payload of a DSICommand or DSIWrite),
each parser takes a reply's data and raises ValueError when it does not hold what its bitmap promises. All
integers are big-endian. Names travel as UTF-8 (AFP 3's path type 3, "AFPUTF8Name"); a path is its names
joined by a NUL byte, relative to a directory given by its ID (2 is the volume's root). An empty name would
mean "the parent" to the server, so builders refuse empty names, "." and "..". The client addresses everything
from the root by its whole path: a directory ID other than the root's may not outlive a change to that
directory (netatalk's "last" CNID scheme forgets it), a path always resolves.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# --- command codes ---------------------------------------------------------------------------------------------
FP_CLOSE_FORK = 4
FP_CREATE_DIR = 6
FP_CREATE_FILE = 7
FP_DELETE = 8
FP_LOGIN = 18
FP_LOGIN_CONT = 19
FP_LOGOUT = 20
FP_OPEN_VOL = 24
FP_OPEN_FORK = 26
FP_GET_FILE_DIR_PARMS = 34
FP_READ_EXT = 60
FP_WRITE_EXT = 61
FP_LOGIN_EXT = 63
FP_ENUMERATE_EXT2 = 68

# --- result codes (the DSI header's error code, signed) ---------------------------------------------------------
AFP_OK = 0
RESULT_NAMES: dict[int, str] = {
    -5000: "access denied",
    -5001: "authentication continues",
    -5002: "unknown login method (UAM)",
    -5003: "unsupported AFP version",
    -5004: "bitmap not supported",
    -5005: "cannot move",
    -5006: "deny conflict",
    -5007: "directory not empty",
    -5008: "disk full",
    -5009: "end of file",
    -5010: "file busy",
    -5011: "flat volume",
    -5012: "item not found",
    -5013: "lock error",
    -5014: "miscellaneous error",
    -5015: "no more locks",
    -5016: "no server",
    -5017: "object exists",
    -5018: "object not found",
    -5019: "parameter error",
    -5020: "range not locked",
    -5021: "range overlap",
    -5022: "session closed",
    -5023: "user not authenticated",
    -5024: "call not supported",
    -5025: "object of the wrong type",
    -5026: "too many files open",
    -5027: "server going down",
    -5028: "cannot rename",
    -5029: "directory not found",
    -5030: "icon type error",
    -5031: "volume locked",
    -5032: "object locked",
    -5042: "password expired",
    -5045: "password needs to be changed",
    -5047: "disk quota exceeded or user already logged on",
}
ERR_ACCESS = -5000
ERR_AUTH_CONTINUE = -5001
ERR_BAD_UAM = -5002
ERR_DIR_NOT_EMPTY = -5007
ERR_DISK_FULL = -5008
ERR_EOF = -5009
ERR_FILE_BUSY = -5010
ERR_OBJECT_EXISTS = -5017
ERR_OBJECT_NOT_FOUND = -5018
ERR_PARAM = -5019
ERR_USER_NOT_AUTH = -5023
ERR_DIR_NOT_FOUND = -5029
ERR_VOLUME_LOCKED = -5031
ERR_OBJECT_LOCKED = -5032
ERR_PASSWORD_EXPIRED = -5042

# --- bitmaps ---------------------------------------------------------------------------------------------------
VOL_BIT_ATTRIBUTES = 0x0001
VOL_BIT_ID = 0x0020
VOL_ATTR_FILE_IDS = 0x0004  # kSupportsFileIDs: an object keeps its ID (netatalk's "last" CNID scheme does not)
VOL_ATTR_UNIX_PRIVS = 0x0020  # kSupportsUnixPrivs: the UNIX privileges bit (and so st_mode) is available

FILE_BIT_FINDER_INFO = 0x0020  # 32 bytes: type, creator, ...
FILE_BIT_NODE_ID = 0x0100  # the file's CNID
FILE_BIT_EXT_DATA_FORK_LEN = 0x0800  # 8 bytes
FILE_BIT_UTF8_NAME = 0x2000  # an offset (2 bytes) and a text-encoding hint (4 bytes)
FILE_BIT_UNIX_PRIVS = 0x8000  # uid, gid, mode, access rights: 16 bytes
DIR_BIT_NODE_ID = 0x0100  # the directory's ID
DIR_BIT_UTF8_NAME = 0x2000
DIR_BIT_UNIX_PRIVS = 0x8000

# Fixed sizes of the parameters a bitmap bit brings (bit number: bytes), in the order the server writes them.
# Only the bits this client asks for: a reply with another bit set is refused rather than misread.
_FILE_FIELD_BYTES = {5: 32, 8: 4, 11: 8, 13: 6, 15: 16}
_DIR_FIELD_BYTES = {8: 4, 13: 6, 15: 16}

FORK_READ = 0x0001
FORK_WRITE = 0x0002
FORK_DENY_WRITE = 0x0020
CREATE_HARD = 0x80  # FPCreateFile: replace an existing file (its data is gone)
IS_DIR_FLAG = 0x80  # the file/dir flag byte of a parameter reply

ROOT_DIR_ID = 2  # the volume's root directory
TEXT_ENCODING_UTF8 = 0x08000103  # kTextEncodingUTF8, the hint Mac clients send with a UTF-8 path
PATH_TYPE_UTF8 = 3
S_IFMT = 0o170000
S_IFLNK = 0o120000
S_IFDIR = 0o040000
SYMLINK_TYPE = b"slnk"  # Finder type netatalk (and macOS) give a symbolic link shown as a file
CLEARTEXT_PASSWORD_BYTES = 8  # the Cleartxt Passwrd login carries the password in a field of 8 bytes

AFP_LOGINS = ("secure", "cleartext", "guest")  # ClientOptions.afp_login's values: DHX2, Cleartxt Passwrd, guest
UAM_DHX2 = "DHX2"
UAM_CLEARTEXT = "Cleartxt Passwrd"
UAM_GUEST = "No User Authent"
# Newest first: the client speaks the first of these the server lists.
AFP_VERSIONS = ("AFP3.4", "AFP3.3", "AFP3.2", "AFP3.1", "AFPX03")


def result_name(code: int) -> str:
    """'object not found (-5018)' for a result code."""
    return f"{RESULT_NAMES.get(code, 'error')} ({code})"


def pascal(text: bytes) -> bytes:
    if len(text) > 255:
        raise ValueError("a Pascal string holds at most 255 bytes")
    return bytes([len(text)]) + text


def check_name(name: str) -> str:
    """A name the path builders accept: one directory entry, never its parent or itself."""
    if not name or name in (".", "..") or "\0" in name or "/" in name:
        raise ValueError(f"{name!r} is not a plain name")
    return name


def utf8_path(names: list[str] | tuple[str, ...]) -> bytes:
    """AFP pathname of type 3: hint, length and the names joined by NUL (no names: the directory itself)."""
    encoded = b"\0".join(check_name(n).encode("utf-8") for n in names)
    if len(encoded) > 0xFFFF:
        raise ValueError("path longer than 65535 bytes")
    return struct.pack(">BIH", PATH_TYPE_UTF8, TEXT_ENCODING_UTF8, len(encoded)) + encoded


def split_path(remote: str) -> list[str]:
    """A POSIX path relative to the volume as the names of utf8_path (ValueError on '.', '..' or empty names)."""
    stripped = remote.strip("/")
    return [check_name(n) for n in stripped.split("/")] if stripped else []


def _even(request: bytes) -> bytes:
    """Pad to an even length: AFP aligns the field after a variable-length one on a 2-byte boundary."""
    return request + b"\0" if len(request) % 2 else request


# --- requests --------------------------------------------------------------------------------------------------


def login_ext(version: str, uam: str, user: str, auth: bytes = b"") -> bytes:
    """FPLoginExt: flags 0, the AFP version and UAM, the user name in UTF-8, an empty directory-service path,
    then (2-byte aligned) the UAM's own first data."""
    name = user.encode("utf-8")
    head = struct.pack(">BBH", FP_LOGIN_EXT, 0, 0) + pascal(version.encode()) + pascal(uam.encode())
    head += struct.pack(">BH", PATH_TYPE_UTF8, len(name)) + name + struct.pack(">BH", PATH_TYPE_UTF8, 0)
    return _even(head) + auth if auth else head


def login_guest(version: str) -> bytes:
    """FPLogin with 'No User Authent': no user, no password."""
    return bytes([FP_LOGIN]) + pascal(version.encode()) + pascal(UAM_GUEST.encode())


def login_cont(data: bytes) -> bytes:
    """FPLoginCont: a pad byte, then the UAM's data (which starts with its session ID)."""
    return struct.pack(">BB", FP_LOGIN_CONT, 0) + data


def cleartext_password(password: str) -> bytes:
    """The 8-byte password field of 'Cleartxt Passwrd' (ValueError when the password does not fit)."""
    raw = password.encode("utf-8")
    if len(raw) > CLEARTEXT_PASSWORD_BYTES:
        raise ValueError(f"the cleartext login carries at most {CLEARTEXT_PASSWORD_BYTES} bytes of password")
    return raw.ljust(CLEARTEXT_PASSWORD_BYTES, b"\0")


def logout() -> bytes:
    return struct.pack(">BB", FP_LOGOUT, 0)


def open_vol(name: str, bitmap: int = VOL_BIT_ATTRIBUTES | VOL_BIT_ID) -> bytes:
    return struct.pack(">BBH", FP_OPEN_VOL, 0, bitmap) + pascal(name.encode("utf-8"))


def get_file_dir_parms(vol_id: int, dir_id: int, file_bitmap: int, dir_bitmap: int, names: list[str]) -> bytes:
    head = struct.pack(">BBHIHH", FP_GET_FILE_DIR_PARMS, 0, vol_id, dir_id, file_bitmap, dir_bitmap)
    return head + utf8_path(names)


def enumerate_ext2(
    vol_id: int,
    dir_id: int,
    file_bitmap: int,
    dir_bitmap: int,
    count: int,
    start_index: int,
    max_reply_bytes: int,
    names: list[str],
) -> bytes:
    """FPEnumerateExt2 of the directory at `names` beneath `dir_id`: `count` entries from `start_index` (1-based)."""
    head = struct.pack(
        ">BBHIHHHII", FP_ENUMERATE_EXT2, 0, vol_id, dir_id, file_bitmap, dir_bitmap, count, start_index, max_reply_bytes
    )
    return head + utf8_path(names)


def create_dir(vol_id: int, dir_id: int, names: list[str]) -> bytes:
    return struct.pack(">BBHI", FP_CREATE_DIR, 0, vol_id, dir_id) + utf8_path(names)


def create_file(vol_id: int, dir_id: int, names: list[str], hard: bool = True) -> bytes:
    flag = CREATE_HARD if hard else 0
    return struct.pack(">BBHI", FP_CREATE_FILE, flag, vol_id, dir_id) + utf8_path(names)


def delete(vol_id: int, dir_id: int, names: list[str]) -> bytes:
    return struct.pack(">BBHI", FP_DELETE, 0, vol_id, dir_id) + utf8_path(names)


def open_fork(
    vol_id: int, dir_id: int, names: list[str], access: int, bitmap: int = FILE_BIT_EXT_DATA_FORK_LEN
) -> bytes:
    """FPOpenFork of the data fork of the file at `names` beneath `dir_id`."""
    return struct.pack(">BBHIHH", FP_OPEN_FORK, 0, vol_id, dir_id, bitmap, access) + utf8_path(names)


def close_fork(fork: int) -> bytes:
    return struct.pack(">BBH", FP_CLOSE_FORK, 0, fork)


def read_ext(fork: int, offset: int, count: int) -> bytes:
    return struct.pack(">BBHqq", FP_READ_EXT, 0, fork, offset, count)


def write_ext(fork: int, offset: int, count: int) -> bytes:
    """FPWriteExt's header (from the start of the fork); the data follows it in the same DSIWrite."""
    return struct.pack(">BBHqq", FP_WRITE_EXT, 0, fork, offset, count)


# --- replies ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerInfo:
    """What FPGetSrvrInfo (DSIGetStatus) says: the server's name, AFP versions and login methods."""

    name: str
    versions: tuple[str, ...]
    uams: tuple[str, ...]
    flags: int


def _pascal_at(data: bytes, offset: int) -> tuple[str, int]:
    if offset >= len(data):
        raise ValueError("string past the end of the reply")
    length = data[offset]
    end = offset + 1 + length
    if end > len(data):
        raise ValueError("string past the end of the reply")
    return data[offset + 1 : end].decode("utf-8", "replace"), end


def _pascal_list(data: bytes, offset: int) -> tuple[str, ...]:
    if offset >= len(data):
        raise ValueError("list past the end of the reply")
    items = []
    at = offset + 1
    for _ in range(data[offset]):
        item, at = _pascal_at(data, at)
        items.append(item)
    return tuple(items)


def parse_server_info(data: bytes) -> ServerInfo:
    if len(data) < 11:
        raise ValueError("server information shorter than its fixed part")
    _machine, versions_at, uams_at, _icon, flags = struct.unpack_from(">HHHHH", data)
    name, _ = _pascal_at(data, 10)
    return ServerInfo(name, _pascal_list(data, versions_at), _pascal_list(data, uams_at), flags)


def choose_version(offered: tuple[str, ...]) -> str | None:
    return next((v for v in AFP_VERSIONS if v in offered), None)


@dataclass(frozen=True)
class Volume:
    vol_id: int
    attributes: int


def parse_open_vol(data: bytes) -> Volume:
    if len(data) < 6:
        raise ValueError("FPOpenVol reply shorter than its parameters")
    bitmap, attributes, vol_id = struct.unpack_from(">HHH", data)
    if bitmap != VOL_BIT_ATTRIBUTES | VOL_BIT_ID:
        raise ValueError(f"FPOpenVol reply with bitmap 0x{bitmap:04x}")
    return Volume(vol_id, attributes)


@dataclass(frozen=True)
class Entry:
    """One file or directory as the server describes it."""

    name: str
    is_dir: bool
    node_id: int
    size: int | None = None  # a file's data fork
    finder_type: bytes | None = None  # a file's Finder type ('slnk': a symbolic link)
    mode: int | None = None  # st_mode, where the volume gives UNIX privileges

    @property
    def is_link(self) -> bool:
        """A symbolic link, as the server shows one: Finder type 'slnk' or a mode of S_IFLNK."""
        if self.finder_type == SYMLINK_TYPE:
            return True
        return self.mode is not None and (self.mode & S_IFMT) == S_IFLNK

    @property
    def is_real_dir(self) -> bool:
        """A directory and nothing says it is a link (its mode, where given, a directory's)."""
        return self.is_dir and not self.is_link and (self.mode is None or (self.mode & S_IFMT) == S_IFDIR)


def file_bitmap(unix_privs: bool) -> int:
    bits = FILE_BIT_FINDER_INFO | FILE_BIT_NODE_ID | FILE_BIT_EXT_DATA_FORK_LEN | FILE_BIT_UTF8_NAME
    return bits | FILE_BIT_UNIX_PRIVS if unix_privs else bits


def dir_bitmap(unix_privs: bool) -> int:
    bits = DIR_BIT_NODE_ID | DIR_BIT_UTF8_NAME
    return bits | DIR_BIT_UNIX_PRIVS if unix_privs else bits


def parse_params(params: bytes, bitmap: int, is_dir: bool) -> Entry:
    """The parameters of one file or directory for `bitmap` (a name offset counts from the start of `params`)."""
    sizes = _DIR_FIELD_BYTES if is_dir else _FILE_FIELD_BYTES
    values: dict[int, bytes] = {}
    at = 0
    for bit in range(16):
        if not bitmap & (1 << bit):
            continue
        if bit not in sizes:
            raise ValueError(f"parameter bit {bit} is not one this client reads")
        end = at + sizes[bit]
        if end > len(params):
            raise ValueError("parameters shorter than their bitmap")
        values[bit] = params[at:end]
        at = end
    name = ""
    if 13 in values:
        (name_at,) = struct.unpack_from(">H", values[13])
        if name_at + 6 > len(params):
            raise ValueError("name past the end of the parameters")
        (length,) = struct.unpack_from(">H", params, name_at + 4)
        if name_at + 6 + length > len(params):
            raise ValueError("name past the end of the parameters")
        name = params[name_at + 6 : name_at + 6 + length].decode("utf-8", "surrogateescape")
    return Entry(
        name=name,
        is_dir=is_dir,
        node_id=struct.unpack(">I", values[8])[0] if 8 in values else 0,
        size=struct.unpack(">Q", values[11])[0] if 11 in values else None,
        finder_type=values[5][:4] if 5 in values else None,
        mode=struct.unpack_from(">I", values[15], 8)[0] if 15 in values else None,
    )


def parse_file_dir_parms(data: bytes) -> Entry:
    """FPGetFileDirParms' reply: both bitmaps, the file/dir flag, a pad byte, the parameters."""
    if len(data) < 6:
        raise ValueError("FPGetFileDirParms reply shorter than its header")
    fbits, dbits, flag = struct.unpack_from(">HHB", data)
    is_dir = bool(flag & IS_DIR_FLAG)
    return parse_params(data[6:], dbits if is_dir else fbits, is_dir)


def parse_enumerate_ext2(data: bytes) -> list[Entry]:
    """FPEnumerateExt2's reply: bitmaps, a count, then per entry its length (2 bytes, itself included), the
    file/dir flag, a pad byte and its parameters, each entry padded to an even length."""
    if len(data) < 6:
        raise ValueError("FPEnumerateExt2 reply shorter than its header")
    fbits, dbits, count = struct.unpack_from(">HHH", data)
    entries = []
    at = 6
    for _ in range(count):
        if at + 4 > len(data):
            raise ValueError("entry past the end of the reply")
        length, flag = struct.unpack_from(">HB", data, at)
        if length < 4 or at + length > len(data):
            raise ValueError(f"entry of {length} bytes does not fit the reply")
        is_dir = bool(flag & IS_DIR_FLAG)
        entries.append(parse_params(data[at + 4 : at + length], dbits if is_dir else fbits, is_dir))
        at += length
    return entries


def parse_open_fork(data: bytes) -> tuple[int, int | None]:
    """FPOpenFork's reply: (the fork's reference number, the data fork's length when the bitmap asked for it)."""
    if len(data) < 4:
        raise ValueError("FPOpenFork reply shorter than its header")
    bitmap, fork = struct.unpack_from(">HH", data)
    if bitmap == FILE_BIT_EXT_DATA_FORK_LEN and len(data) >= 12:
        return fork, struct.unpack_from(">Q", data, 4)[0]
    return fork, None
