"""Confinement of workbench's afpd (workbench/server/daemons/afpd.py): an authenticated AFP client is hostile.

The client logs in as the served user (workbench's own AFP client does the DSI session and the DHX2 login),
then sends raw AFP requests that try to leave the volume or make what a file server must never make: reads
and writes through a link in the volume that points out of it, a link made by the client itself (a file of
Finder type 'slnk', as the Mac makes one), `..` and AFP's own "go to the parent" (consecutive NULs) in
paths, the parent of the volume's root by its directory ID, names with '/', ':' and bad UTF-8, AppleDouble
'._' files that are links out, resource forks and extended attributes through links, UNIX modes with
setuid, setgid, sticky, FIFO or device bits, renames, moves and copies through a link. Every attack runs on a
fresh volume; after each, nothing outside the volume changed (bytes, modes, extended attributes), no reply
carried the secret outside, and the volume holds no link pointing out, no device, FIFO or socket, and no
setuid, setgid or world-writable entry.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import afp_fixtures
from tests.afp_fixtures import AfpdRunner, AfpServed
from workbench.protocols import afp_wire as wire
from workbench.protocols.afp import AfpPythonClient
from workbench.protocols.afp_dsi import COMMAND, WRITE, DsiConnection
from workbench.server.daemons.afpd import Afpd

SECRET = b"SECRET-OUTSIDE-THE-VOLUME " * 64
SECRET_XATTR = b"outside-xattr-value"
MARKER = b"written-by-the-attacker"

FP_COPY_FILE = 5
FP_MOVE_AND_RENAME = 23
FP_OPEN_FORK = 26
FP_RENAME = 28
FP_SET_FILE_PARMS = 30
FP_SET_FORK_PARMS = 31
FP_SET_FILE_DIR_PARMS = 35
FP_GET_EXT_ATTR = 69
FP_SET_EXT_ATTR = 70
FP_LIST_EXT_ATTRS = 72
RESOURCE_FORK = 0x80
FINDER_INFO = 0x0020
UNIX_PRIVS = 0x8000
PARENT_OF_ROOT = 1


@pytest.fixture(scope="module")
def afpd_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfpdRunner]:
    yield from afp_fixtures.running(tmp_path_factory)


@pytest.fixture
def afpd(afpd_runner: AfpdRunner) -> AfpServed:
    return afp_fixtures.served(afpd_runner)


# --- raw requests --------------------------------------------------------------------------------------------


def raw_path(*names: bytes) -> bytes:
    """An AFP UTF-8 pathname of raw name bytes (nothing checked: '..', '/', NULs and bad UTF-8 go as given)."""
    joined = b"\0".join(names)
    return struct.pack(">BIH", 3, 0x08000103, len(joined)) + joined


def _even(data: bytes) -> bytes:
    return data + b"\0" if len(data) % 2 else data


@dataclass
class Session:
    conn: DsiConnection
    vol: int
    replies: list[bytes]

    def call(self, payload: bytes) -> int:
        reply = self.conn.request(COMMAND, payload)
        self.replies.append(reply.data)
        return reply.code

    def open_fork(self, path: bytes, write: bool, resource: bool = False, dir_id: int = wire.ROOT_DIR_ID) -> int:
        access = wire.FORK_READ | (wire.FORK_WRITE if write else 0)
        flag = RESOURCE_FORK if resource else 0
        payload = struct.pack(">BBHIHH", FP_OPEN_FORK, flag, self.vol, dir_id, 0, access) + path
        reply = self.conn.request(COMMAND, payload)
        self.replies.append(reply.data)
        return struct.unpack_from(">H", reply.data, 2)[0] if reply.code == 0 and len(reply.data) >= 4 else 0

    def read(self, path: bytes, resource: bool = False, dir_id: int = wire.ROOT_DIR_ID) -> None:
        fork = self.open_fork(path, write=False, resource=resource, dir_id=dir_id)
        if fork:
            self.call(wire.read_ext(fork, 0, 1 << 16))
            self.call(wire.close_fork(fork))

    def write(self, path: bytes, resource: bool = False, data: bytes = MARKER) -> None:
        fork = self.open_fork(path, write=True, resource=resource)
        if fork:
            reply = self.conn.read_reply(self.conn.send_request(WRITE, wire.write_ext(fork, 0, len(data)), data))
            self.replies.append(reply.data)
            self.call(struct.pack(">BBHHq", FP_SET_FORK_PARMS, 0, fork, wire.FILE_BIT_EXT_DATA_FORK_LEN, 0))
            self.call(wire.close_fork(fork))

    def create_file(self, path: bytes, dir_id: int = wire.ROOT_DIR_ID) -> int:
        return self.call(struct.pack(">BBHI", wire.FP_CREATE_FILE, wire.CREATE_HARD, self.vol, dir_id) + path)

    def create_dir(self, path: bytes, dir_id: int = wire.ROOT_DIR_ID) -> int:
        return self.call(struct.pack(">BBHI", wire.FP_CREATE_DIR, 0, self.vol, dir_id) + path)

    def delete(self, path: bytes, dir_id: int = wire.ROOT_DIR_ID) -> int:
        return self.call(struct.pack(">BBHI", wire.FP_DELETE, 0, self.vol, dir_id) + path)

    def stat(self, path: bytes, dir_id: int = wire.ROOT_DIR_ID) -> int:
        bits = wire.file_bitmap(True)
        head = struct.pack(">BBHIHH", wire.FP_GET_FILE_DIR_PARMS, 0, self.vol, dir_id, bits, wire.dir_bitmap(True))
        return self.call(head + path)

    def set_finder_type(self, path: bytes, kind: bytes, creator: bytes) -> int:
        head = struct.pack(">BBHIH", FP_SET_FILE_PARMS, 0, self.vol, wire.ROOT_DIR_ID, FINDER_INFO)
        return self.call(_even(head + path) + (kind + creator).ljust(32, b"\0"))

    def set_mode(self, path: bytes, mode: int, command: int = FP_SET_FILE_PARMS) -> int:
        head = struct.pack(">BBHIH", command, 0, self.vol, wire.ROOT_DIR_ID, UNIX_PRIVS)
        return self.call(_even(head + path) + struct.pack(">IIII", 0, 0, mode, 0))

    def set_xattr(self, path: bytes, name: bytes, value: bytes = MARKER, nofollow: bool = False) -> int:
        head = struct.pack(">BBHIHq", FP_SET_EXT_ATTR, 0, self.vol, wire.ROOT_DIR_ID, 1 if nofollow else 0, 0)
        return self.call(
            _even(head + path) + struct.pack(">H", len(name)) + name + struct.pack(">I", len(value)) + value
        )

    def get_xattr(self, path: bytes, name: bytes) -> int:
        head = struct.pack(">BBHIHqqI", FP_GET_EXT_ATTR, 0, self.vol, wire.ROOT_DIR_ID, 0, 0, 4096, 4096)
        return self.call(_even(head + path) + struct.pack(">H", len(name)) + name)

    def list_xattrs(self, path: bytes) -> int:
        head = struct.pack(">BBHIHHII", FP_LIST_EXT_ATTRS, 0, self.vol, wire.ROOT_DIR_ID, 0, 0, 0, 4096)
        return self.call(head + path)

    def rename(self, path: bytes, new: bytes) -> int:
        return self.call(struct.pack(">BBHI", FP_RENAME, 0, self.vol, wire.ROOT_DIR_ID) + path + raw_path(new))

    def move(self, path: bytes, dest_dir: bytes, new: bytes) -> int:
        head = struct.pack(">BBHII", FP_MOVE_AND_RENAME, 0, self.vol, wire.ROOT_DIR_ID, wire.ROOT_DIR_ID)
        return self.call(head + path + dest_dir + raw_path(new))

    def copy(self, path: bytes, dest_dir: bytes, new: bytes) -> int:
        head = struct.pack(">BBHIHI", FP_COPY_FILE, 0, self.vol, wire.ROOT_DIR_ID, self.vol, wire.ROOT_DIR_ID)
        return self.call(head + path + dest_dir + raw_path(new))


# --- the volume and the world outside it -----------------------------------------------------------------------


@dataclass
class World:
    root: Path  # the served volume
    outside: Path  # a folder beside it, which no attack may touch

    @property
    def secret(self) -> Path:
        return self.outside / "secret.bin"


def _world(afpd: AfpServed, tmp_path: Path) -> World:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    secret = outside / "secret.bin"
    secret.write_bytes(SECRET)
    secret.chmod(0o644)
    os.setxattr(secret, "user.secret", SECRET_XATTR)
    root = afpd.root
    (root / "victim").write_bytes(b"victim data")
    (root / "dir").mkdir()
    (root / "out-file").symlink_to(secret)
    (root / "out-dir").symlink_to(outside)
    (root / "._victim").symlink_to(secret)  # an AppleDouble name that is a link out (made by another protocol)
    (root / "dir" / "up").symlink_to("../../outside")
    return World(root, outside)


def _outside_state(outside: Path) -> dict[str, tuple[int, int, bytes, tuple[tuple[str, bytes], ...]]]:
    found = {}
    for path in sorted([outside, *outside.rglob("*")]):
        st = os.lstat(path)
        data = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
        attrs = tuple(
            sorted((a, os.getxattr(path, a, follow_symlinks=False)) for a in os.listxattr(path, follow_symlinks=False))
        )
        found[str(path.relative_to(outside))] = (st.st_mode, st.st_uid, data, attrs)
    return found


def _volume_problems(world: World) -> list[str]:
    """Whatever in the volume a confined server must never leave: links out, special files, unsafe modes."""
    problems = []
    # The links out that _world planted may be renamed (afpd moves a file's '._' companion with it), never
    # multiplied or made anew.
    planted = sorted([str(world.secret), str(world.outside), str(world.secret), "../../outside"])
    links_out = []
    for path in world.root.rglob("*"):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            target = (path.parent / os.readlink(path)).resolve()
            if not target.is_relative_to(world.root.resolve()):
                links_out.append(os.readlink(path))
        elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            problems.append(f"{path.relative_to(world.root)}: special file (mode {st.st_mode:o})")
        elif st.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWOTH):
            problems.append(f"{path.relative_to(world.root)}: mode {stat.S_IMODE(st.st_mode):o}")
    left = list(planted)
    for target in links_out:
        if target in left:
            left.remove(target)
        else:
            problems.append(f"a link out made in the volume, to {target}")
    return problems


# --- the attacks -----------------------------------------------------------------------------------------------

Attack = Callable[[Session, World], None]


def read_through_file_link(s: Session, w: World) -> None:
    s.read(raw_path(b"out-file"))


def write_through_file_link(s: Session, w: World) -> None:
    s.write(raw_path(b"out-file"))


def hard_create_over_file_link(s: Session, w: World) -> None:
    s.create_file(raw_path(b"out-file"))
    s.write(raw_path(b"out-file"))


def read_through_dir_link(s: Session, w: World) -> None:
    s.stat(raw_path(b"out-dir", b"secret.bin"))
    s.read(raw_path(b"out-dir", b"secret.bin"))
    s.read(raw_path(b"dir", b"up", b"secret.bin"))


def write_through_dir_link(s: Session, w: World) -> None:
    s.create_file(raw_path(b"out-dir", b"new.bin"))
    s.write(raw_path(b"out-dir", b"secret.bin"))
    s.create_dir(raw_path(b"out-dir", b"newdir"))
    s.delete(raw_path(b"out-dir", b"secret.bin"))
    s.delete(raw_path(b"dir", b"up", b"secret.bin"))


def dot_dot_names(s: Session, w: World) -> None:
    up = (b"..",) * 8
    s.stat(raw_path(*up, *(part.encode() for part in w.secret.parts[1:])))
    s.read(raw_path(b"..", b"outside", b"secret.bin"))
    s.create_file(raw_path(b"..", b"outside", b"dotdot.bin"))
    s.write(raw_path(b"..", b"outside", b"secret.bin"))
    s.create_dir(raw_path(b"dir", b"..", b"..", b"outside", b"made"))


def afp_parent_steps(s: Session, w: World) -> None:
    """AFP's own way up: an empty name between two separators means the parent directory."""
    ups = [b""] * 6
    s.read(raw_path(b"dir", *ups, b"outside", b"secret.bin"))
    s.create_file(raw_path(*ups, b"outside", b"nul-up.bin"))
    s.write(raw_path(b"", b"", b"outside", b"secret.bin"))


def parent_of_the_root_by_id(s: Session, w: World) -> None:
    s.stat(raw_path(b"outside"), dir_id=PARENT_OF_ROOT)
    s.read(raw_path(b"outside", b"secret.bin"), dir_id=PARENT_OF_ROOT)
    s.create_file(raw_path(b"outside", b"by-id.bin"), dir_id=PARENT_OF_ROOT)
    s.create_dir(raw_path(b"by-id"), dir_id=PARENT_OF_ROOT)


def slashes_colons_and_bad_utf8(s: Session, w: World) -> None:
    for name in (b"../outside/slash.bin", b"a/b", b"..:outside:colon.bin", b":", b"/", b"\xff\xfe..", b"\xc0\xaf.."):
        s.create_file(raw_path(name))
        s.write(raw_path(name))
        s.create_dir(raw_path(name + b"-d"))


def client_made_symlink(s: Session, w: World) -> None:
    """As a Mac makes a link on an AFP volume: a file of Finder type 'slnk' (creator 'rhap') holding the target."""
    for name, target in ((b"made-link", bytes(w.secret)), (b"made-rel", b"../outside/secret.bin")):
        s.create_file(raw_path(name))
        s.write(raw_path(name), data=target)
        s.set_finder_type(raw_path(name), b"slnk", b"rhap")
        s.read(raw_path(name))
        s.write(raw_path(name))


def appledouble_link_out(s: Session, w: World) -> None:
    s.read(raw_path(b"._victim"))
    s.write(raw_path(b"._victim"))
    s.read(raw_path(b"victim"), resource=True)
    s.write(raw_path(b"victim"), resource=True)
    s.set_finder_type(raw_path(b"victim"), b"TEXT", b"ttxt")


def appledouble_file_made_by_client(s: Session, w: World) -> None:
    """A '._' file written by the client: an AppleDouble header whose entries point past its end."""
    header = struct.pack(">IIII", 0x00051607, 0x00020000, 0, 0).ljust(24, b"\0") + struct.pack(">H", 2)
    header += struct.pack(">III", 2, 0x7FFFFF00, 0x100) + struct.pack(">III", 9, 0, 32)
    s.create_file(raw_path(b"._made"))
    s.write(raw_path(b"._made"), data=header)
    s.create_file(raw_path(b"made"))
    s.read(raw_path(b"made"), resource=True)
    s.write(raw_path(b"made"), resource=True)


def resource_forks_through_links(s: Session, w: World) -> None:
    s.read(raw_path(b"out-file"), resource=True)
    s.write(raw_path(b"out-file"), resource=True)
    s.read(raw_path(b"out-dir", b"secret.bin"), resource=True)
    s.write(raw_path(b"out-dir", b"secret.bin"), resource=True)


def extended_attributes_through_links(s: Session, w: World) -> None:
    for path in (raw_path(b"out-file"), raw_path(b"out-dir", b"secret.bin"), raw_path(b"out-dir")):
        s.get_xattr(path, b"user.secret")
        s.get_xattr(path, b"secret")
        s.list_xattrs(path)
        s.set_xattr(path, b"user.evil")
        s.set_xattr(path, b"evil", nofollow=True)


def extended_attribute_names(s: Session, w: World) -> None:
    for name in (b"security.capability", b"trusted.x", b"system.posix_acl_access", b"../x", b"user.\xff", b"a" * 300):
        s.set_xattr(raw_path(b"victim"), name, value=b"\x01\x00\x00\x02" + b"\xff" * 16)
        s.get_xattr(raw_path(b"victim"), name)


def unix_modes(s: Session, w: World) -> None:
    for mode in (0o104755, 0o102755, 0o101777, 0o010644, 0o020644, 0o060644, 0o140644, 0o120777, 0o100666):
        s.set_mode(raw_path(b"victim"), mode)
        s.set_mode(raw_path(b"victim"), mode, FP_SET_FILE_DIR_PARMS)
    for mode in (0o46777, 0o41777, 0o40777):
        s.set_mode(raw_path(b"dir"), mode, FP_SET_FILE_DIR_PARMS)
    s.set_mode(raw_path(b"out-file"), 0o104777)
    s.set_mode(raw_path(b"out-dir"), 0o40777, FP_SET_FILE_DIR_PARMS)


def renames_moves_and_copies(s: Session, w: World) -> None:
    s.rename(raw_path(b"victim"), b"../outside/renamed.bin")
    s.move(raw_path(b"victim"), raw_path(b"out-dir"), b"moved.bin")
    s.move(raw_path(b"victim"), raw_path(b"dir", b"up"), b"moved2.bin")
    s.move(raw_path(b"out-file"), raw_path(b"dir"), b"moved-link")
    s.copy(raw_path(b"victim"), raw_path(b"out-dir"), b"copied.bin")
    s.copy(raw_path(b"out-file"), raw_path(b"dir"), b"copied-secret.bin")
    s.read(raw_path(b"dir", b"copied-secret.bin"))
    s.copy(raw_path(b"out-dir", b"secret.bin"), raw_path(b"dir"), b"copied-secret2.bin")
    s.read(raw_path(b"dir", b"copied-secret2.bin"))


def delete_links_and_what_they_point_to(s: Session, w: World) -> None:
    s.delete(raw_path(b"out-dir", b"sub"))
    s.delete(raw_path(b"out-dir"))
    s.delete(raw_path(b"out-file"))
    s.delete(raw_path(b"._victim"))


ATTACKS: list[Attack] = [
    read_through_file_link,
    write_through_file_link,
    hard_create_over_file_link,
    read_through_dir_link,
    write_through_dir_link,
    dot_dot_names,
    afp_parent_steps,
    parent_of_the_root_by_id,
    slashes_colons_and_bad_utf8,
    client_made_symlink,
    appledouble_link_out,
    appledouble_file_made_by_client,
    resource_forks_through_links,
    extended_attributes_through_links,
    extended_attribute_names,
    unix_modes,
    renames_moves_and_copies,
    delete_links_and_what_they_point_to,
]


def test_there_are_eighteen_attacks() -> None:
    assert len(ATTACKS) == 18


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.__name__)
def test_an_authenticated_client_cannot_leave_the_volume(afpd: AfpServed, tmp_path: Path, attack: Attack) -> None:
    world = _world(afpd, tmp_path)
    before = _outside_state(world.outside)
    client = AfpPythonClient(afpd.target)
    client.connect()
    try:
        assert client._conn is not None and client._vol is not None
        session = Session(client._conn, client._vol.vol_id, [])
        attack(session, world)
        assert session.replies, "the attack sent nothing"
    finally:
        client.close()
    assert _outside_state(world.outside) == before
    leaked = [r for r in session.replies if SECRET[:26] in r or SECRET_XATTR in r]
    assert not leaked, f"a reply carried what lies outside the volume: {leaked[0][:80]!r}"
    assert _volume_problems(world) == []
    assert afpd.runner.server.proc is not None and afpd.runner.server.proc.poll() is None, "afpd died"


class _LooseAfpd(Afpd):
    """workbench's afpd with AFP3 UNIX privileges and symlinks followed: what the checks above must catch."""

    name = "afpd-loose"

    def config_text(self) -> str:
        text = super().config_text()
        return text.replace("follow symlinks = no", "follow symlinks = yes").replace(
            "unix priv = no", "unix priv = yes"
        )


@pytest.mark.parametrize("attack", [unix_modes, client_made_symlink], ids=lambda a: a.__name__)
def test_the_checks_catch_a_loosely_configured_afpd(tmp_path: Path, attack: Attack) -> None:
    runner = AfpdRunner(tmp_path / "loose")
    runner.server = _LooseAfpd(runner.ctx)
    try:
        loose = afp_fixtures.served(runner)
        world = _world(loose, tmp_path)
        with AfpPythonClient(loose.target) as client:
            assert client._conn is not None and client._vol is not None
            attack(Session(client._conn, client._vol.vol_id, []), world)
        problems = _volume_problems(world)
    finally:
        runner.stop()
    assert any("mode" in p for p in problems), problems
