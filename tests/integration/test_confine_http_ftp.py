"""Confinement of the real `workbench serve` (HTTP and FTP) against a hostile authenticated client.

A private serve process serves ROOT; next to it, outside the root, a canary directory is hashed
before and after every attack and must not change (content, inode, type of every entry), and ROOT's
parent must gain no files (`PUT /f/%2E` used to create `ROOT.part` there). Links, FIFOs and device
nodes are planted directly on disk, standing for any protocol that could plant them (SFTP, rsync -l/-D).
"""

from __future__ import annotations

import base64
import ftplib
import hashlib
import http.client
import io
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.serve_fixtures import HOST, ServeRunner
from workbench.probe import wire as tcpprobe
from workbench.server import ftpd as ftp_server
from workbench.server import http_app as http_server
from workbench.server.confine import ServedRoot

SECRET = b"canary: never served, never written\n"


@dataclass
class Far:
    runner: ServeRunner
    base: Path  # ROOT's parent
    root: Path
    canary: Path
    user: str
    password: str

    @property
    def http_port(self) -> int:
        return self.runner.ctx.ports["http"]

    @property
    def ftp_port(self) -> int:
        return self.runner.ctx.ports["ftp"]


@pytest.fixture(scope="module")
def far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Far]:
    base = tmp_path_factory.mktemp("confine")
    runner = ServeRunner(base)
    canary = base / "canary"
    (canary / "sub").mkdir(parents=True)
    (canary / "secret.txt").write_bytes(SECRET)
    (canary / "hard_target.txt").write_bytes(SECRET)
    (canary / "sub" / "deep.txt").write_bytes(SECRET)
    runner.ensure()
    creds = runner.ctx.credentials
    try:
        yield Far(runner, base, runner.ctx.root, canary, creds.user, creds.password)
    finally:
        runner.stop()


def _snapshot(far: Far) -> dict[str, tuple]:
    """Every entry under the canary (type, inode, content hash) plus the names in ROOT's parent."""
    seen: dict[str, tuple] = {"<parent>": tuple(sorted(os.listdir(far.base)))}
    for dirpath, dirnames, filenames in os.walk(far.canary):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else ""
            seen[str(path.relative_to(far.canary))] = (stat.S_IFMT(st.st_mode), st.st_ino, st.st_mode, digest)
    return seen


def _plant(far: Far) -> None:
    """(Re)create the planted traps; attacks that replace one get a fresh one for the next test."""
    root = far.root
    (root / "files").mkdir(exist_ok=True)
    (root / "incoming").mkdir(exist_ok=True)
    ok = root / "files" / "ok.bin"
    if not ok.is_file() or ok.is_symlink():
        ok.unlink(missing_ok=True)
        ok.write_bytes(b"ok" * 1000)
    traps = {
        "link_file": far.canary / "secret.txt",
        "link_dir": far.canary,
        "files/link_up": Path("../../canary/secret.txt"),  # a relative link climbing out
        "incoming/a.part": far.canary / "secret.txt",  # the part name the old PUT opened and followed
        "incoming/link_to_canary_dir": far.canary,
    }
    for rel, target in traps.items():
        path = root / rel
        if not path.is_symlink():
            _remove(path)
            os.symlink(target, path)
    hard = root / "hard"
    if not (hard.exists() and hard.stat().st_ino == (far.canary / "hard_target.txt").stat().st_ino):
        _remove(hard)
        os.link(far.canary / "hard_target.txt", hard)
    fifo = root / "fifo"
    if not (fifo.is_symlink() is False and fifo.exists() and stat.S_ISFIFO(fifo.lstat().st_mode)):
        _remove(fifo)
        os.mkfifo(fifo)
    dev = root / "devnull"
    if not (dev.exists() and stat.S_ISCHR(dev.lstat().st_mode)):
        _remove(dev)
        if os.geteuid() == 0:
            os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what `rsync -D` as root planted


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file() or (path.exists() and not path.is_dir()):
        path.unlink()


@pytest.fixture
def guarded(far: Far) -> Iterator[Far]:
    """The served root with its traps, and the canary checked unchanged after the test."""
    far.runner.ensure()
    _plant(far)
    before = _snapshot(far)
    yield far
    assert _snapshot(far) == before, "something outside the served root changed"
    strays = [p for p in far.root.rglob("*.part") if p != far.root / "incoming" / "a.part"]
    assert not strays, f"temporary files left behind: {strays}"


# ------------------------------------------------------------------ HTTP


def _http(far: Far, method: str, path: str, body: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    token = base64.b64encode(f"{far.user}:{far.password}".encode()).decode()
    conn = http.client.HTTPConnection(HOST, far.http_port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Authorization": f"Basic {token}"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


HTTP_READS = [
    "/f/../canary/secret.txt",
    "/f/%2E%2E/canary/secret.txt",
    "/f/%2e%2e%2fcanary%2fsecret.txt",
    "/f/files/%2E%2E/%2E%2E/canary/secret.txt",
    "/f/%2Fetc%2Fpasswd",
    "/f//etc/passwd",
    "/f/%2E",
    "/f/files/%2E",
    "/f/files/ok.bin%00",
    "/f/files/ok.bin%00.txt",
    "/f/link_file",
    "/f/link_dir/secret.txt",
    "/f/link_dir/sub/deep.txt",
    "/f/files/link_up",
    "/f/incoming/a.part",
    "/f/hard",
    "/f/devnull",
    "/f/incoming/link_to_canary_dir/secret.txt",
    "/ctl/hash?path=../canary/secret.txt",
    "/ctl/hash?path=%2E%2E%2Fcanary%2Fsecret.txt",
    "/ctl/hash?path=/etc/passwd",
    "/ctl/hash?path=link_file",
    "/ctl/hash?path=link_dir/secret.txt",
    "/ctl/hash?path=files/link_up",
    "/ctl/hash?path=hard",
    "/ctl/hash?path=devnull",
    "/ctl/hash?path=files/ok.bin%00",
    "/ctl/hash?path=.",
]


@pytest.mark.parametrize("path", HTTP_READS)
def test_http_reads_stay_in_the_root(guarded: Far, path: str) -> None:
    status, body = _http(guarded, "GET", path)
    assert 400 <= status < 500, (status, body[:200])
    assert SECRET not in body and b"root:" not in body


HTTP_REFUSED_WRITES = [
    ("PUT", "/f/%2E"),  # used to leave ROOT.part in ROOT's parent
    ("PUT", "/f/files/%2E"),
    ("PUT", "/f/%2E%2E"),
    ("PUT", "/f/%2E%2E/canary/new.txt"),
    ("PUT", "/f/%2E%2E%2Fcanary%2Fnew.txt"),
    ("PUT", "/f/files/%2E%2E/%2E%2E/canary/new.txt"),
    ("PUT", "/f/%2Ftmp%2Fwb-confine-new.txt"),
    ("PUT", "/f/link_dir/new.txt"),
    ("PUT", "/f/link_dir/sub/deep.txt"),
    ("PUT", "/f/incoming/link_to_canary_dir/new.txt"),
    ("PUT", "/f/files/link_up/new.txt"),
    ("PUT", "/f/incoming/x%00y"),
    ("PUT", "/f/incoming"),  # a directory is not replaced by a file
    ("POST", "/ctl/mkdir?path=link_dir/sub2"),
    ("POST", "/ctl/mkdir?path=link_dir"),
    ("POST", "/ctl/mkdir?path=../canary/sub3"),
    ("POST", "/ctl/mkdir?path=%2E%2E%2Fcanary%2Fsub3"),
    ("POST", "/ctl/mkdir?path=/tmp/wb-confine-dir"),
    ("POST", "/ctl/mkdir?path=incoming/link_to_canary_dir/sub4"),
    ("POST", "/ctl/mkdir?path=a%00b"),
    ("POST", "/ctl/delete?path=../canary"),
    ("POST", "/ctl/delete?path=incoming/../files"),
    ("POST", "/ctl/delete?path=link_dir"),
    ("POST", "/ctl/delete?path=files/ok.bin"),
    ("POST", "/ctl/delete?path=/tmp"),
    ("POST", "/ctl/delete?path=incoming"),  # every client's uploads, and the rsync daemon's ACL
    ("POST", "/ctl/delete?path=incoming/"),
]


def test_http_file_requests_are_bounded_like_the_cli(guarded: Far) -> None:
    body = json.dumps({"sizes": [], "small": [[1_000_000_000, 1024]], "profile": "random", "seed": 1}).encode()
    status, text = _http(guarded, "POST", "/ctl/files", body=body)
    assert status == 403 and b"100,000" in text, (status, text[:200])
    assert not (guarded.root / "files" / "small-1000000000x1K").exists()
    assert (guarded.root / "incoming").is_dir()


@pytest.mark.parametrize(("method", "path"), HTTP_REFUSED_WRITES)
def test_http_writes_outside_or_through_links_are_refused(guarded: Far, method: str, path: str) -> None:
    status, body = _http(guarded, method, path, body=b"attack" if method == "PUT" else None)
    assert 400 <= status < 500, (status, body[:200])
    assert not Path("/tmp/wb-confine-new.txt").exists() and not Path("/tmp/wb-confine-dir").exists()
    assert (guarded.root / "files" / "ok.bin").read_bytes() == b"ok" * 1000


@pytest.mark.parametrize("name", ["link_file", "hard", "incoming/a", "fifo", "devnull"])
def test_http_put_replaces_a_planted_name_and_never_writes_through_it(guarded: Far, name: str) -> None:
    """A symlink or hard link (or a planted `a.part`) at the target: PUT renames a new file over the
    name, so what the link pointed to (checked by the canary) is untouched."""
    if name == "devnull" and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    status, body = _http(guarded, "PUT", f"/f/{name}", body=b"uploaded")
    assert status == 200, body
    target = guarded.root / name
    assert not target.is_symlink() and stat.S_ISREG(target.lstat().st_mode) and target.lstat().st_nlink == 1
    assert target.read_bytes() == b"uploaded"
    assert (guarded.root / "incoming" / "a.part").is_symlink()  # the planted part is never opened


def test_http_delete_removes_links_never_their_targets(guarded: Far) -> None:
    sub = guarded.root / "incoming" / "tree"
    sub.mkdir(exist_ok=True)
    os.symlink(guarded.canary, sub / "to_canary")
    os.symlink(guarded.canary / "secret.txt", sub / "to_secret")
    for rel in ("incoming/link_to_canary_dir", "incoming/tree", "incoming/a.part"):
        status, body = _http(guarded, "POST", f"/ctl/delete?path={rel}")
        assert status == 200, body
        assert not (guarded.root / rel).is_symlink() and not (guarded.root / rel).exists()
    os.symlink(guarded.canary / "secret.txt", guarded.root / "incoming" / "a.part")  # back for the guard


def test_http_files_refuses_a_symlinked_files_dir(guarded: Far) -> None:
    files = guarded.root / "files"
    os.rename(files, guarded.root / "files.real")
    os.symlink(guarded.canary, files)
    try:
        status, body = _http(guarded, "POST", "/ctl/files", body=b'{"sizes": [1000]}')
        assert 400 <= status < 500, body
    finally:
        files.unlink()
        os.rename(guarded.root / "files.real", files)


def test_http_files_never_writes_through_a_link_planted_in_files(guarded: Far) -> None:
    """The generator rewrites a file whose bytes do not match: a planted link there is dropped first."""
    planted = guarded.root / "files" / "file-1000B.bin"
    _remove(planted)
    os.symlink(guarded.canary / "secret.txt", planted)
    (guarded.root / "files" / "small-2x1000B").mkdir(exist_ok=True)
    os.link(guarded.canary / "hard_target.txt", guarded.root / "files" / "small-2x1000B" / "f000000.bin")
    status, body = _http(guarded, "POST", "/ctl/files", body=b'{"sizes": [1000], "small": [[2, 1000]]}')
    assert status == 200, body
    assert not planted.is_symlink() and planted.stat().st_size == 1000
    assert (guarded.root / "files" / "small-2x1000B" / "f000000.bin").stat().st_nlink == 1


def test_http_fifo_fails_promptly_and_the_server_stays_responsive(guarded: Far) -> None:
    for path in ("/f/fifo", "/ctl/hash?path=fifo"):
        start = time.monotonic()
        status, _ = _http(guarded, "GET", path, timeout=5.0)
        assert 400 <= status < 500 and time.monotonic() - start < 2.0
    assert _http(guarded, "GET", "/f/files/ok.bin") == (200, b"ok" * 1000)


# ------------------------------------------------------------------ FTP


def _ftp(far: Far) -> ftplib.FTP:
    ftp = ftplib.FTP()
    ftp.connect(HOST, far.ftp_port, timeout=10)
    ftp.login(far.user, far.password)
    return ftp


def _retr(ftp: ftplib.FTP, name: str) -> bytes:
    out = bytearray()
    ftp.retrbinary(f"RETR {name}", out.extend)
    return bytes(out)


FTP_READS = [
    "../canary/secret.txt",
    "/../canary/secret.txt",
    "%2E%2E/canary/secret.txt",
    "/etc/passwd",
    "link_file",
    "link_dir/secret.txt",
    "link_dir/sub/deep.txt",
    "files/link_up",
    "incoming/a.part",
    "incoming/link_to_canary_dir/secret.txt",
    "hard",
    "devnull",
    "files/ok.bin\x00x",
    "files",
]


@pytest.mark.parametrize("name", FTP_READS)
def test_ftp_reads_stay_in_the_root(guarded: Far, name: str) -> None:
    with _ftp(guarded) as ftp, pytest.raises(ftplib.error_perm):
        _retr(ftp, name)


FTP_REFUSED = [
    "SIZE link_file",
    "SIZE hard",
    "SIZE link_dir/secret.txt",
    "MDTM link_file",
    "MDTM link_dir/secret.txt",
    "CWD link_dir",
    "CWD ../canary",
    "CWD incoming/link_to_canary_dir",
    "MKD link_dir/sub2",
    "MKD incoming/link_to_canary_dir/sub2",
    "MKD ../canary/sub2",
    "RMD link_dir",
    "RMD link_dir/sub",
    "DELE link_dir/secret.txt",
    "DELE incoming/link_to_canary_dir/secret.txt",
    "SITE CHMOD 4755 files/ok.bin",
    "SITE CHMOD 777 link_file",
    "STOU",
]


@pytest.mark.parametrize("command", FTP_REFUSED)
def test_ftp_commands_through_links_or_outside_are_refused(guarded: Far, command: str) -> None:
    mode = (guarded.root / "files" / "ok.bin").stat().st_mode
    with _ftp(guarded) as ftp, pytest.raises(ftplib.error_perm):
        ftp.sendcmd(command)
    assert (guarded.root / "files" / "ok.bin").stat().st_mode == mode  # SITE CHMOD did nothing


@pytest.mark.parametrize(
    ("verb", "name"),
    [("STOR", "link_dir/new.txt"), ("STOR", "../canary/new.txt"), ("STOR", "files/link_up/new.txt"),
     ("STOR", "incoming/link_to_canary_dir/new.txt"), ("APPE", "link_file"), ("APPE", "hard"),
     ("APPE", "link_dir/secret.txt"), ("STOR", "fifo/x"), ("APPE", "fifo"), ("APPE", "devnull")],
)
def test_ftp_writes_through_links_or_outside_are_refused(guarded: Far, verb: str, name: str) -> None:
    with _ftp(guarded) as ftp, pytest.raises(ftplib.error_perm):
        ftp.storbinary(f"{verb} {name}", _bytes(b"attack"))


def test_ftp_rename_cannot_move_links_or_leave_the_root(guarded: Far) -> None:
    with _ftp(guarded) as ftp:
        for src, dst in (("link_file", "moved"), ("files/ok.bin", "link_dir/ok.bin"), ("hard", "../canary/x")):
            with pytest.raises(ftplib.error_perm):
                ftp.sendcmd(f"RNFR {src}")
                ftp.sendcmd(f"RNTO {dst}")


@pytest.mark.parametrize("name", ["link_file", "hard", "incoming/a.part"])
def test_ftp_stor_replaces_a_planted_name_and_never_writes_through_it(guarded: Far, name: str) -> None:
    with _ftp(guarded) as ftp:
        ftp.storbinary(f"STOR {name}", _bytes(b"uploaded"))
    target = guarded.root / name
    assert not target.is_symlink() and target.lstat().st_nlink == 1 and target.read_bytes() == b"uploaded"
    target.unlink()
    if name == "incoming/a.part":
        os.symlink(guarded.canary / "secret.txt", target)  # back for the guard


def test_ftp_listings_do_not_follow_links(guarded: Far) -> None:
    with _ftp(guarded) as ftp:
        names = ftp.nlst()
        assert {"link_file", "link_dir", "fifo", "hard"} <= set(names)
        assert ftp.nlst("link_dir") == ["link_dir"]  # the link itself, as `ls link` shows it; not the canary
        assert ftp.nlst("incoming/link_to_canary_dir") == ["link_to_canary_dir"]
        with pytest.raises(ftplib.error_perm):
            list(ftp.mlsd("link_dir"))
        lines: list[str] = []
        ftp.retrlines("LIST", lines.append)
        assert not any(str(guarded.canary) in line for line in lines)  # link targets are not shown
        assert ftp.pwd() == "/"


def test_ftp_fifo_fails_promptly_and_the_server_stays_responsive(guarded: Far) -> None:
    with _ftp(guarded) as ftp:
        start = time.monotonic()
        with pytest.raises(ftplib.error_perm):
            _retr(ftp, "fifo")
        assert time.monotonic() - start < 2.0
        assert _retr(ftp, "files/ok.bin") == b"ok" * 1000


def _bytes(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)


# ------------------------------------------------------------------ slow and stalled clients


def _seconds_until_closed(sock: socket.socket, trickle: bytes, limit_s: float) -> float:
    """Send `trickle` one byte a second until the server closes the connection; seconds since start."""
    start = time.monotonic()
    sock.settimeout(1.0)
    for i in range(int(limit_s)):
        try:
            sock.sendall(trickle[i % len(trickle) : i % len(trickle) + 1])
            while True:
                if not sock.recv(4096):
                    return time.monotonic() - start
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - start
    return time.monotonic() - start


def test_slow_unauthenticated_clients_are_dropped_and_authenticated_ones_are_not(guarded: Far) -> None:
    probe_port = guarded.runner.ctx.ports["tcp"]
    limit_s = 40.0
    results: dict[str, float | bool] = {}

    def http_slow() -> None:
        with socket.create_connection((HOST, guarded.http_port), timeout=5) as sock:
            sock.sendall(b"GET /f/files/ok.bin HTTP/1.1\r\nHost: x\r\n")
            results["http"] = _seconds_until_closed(sock, b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaa", limit_s)

    def ftp_slow() -> None:
        with socket.create_connection((HOST, guarded.ftp_port), timeout=5) as sock:
            results["ftp"] = _seconds_until_closed(sock, b"USER someone-typing-slowly", limit_s)

    def probe_slow() -> None:
        with socket.create_connection((HOST, probe_port), timeout=5) as sock:
            sock.sendall(b"C")
            results["probe"] = _seconds_until_closed(sock, os.urandom(64), limit_s)

    def http_authed_keeps_its_connection() -> None:
        token = base64.b64encode(f"{guarded.user}:{guarded.password}".encode()).decode()
        conn = http.client.HTTPConnection(HOST, guarded.http_port, timeout=10)
        try:
            # the deadline counts from accept: one wait past it shows an authorized connection outlives it,
            # and the requests after it that the connection keeps serving
            for wait_s in (http_server.AUTH_DEADLINE_S + 2, 0):
                conn.request("GET", "/f/files/ok.bin", headers={"Authorization": f"Basic {token}"})
                resp = conn.getresponse()
                assert resp.read() == b"ok" * 1000
                time.sleep(wait_s)
            conn.request("GET", "/f/files/ok.bin", headers={"Authorization": f"Basic {token}"})
            results["http_authed"] = conn.getresponse().status == 200 and conn.sock is not None
        finally:
            conn.close()

    def ftp_authed_keeps_its_connection() -> None:
        with _ftp(guarded) as ftp:
            time.sleep(ftp_server.AUTH_DEADLINE_S + 2)
            results["ftp_authed"] = ftp.voidcmd("NOOP").startswith("200")

    def http_stalled_upload() -> None:
        with socket.create_connection((HOST, guarded.http_port), timeout=5) as sock:
            token = base64.b64encode(f"{guarded.user}:{guarded.password}".encode())
            sock.sendall(
                b"PUT /f/incoming/stalled.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + token
                + b"\r\nContent-Length: 10000000\r\n\r\n" + b"s" * 100_000
            )
            start = time.monotonic()
            sock.settimeout(limit_s)
            try:
                answer = sock.recv(4096)  # the answer (or the close) is what ends the wait
            except OSError:
                answer = b""
            results["stalled"] = time.monotonic() - start
            results["stalled_answer"] = answer.split(b"\r\n", 1)[0].decode(errors="replace")

    jobs = [http_slow, ftp_slow, probe_slow, http_authed_keeps_its_connection, ftp_authed_keeps_its_connection,
            http_stalled_upload]
    threads = [threading.Thread(target=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=limit_s + 20)
    assert results["http"] < http_server.AUTH_DEADLINE_S + 3, results
    assert results["ftp"] < ftp_server.AUTH_DEADLINE_S + 3, results
    assert results["probe"] < tcpprobe.HANDSHAKE_TIMEOUT + 3, results
    assert results["http_authed"] is True and results["ftp_authed"] is True, results
    assert http_server.UPLOAD_STALL_S - 1 < results["stalled"] < http_server.UPLOAD_STALL_S + 5, results
    assert " 408 " in str(results["stalled_answer"]), results
    assert not list((guarded.root / "incoming").glob("*stalled*")), "the stalled upload's part file was left"


# ------------------------------------------------------------------ the confinement API itself


@pytest.mark.parametrize("use_openat2", [True, False])
def test_served_root_both_resolvers_refuse_the_same_things(far: Far, use_openat2: bool) -> None:
    """openat2 where the kernel has it, the O_NOFOLLOW walk elsewhere: the same answers."""
    _plant(far)
    with ServedRoot(far.root, use_openat2=use_openat2) as served:
        os.close(served.open_file("files/ok.bin", os.O_RDONLY))
        for rel in ("link_file", "link_dir/secret.txt", "files/link_up", "hard", "fifo", "../canary/secret.txt",
                    "/etc/passwd", "files/./ok.bin", "files//ok.bin", "a\x00b", ".", "incoming/a.part"):
            with pytest.raises(OSError):
                os.close(served.open_file(rel, os.O_RDONLY))
        with pytest.raises(OSError):
            served.mkdirs("link_dir/sub9")
        with pytest.raises(OSError):
            os.close(served.open_file("files/new", os.O_WRONLY | os.O_CREAT))  # O_CREAT without O_EXCL
    assert not (far.canary / "sub9").exists()
