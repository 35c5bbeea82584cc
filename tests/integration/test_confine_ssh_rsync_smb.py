"""Confinement of SFTP, rsync over SSH, the rsync daemon and SMB against the real servers.

Threat model: the client is authenticated and hostile. Every attack below is tried with a real
client (OpenSSH sftp, rsync, smbprotocol sending raw SMB2 requests) against a private server whose
root sits next to a canary directory on the same file system (so hard links could reach it). After
each attack: the canary tree hashes the same, nothing new appears next to the root, the server's
own state files are unchanged, and the root holds no device node, FIFO, socket, setuid/setgid file,
file capability or symlink that leads out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shlex
import shutil
import stat
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from tests.helpers import loopback_context
from workbench.protocols.base import ClientOptions
from workbench.protocols.openssh_sftp import ssh_login, ssh_options
from workbench.server.daemons.base import ManagedServer
from workbench.server.daemons.rsyncd import Rsyncd
from workbench.server.daemons.smbd import Smbd
from workbench.server.daemons.sshd import Sshd
from workbench.shared.target import Target

HOST = "127.0.0.1"
SECRET = b"canary secret: must never be read or changed\n"
MUNGED_PREFIX = "/rsyncd-munged/"
# A file capability (VFS_CAP_REVISION_2, cap_setuid effective): setuid by another name.
CAPABILITY_XATTR = bytes.fromhex("01000002") + bytes.fromhex("80000000") + bytes(12)


def tree_digest(top: Path) -> str:
    """sha256 over every entry's relative name, type, mode, owner, link target and content (no link is followed)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = path.lstat()
            h.update(f"{path.relative_to(top)}\0{st.st_mode:o}\0{st.st_uid}\0{st.st_nlink}\0".encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(path).encode())
            elif stat.S_ISREG(st.st_mode):
                h.update(path.read_bytes())
    return h.hexdigest()


@dataclass
class Far:
    """A private server: root and canary side by side under `base`, the state of the server beside them."""

    base: Path
    root: Path
    canary: Path
    server: ManagedServer
    target: Target
    canary_digest: str = ""
    state_digest: str = ""
    watched_state: list[Path] = field(default_factory=list)  # the server's config, keys and secrets

    def snapshot(self) -> None:
        self.canary_digest = tree_digest(self.canary)
        self.state_digest = self._state()

    def _state(self) -> str:
        return "".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in self.watched_state)

    def check(self, munged_links_allowed: bool = False) -> None:
        """Everything outside the root as it was; nothing dangerous inside it."""
        assert tree_digest(self.canary) == self.canary_digest, "the canary directory outside the root changed"
        assert sorted(os.listdir(self.base)) == ["canary", "root", "state"], "something was written next to the root"
        assert self._state() == self.state_digest, "the server's state files changed"
        assert_root_clean(self.root, munged_links_allowed)


def assert_root_clean(root: Path, munged_links_allowed: bool) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            kind = stat.S_IFMT(st.st_mode)
            assert kind in (stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK), f"{path} is a special file ({kind:o})"
            assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), f"{path} is setuid/setgid ({st.st_mode:o})"
            if kind == stat.S_IFLNK:
                value = os.readlink(path)
                assert munged_links_allowed and value.startswith(MUNGED_PREFIX), f"{path} is a symlink to {value}"
                assert not os.path.exists(path), f"munged symlink {path} resolves"
                continue
            if kind == stat.S_IFREG:
                with pytest.raises(OSError):
                    os.getxattr(path, "security.capability", follow_symlinks=False)


def _make_far(base: Path, service: str, server_class: type[ManagedServer]) -> Far:
    if reason := server_class.unavailable_reason():
        pytest.skip(reason)
    ctx = loopback_context(base, service)
    for sub in ("files", "incoming"):
        (ctx.root / sub).mkdir()
    (ctx.root / "files" / "a.txt").write_bytes(b"served file\n")
    (ctx.root / "incoming" / "a.txt").write_bytes(b"uploaded file\n")
    canary = base / "canary"
    (canary / "sub").mkdir(parents=True)
    (canary / "secret.txt").write_bytes(SECRET)
    (canary / "sub" / "inner.txt").write_bytes(SECRET)
    server = server_class(ctx)
    server.start()
    return Far(base, ctx.root, canary, server, Target(HOST, ctx.credentials, ports=dict(ctx.ports), share=ctx.share))


@contextlib.contextmanager
def planted_links(root: Path) -> Iterator[None]:
    """Symlinks another protocol might have planted: one to the canary's file, one to its directory."""
    canary = root.parent / "canary"
    os.symlink(canary / "secret.txt", root / "incoming" / "planted")
    os.symlink(canary, root / "incoming" / "planted_dir")
    try:
        yield
    finally:
        for name in ("planted", "planted_dir"):
            (root / "incoming" / name).unlink(missing_ok=True)


# --- SFTP (OpenSSH sftp in batch mode: a failed command fails the batch) ------------------------------


@pytest.fixture(scope="module")
def ssh_far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Far]:
    far = _make_far(tmp_path_factory.mktemp("ssh"), "ssh", Sshd)
    try:
        server = far.server
        assert isinstance(server, Sshd)
        creds = replace(far.target.credentials, ssh_key=server.client_key_path, known_hosts=server.known_hosts_path)
        far.target = replace(far.target, credentials=creds)
        far.watched_state = [server.gate_path, server.config_path, server.dir / "authorized_keys"]
        yield far
    finally:
        far.server.stop()


def _sftp(far: Far, command: str) -> subprocess.CompletedProcess[str]:
    port = str(far.target.ports["ssh"])
    argv = ["sftp", "-b", "-", "-P", port, *ssh_options(far.target, ClientOptions()), ssh_login(far.target)]
    return subprocess.run(argv, input=command + "\n", capture_output=True, text=True, timeout=60)


def _sftp_attacks(far: Far, local: Path) -> dict[str, str]:
    canary = far.canary
    state = far.server.dir
    etc_probe = f"/etc/workbench-confine-{secrets.token_hex(4)}"
    return {
        "get ../ (read outside)": f"get ../canary/secret.txt {local}",
        "get absolute canary path": f"get {canary}/secret.txt {local}",
        "get /etc/shadow": f"get /etc/shadow {local}",
        "get the server's private host key": f"get {state}/host_ed25519 {local}",
        "put ../ (write outside)": f"put {local} ../canary/new.txt",
        "put absolute canary path": f"put {local} {canary}/new.txt",
        "put /etc/<new file>": f"put {local} {etc_probe}",
        "put over the server's authorized_keys": f"put {local} {state}/authorized_keys",
        "put over the gate's config": f"put {local} {state}/gate.json",
        "rename a root file out": "rename incoming/a.txt ../canary/moved.txt",
        "mkdir outside": "mkdir ../canary/newdir",
        "rm outside": f"rm {canary}/secret.txt",
        "symlink absolute to the canary": f"symlink {canary}/secret.txt incoming/link-abs",
        "symlink relative ../ to the canary": "symlink ../../canary/secret.txt incoming/link-rel",
        "symlink to a harmless name (symlinks are never created)": "symlink a.txt incoming/link-in",
        "hardlink (hardlink@openssh.com) absolute from outside": f"ln {canary}/secret.txt incoming/hard-abs",
        "hardlink relative ../ from outside": "ln ../canary/sub/inner.txt incoming/hard-rel",
        "hardlink /etc/passwd (readable to the gate)": "ln /etc/passwd incoming/hard-passwd",
        "chmod 4755 a file": "chmod 4755 incoming/a.txt",
        "chmod 2755 a directory": "chmod 2755 incoming",
        "chmod 6777 the root": "chmod 6777 .",
        "get a planted symlink to the canary": f"get incoming/planted {local}",
        "put through a planted symlink to the canary": f"put {local} incoming/planted",
        "put through a planted symlink to the canary's directory": f"put {local} incoming/planted_dir/new.txt",
    }


def test_sftp_attacks_all_fail_and_leave_the_canary(ssh_far: Far, tmp_path: Path) -> None:
    local = tmp_path / "local.bin"
    results: dict[str, str] = {}
    attacks = _sftp_attacks(ssh_far, local)
    for name, command in attacks.items():
        local.write_bytes(b"attacker data\n")
        ssh_far.snapshot()
        with planted_links(ssh_far.root):
            done = _sftp(ssh_far, command)
        results[name] = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        assert done.returncode != 0, f"sftp {command!r} succeeded"
        assert local.read_bytes() != SECRET
        ssh_far.check()
        etc_probe = command.split()[-1]
        if etc_probe.startswith("/etc/workbench-confine-"):
            assert not os.path.lexists(etc_probe)
    assert len(results) == len(attacks)


def test_sftp_put_preserving_a_setuid_mode_stores_no_setuid_file(ssh_far: Far, tmp_path: Path) -> None:
    local = tmp_path / "suid.bin"
    local.write_bytes(b"#!/bin/sh\n")
    local.chmod(0o6755)
    ssh_far.snapshot()
    _sftp(ssh_far, f"put -p {local} incoming/suid.bin")  # refused or stored without the bits: both are fine
    ssh_far.check()
    (ssh_far.root / "incoming" / "suid.bin").unlink(missing_ok=True)


def test_sftp_still_works_inside_the_root(ssh_far: Far, tmp_path: Path) -> None:
    """The attacks above fail for the right reason: the same commands inside the root succeed."""
    local = tmp_path / "ok.bin"
    local.write_bytes(b"fine\n")
    done = _sftp(ssh_far, f"put {local} incoming/ok.bin\nrename incoming/ok.bin files/ok.bin\nchmod 600 files/ok.bin")
    assert done.returncode == 0, done.stderr
    assert (ssh_far.root / "files" / "ok.bin").stat().st_mode & 0o7777 == 0o600
    done = _sftp(ssh_far, "ln files/ok.bin incoming/ok-hard")  # a hard link within the root is allowed
    assert done.returncode == 0, done.stderr
    assert (ssh_far.root / "incoming" / "ok-hard").stat().st_nlink == 2
    for p in ("files/ok.bin", "incoming/ok-hard"):
        (ssh_far.root / p).unlink()



# --- rsync over SSH (rrsync + the gate's Landlock and seccomp) and the rsync daemon --------------------


@pytest.fixture(scope="module")
def rsyncd_far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Far]:
    far = _make_far(tmp_path_factory.mktemp("rsyncd"), "rsync", Rsyncd)
    try:
        server = far.server
        assert isinstance(server, Rsyncd)
        far.watched_state = [server.config_path, server.secrets_path]
        yield far
    finally:
        far.server.stop()


def _attack_sources(far: Far, src: Path) -> None:
    """What a hostile client uploads: specials, links out, setuid and capability files, a copy of the canary."""
    src.mkdir()
    (src / "file.txt").write_bytes(b"attacker data\n")
    os.mkfifo(src / "fifo")
    os.mknod(src / "null", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    os.symlink(far.canary / "secret.txt", src / "link-abs")
    os.symlink("../../canary/secret.txt", src / "link-rel")
    (src / "suid.bin").write_bytes(b"#!/bin/sh\n")
    (src / "suid.bin").chmod(0o6755)
    (src / "cap.bin").write_bytes(b"#!/bin/sh\n")
    os.setxattr(src / "cap.bin", "security.capability", CAPABILITY_XATTR)
    # Same name, size and mtime as the canary's file but other bytes: rsync's quick check would take the
    # canary's file as up to date, so a --link-dest or --copy-dest reaching it would pull the secret in.
    (src / "same").mkdir()
    lookalike = src / "same" / "secret.txt"
    lookalike.write_bytes(bytes(len(SECRET)))
    st = (far.canary / "secret.txt").stat()
    os.utime(lookalike, ns=(st.st_atime_ns, st.st_mtime_ns))


def _rsync_attacks(far: Far, src: Path, local: Path) -> dict[str, list[str]]:
    """name -> rsync arguments; `R:` marks a remote path (relative to the root unless absolute)."""
    canary, state = far.canary, far.server.dir
    return {
        "download ../ (read outside)": ["R:../canary/secret.txt", str(local)],
        "download absolute canary path": [f"R:{canary}/secret.txt", str(local)],
        "download /etc/shadow": ["R:/etc/shadow", str(local)],
        "upload to ../ (write outside)": [str(src / "file.txt"), "R:../canary/new.txt"],
        "upload to absolute canary path": [str(src / "file.txt"), f"R:{canary}/new.txt"],
        "upload --mkpath into ../ ": ["--mkpath", str(src / "file.txt"), "R:incoming/../../canary/d/new.txt"],
        "upload into the server's state dir (absolute)": [str(src / "file.txt"), f"R:{state}/x"],
        "upload -l absolute symlink to the canary": ["-l", str(src / "link-abs"), "R:incoming/"],
        "upload -l relative ../ symlink to the canary": ["-l", str(src / "link-rel"), "R:incoming/"],
        "upload -D FIFO": ["-D", str(src / "fifo"), "R:incoming/"],
        "upload -D char device 1,5": ["-D", str(src / "null"), "R:incoming/"],
        "upload --specials FIFO": ["--specials", str(src / "fifo"), "R:incoming/"],
        "upload --devices char device 1,5": ["--devices", str(src / "null"), "R:incoming/"],
        "upload -p setuid/setgid file": ["-p", str(src / "suid.bin"), "R:incoming/"],
        "upload -X file capability": ["-X", str(src / "cap.bin"), "R:incoming/"],
        "upload --link-dest=<canary> (hard link in from outside)": [
            "-t",
            f"--link-dest={canary}",
            str(src / "same" / "secret.txt"),
            "R:incoming/",
        ],
        "upload --link-dest=../../canary": [
            "-t",
            "--link-dest=../../canary",
            str(src / "same" / "secret.txt"),
            "R:incoming/",
        ],
        "upload --copy-dest=<canary> (copy in from outside)": [
            "-t",
            f"--copy-dest={canary}",
            str(src / "same" / "secret.txt"),
            "R:incoming/",
        ],
        "download via a planted symlink": ["R:incoming/planted", str(local)],
        "upload through a planted symlink": [str(src / "file.txt"), "R:incoming/planted"],
        "upload through a planted directory symlink": [str(src / "file.txt"), "R:incoming/planted_dir/new.txt"],
    }


def _ssh_rsync(far: Far) -> Callable[[list[str]], subprocess.CompletedProcess[str]]:
    server = far.server
    assert isinstance(server, Sshd)
    creds = replace(far.target.credentials, ssh_key=server.client_key_path, known_hosts=server.known_hosts_path)
    target = replace(far.target, credentials=creds)
    ssh = ["ssh", "-p", str(target.ports["ssh"]), *ssh_options(target, ClientOptions())]

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        args = [f"{ssh_login(target)}:{a[2:]}" if a.startswith("R:") else a for a in args]
        argv = ["rsync", "--timeout=30", "-e", shlex.join(ssh), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=90)

    return run


def _daemon_rsync(far: Far) -> Callable[[list[str]], subprocess.CompletedProcess[str]]:
    t = far.target
    url = f"rsync://{t.credentials.user}@{HOST}:{t.ports['rsync']}/{t.share}/"

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        args = [url + a[2:] if a.startswith("R:") else a for a in args]  # an absolute path goes as module//abs
        env = {**os.environ, "RSYNC_PASSWORD": t.credentials.password}
        argv = ["rsync", "--timeout=30", "--contimeout=10", "--no-motd", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env)

    return run


def _run_rsync_attacks(far: Far, run: Callable[[list[str]], subprocess.CompletedProcess[str]], tmp: Path) -> dict:
    src, local = tmp / "src", tmp / "local.bin"
    _attack_sources(far, src)
    results = {}
    for name, args in _rsync_attacks(far, src, local).items():
        local.unlink(missing_ok=True)
        far.snapshot()
        with planted_links(far.root):
            done = run(args)
        lines = (done.stderr + done.stdout).strip().splitlines()
        said = next((ln for ln in lines if "skipping" in ln or "refuse" in ln), lines[0] if lines else "")
        results[name] = (done.returncode, said[:160])
        assert not local.exists() or local.read_bytes() != SECRET, f"{name}: the canary was read"
        far.check(munged_links_allowed=isinstance(far.server, Rsyncd))
        assert_no_secret_inside(far.root)
    for name, (code, line) in results.items():
        print(f"ATTACK {type(far.server).__name__}: {name}: exit {code}: {line}")
    return results


def assert_no_secret_inside(root: Path) -> None:
    """No file in the root holds the canary's content (a copy or link pulled in from outside)."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert path.read_bytes() != SECRET, f"{path} holds the canary's content"


def test_rsync_over_ssh_attacks_are_refused_or_harmless(ssh_far: Far, tmp_path: Path) -> None:
    results = _run_rsync_attacks(ssh_far, _ssh_rsync(ssh_far), tmp_path)
    # Over SSH every one fails outright (rrsync refuses the paths, Landlock and seccomp the rest), except
    # devices and specials: rrsync turns them off, so the client's rsync skips them and exits 0.
    for name, (code, said) in results.items():
        assert code != 0 or "skipping non-regular file" in said, (name, code, said)


def test_rsync_daemon_attacks_are_refused_or_harmless(rsyncd_far: Far, tmp_path: Path) -> None:
    results = _run_rsync_attacks(rsyncd_far, _daemon_rsync(rsyncd_far), tmp_path)
    # The daemon refuses devices and specials outright (refuse options), whatever else it confines.
    for name in [n for n in results if "FIFO" in n or "device" in n]:
        code, line = results[name]
        assert code != 0 and "refuse" in line.lower(), (name, code, line)


def test_rsync_daemon_transfers_as_its_own_unprivileged_uid(rsyncd_far: Far, tmp_path: Path) -> None:
    server = rsyncd_far.server
    assert isinstance(server, Rsyncd)
    if os.geteuid() != 0:
        pytest.skip("only a daemon started as root switches to a uid of its own")
    assert server.transfer_ids is not None
    uid, gid = server.transfer_ids
    assert uid != 0 and gid != 0
    with open("/etc/passwd") as fh:
        assert str(uid) not in [line.split(":")[2] for line in fh if line.count(":") >= 2]
    run = _daemon_rsync(rsyncd_far)
    (tmp_path / "owned.txt").write_bytes(b"who wrote me\n")
    done = run([str(tmp_path / "owned.txt"), "R:incoming/"])
    assert done.returncode == 0, done.stderr
    st = (rsyncd_far.root / "incoming" / "owned.txt").stat()
    assert (st.st_uid, st.st_gid) == (uid, gid)
    # That uid may write beneath incoming/ only: the served files and the root itself are out of its reach.
    rsyncd_far.snapshot()
    before = tree_digest(rsyncd_far.root / "files")
    for remote in ("R:files/", "R:"):
        done = run([str(tmp_path / "owned.txt"), remote])
        assert done.returncode != 0 and "Permission denied" in done.stderr, (remote, done.stderr)
    assert tree_digest(rsyncd_far.root / "files") == before
    assert not (rsyncd_far.root / "owned.txt").exists()
    rsyncd_far.check(munged_links_allowed=True)
    # Nothing was made world-writable to let it in.
    for path in (rsyncd_far.root, rsyncd_far.root / "incoming", rsyncd_far.root / "files"):
        assert not path.stat().st_mode & stat.S_IWOTH, path


def test_rsync_daemon_munges_a_stored_symlink(rsyncd_far: Far, tmp_path: Path) -> None:
    """A symlink rsync stores can never be followed out of the module by another server (HTTP, FTP, SFTP)."""
    os.symlink(rsyncd_far.canary / "secret.txt", tmp_path / "out-link")
    done = _daemon_rsync(rsyncd_far)(["-l", str(tmp_path / "out-link"), "R:incoming/"])
    stored = rsyncd_far.root / "incoming" / "out-link"
    if done.returncode == 0:
        assert os.readlink(stored).startswith(MUNGED_PREFIX)
        with pytest.raises(FileNotFoundError):
            stored.read_bytes()
    else:
        assert not os.path.lexists(stored)


# --- the gate itself: Landlock and seccomp on the real kernel --------------------------------------

_GATE_PROBE = r"""
import errno, json, os, stat, sys
sys.path.insert(0, sys.argv[1])
import sshgate
root, outside, mode = sys.argv[2], sys.argv[3], sys.argv[4]
if mode == "landlock-only":
    sshgate.restrict_paths([root], [])
else:
    sshgate.confine([root], [])
os.chdir(root)
open("f", "w").close()
tries = {
    "mkfifo": lambda: os.mkfifo("fifo"),
    "mknod char 1,5": lambda: os.mknod("null", stat.S_IFCHR | 0o666, os.makedev(1, 5)),
    "mknod block": lambda: os.mknod("blk", stat.S_IFBLK | 0o600, os.makedev(7, 0)),
    "unix socket": lambda: __import__("socket").socket(1).bind("sock"),
    "symlink out": lambda: os.symlink(outside + "/secret.txt", "link"),
    "hard link from outside": lambda: os.link(outside + "/secret.txt", "hard"),
    "rename in from outside": lambda: os.rename(outside + "/secret.txt", "moved"),
    "chmod 4755": lambda: os.chmod("f", 0o4755),
    "chmod 2755 dir": lambda: os.chmod(".", 0o2755),
    "fchmod 6755": lambda: os.fchmod(os.open("f", os.O_RDONLY), 0o6755),
    "open O_CREAT 4755": lambda: os.open("s", os.O_CREAT | os.O_WRONLY, 0o4755),
    "mkdir 2755": lambda: os.mkdir("d", 0o2755),
    "mknod regular 4755": lambda: os.mknod("r", stat.S_IFREG | 0o4755),
    "setxattr security.capability": lambda: os.setxattr("f", "security.capability", bytes.fromhex(sys.argv[5])),
    "write outside": lambda: open(outside + "/new.txt", "w"),
    "read outside": lambda: open(outside + "/secret.txt").read(),
}
out = {}
for name, attempt in tries.items():
    try:
        attempt()
        out[name] = "ALLOWED"
    except OSError as exc:
        out[name] = errno.errorcode[exc.errno]
out["inside: write, mkdir, rename, hard link"] = "ok"
try:
    os.mkdir("sub")
    os.rename("f", "sub/f")
    os.link("sub/f", "f2")
    open("sub/g", "w").write("x")
    os.chmod("sub/g", 0o640)
except OSError as exc:
    out["inside: write, mkdir, rename, hard link"] = errno.errorcode[exc.errno]
print(json.dumps(out))
"""


@pytest.mark.parametrize("mode", ["landlock-only", "landlock+seccomp"])
def test_gate_confinement_on_the_real_kernel(tmp_path: Path, mode: str) -> None:
    """Each right Landlock grants none of is denied on its own; seccomp adds setuid, mknod and xattrs."""
    from workbench.server.daemons import sshgate

    if sshgate.landlock_abi() < 2:
        pytest.skip("needs Landlock ABI >= 2 (REFER)")
    root, outside = tmp_path / "root", tmp_path / "canary"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    before = tree_digest(outside)
    gate_dir = str(Path(sshgate.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-S", "-c", _GATE_PROBE, gate_dir, str(root), str(outside), mode, CAPABILITY_XATTR.hex()],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    print(mode, out)
    assert out.pop("inside: write, mkdir, rename, hard link") == "ok"
    landlock = ["mkfifo", "mknod char 1,5", "mknod block", "unix socket", "symlink out", "write outside"]
    landlock.append("read outside")
    for name in landlock:
        # Landlock answers EACCES; with seccomp in front, mknod is refused first (EPERM).
        assert out[name] == "EACCES" or (mode != "landlock-only" and out[name] == "EPERM"), (name, out[name])
    # A missing REFER right gives EXDEV (the hard link); the rename also lacks REMOVE_FILE outside (EACCES).
    assert out["hard link from outside"] == "EXDEV"
    assert out["rename in from outside"] in ("EXDEV", "EACCES")
    setid = [n for n in out if n not in landlock and "outside" not in n]
    for name in setid:
        if mode == "landlock+seccomp":
            assert out[name] in ("EPERM", "ENOTSUP", "EOPNOTSUPP"), (name, out[name])
        else:
            assert out[name] == "ALLOWED", (name, out[name])  # what Landlock alone cannot stop: why seccomp is there
    assert tree_digest(outside) == before
    if mode == "landlock+seccomp":
        assert_root_clean(root, munged_links_allowed=False)


# --- SMB (smbprotocol sending the raw requests: no client-side path clean-up) -----------------------


@pytest.fixture(scope="module")
def smb_far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Far]:
    smbclient = pytest.importorskip("smbclient")
    far = _make_far(tmp_path_factory.mktemp("smb"), "smb", Smbd)
    try:
        server = far.server
        assert isinstance(server, Smbd)
        far.watched_state = [server.conf_path]
        creds = far.target.credentials
        smbclient.register_session(
            HOST, username=creds.user, password=creds.password, port=far.target.ports["smb"], connection_timeout=10
        )
        yield far
    finally:
        smbclient.reset_connection_cache()
        far.server.stop()


def _smb_attacks(far: Far) -> dict[str, Callable[[], object]]:
    import smbclient
    from smbclient._io import SMBFileIO, SMBFileTransaction, SMBRawIO, ioctl_request, set_info
    from smbprotocol.file_info import FileLinkInformation, FileRenameInformation
    from smbprotocol.ioctl import CtlCode
    from smbprotocol.open import CreateOptions, FilePipePrinterAccessMask

    port = far.target.ports["smb"]
    share = rf"\\{HOST}\{far.target.share}"
    canary_abs = str(far.canary).replace("/", "\\")

    def read(path: str) -> bytes:
        with SMBFileIO(share + path, mode="rb", port=port) as fh:
            return fh.read()

    def write(path: str) -> None:
        with SMBFileIO(share + path, mode="wb", port=port) as fh:
            fh.write(b"attacker data\n")

    def set_file_info(path: str, info: object) -> None:
        access = FilePipePrinterAccessMask.DELETE | FilePipePrinterAccessMask.FILE_WRITE_ATTRIBUTES
        raw = SMBRawIO(share + path, mode="r", share_access="rwd", port=port, desired_access=access)
        with SMBFileTransaction(raw) as transaction:
            set_info(transaction, info)

    def hard_link(target_name: str) -> None:
        info = FileLinkInformation()
        info["replace_if_exists"] = False
        info["file_name"] = target_name
        set_file_info(r"\incoming\a.txt", info)

    def rename(target_name: str) -> None:
        info = FileRenameInformation()
        info["replace_if_exists"] = False
        info["file_name"] = target_name
        set_file_info(r"\incoming\a.txt", info)

    def reparse(name: str, tag: int, data: bytes) -> None:
        """FSCTL_SET_REPARSE_POINT on a new file: how SMB2 clients make symlinks and (NFS tags) specials."""
        raw = SMBRawIO(
            share + name,
            mode="x",
            port=port,
            desired_access=FilePipePrinterAccessMask.FILE_WRITE_ATTRIBUTES,
            create_options=CreateOptions.FILE_OPEN_REPARSE_POINT | CreateOptions.FILE_NON_DIRECTORY_FILE,
        )
        buffer = struct.pack("<IHH", tag, len(data), 0) + data
        try:
            with SMBFileTransaction(raw) as transaction:
                ioctl_request(transaction, CtlCode.FSCTL_SET_REPARSE_POINT, input_buffer=buffer)
        finally:
            with contextlib.suppress(OSError):
                smbclient.remove(share + name, port=port)

    nfs = 0x80000014  # IO_REPARSE_TAG_NFS: Windows' and newer Samba's way to store a FIFO or a device
    return {
        r"read \..\canary\secret.txt": lambda: read(r"\..\canary\secret.txt"),
        r"read \incoming\..\..\canary\secret.txt": lambda: read(r"\incoming\..\..\canary\secret.txt"),
        "read the absolute canary path": lambda: read("\\" + canary_abs + r"\secret.txt"),
        r"read \..\..\..\..\..\..\etc\shadow": lambda: read(r"\..\..\..\..\..\..\etc\shadow"),
        r"write \..\canary\new.txt": lambda: write(r"\..\canary\new.txt"),
        "write the absolute canary path": lambda: write("\\" + canary_abs + r"\new.txt"),
        "write into the server's state dir (absolute)": lambda: write(str(far.server.dir / "x").replace("/", "\\")),
        r"write over ..\state\smbd\smb.conf": lambda: write(r"\..\state\smbd\smb.conf"),
        "symlink reparse point, absolute to the canary": lambda: smbclient.symlink(
            str(far.canary / "secret.txt"), share + r"\incoming\link-abs", port=port
        ),
        r"symlink reparse point, relative ..\..\canary": lambda: smbclient.symlink(
            r"..\..\canary\secret.txt", share + r"\incoming\link-rel", port=port
        ),
        "NFS reparse point: FIFO": lambda: reparse(r"\incoming\fifo", nfs, struct.pack("<Q", 0x4F464946)),
        "NFS reparse point: char device 1,5": lambda: reparse(
            r"\incoming\null", nfs, struct.pack("<QII", 0x524843, 1, 5)
        ),
        r"hard link named ..\..\canary\hard.txt": lambda: hard_link(r"..\..\canary\hard.txt"),
        "hard link named with the absolute canary path": lambda: hard_link(canary_abs + r"\hard.txt"),
        r"rename to ..\..\canary\moved.txt": lambda: rename(r"..\..\canary\moved.txt"),
        "read a planted symlink to the canary": lambda: read(r"\incoming\planted"),
        "write a planted symlink to the canary": lambda: write(r"\incoming\planted"),
        "write through a planted directory symlink": lambda: write(r"\incoming\planted_dir\new.txt"),
    }


def test_smb_attacks_all_fail_and_leave_the_canary(smb_far: Far) -> None:
    attacks = _smb_attacks(smb_far)
    results = {}
    for name, attack in attacks.items():
        smb_far.snapshot()
        with planted_links(smb_far.root):
            try:
                got = attack()
            except (OSError, ValueError) as exc:
                results[name] = f"{type(exc).__name__}: {exc}"[:160]
            else:
                raise AssertionError(f"SMB attack {name!r} succeeded: {got!r}"[:300])
        smb_far.check()
        assert_no_secret_inside(smb_far.root)
    for name, line in results.items():
        print(f"ATTACK Smbd: {name}: {line}")
    assert len(results) == len(attacks)


def test_smb_creates_no_setid_or_special_files(smb_far: Far) -> None:
    """SMB2 cannot ask for mode bits; what it creates gets the masks (0644 files, 0755 directories)."""
    import smbclient

    port = smb_far.target.ports["smb"]
    share = rf"\\{HOST}\{smb_far.target.share}"
    smbclient.mkdir(share + r"\incoming\newdir", port=port)
    with smbclient.open_file(share + r"\incoming\newdir\f.bin", mode="wb", port=port) as fh:
        fh.write(b"x")
    assert (smb_far.root / "incoming" / "newdir").stat().st_mode & 0o7777 == 0o755
    assert (smb_far.root / "incoming" / "newdir" / "f.bin").stat().st_mode & 0o7777 == 0o644
    shutil.rmtree(smb_far.root / "incoming" / "newdir")


def test_rsync_daemon_without_acls_is_unavailable_not_weakened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without POSIX ACLs makes the daemon unavailable with the reason; nothing is opened wider."""
    import errno

    from workbench.server.daemons import rsyncd as rsyncd_mod
    from workbench.shared.errors import UnavailableError

    if os.geteuid() != 0:
        pytest.skip("only a daemon started as root needs ACLs for its own uid")
    ctx = loopback_context(tmp_path, "rsync")
    (ctx.root / "incoming").mkdir()
    modes = {p: p.stat().st_mode for p in (ctx.root, ctx.root / "incoming")}

    def no_acls(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(rsyncd_mod.os, "setxattr", no_acls)
    with pytest.raises(UnavailableError, match="POSIX ACLs"):
        Rsyncd(ctx).prepare()
    assert {p: p.stat().st_mode for p in modes} == modes
