"""`workbench run URL` into a directory that already holds the user's own files never touches them.

The URL's directory on a real stock FTP server holds files of several modes, a hard link, links (relative,
absolute, dangling, to a folder), subfolders, and names the run itself uses inside its scratch directory
(`files`, `incoming`, `file-1M.bin`) or that look like a scratch directory (`workbench-<12 hex>`). Every
entry's type, mode, size, modification time, content hash and link target are the same afterwards, for a run
that finished, one whose server was killed mid-run (its rows fail), and one stopped mid-copy by SIGINT
(130), SIGTERM (143) or SIGHUP (129: a closed terminal) sent to the `workbench run` process group as a
terminal or a shell would send it: the interrupted runs remove their scratch directory too.
"""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.stock_urls import StockSite, workbench_argv
from workbench.shared.errors import ExitCode

SCRATCH_PREFIX = "workbench-"
LOOKALIKE = "workbench-0123456789ab"  # the shape of a scratch directory's name, but the user's


def _plant(data: Path) -> None:
    """The user's own files, links and folders, in the directory the URL names."""
    data.mkdir()
    (data / "notes.txt").write_text("the user's notes\n")
    (data / "notes.txt").chmod(0o640)
    (data / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    (data / "run.sh").chmod(0o755)
    (data / "read-only.bin").write_bytes(os.urandom(70_000))
    (data / "read-only.bin").chmod(0o444)
    (data / "file-1M.bin").write_bytes(os.urandom(4096))  # the name of the run's own test file
    os.link(data / "notes.txt", data / "notes-hardlink.txt")
    for name in ("files", "incoming", LOOKALIKE, "sub/deeper"):
        (data / name).mkdir(parents=True)
        (data / name / "keep.dat").write_bytes(os.urandom(1000))
    (data / "sub").chmod(0o700)
    (data / "empty").mkdir(mode=0o750)
    (data / "empty").chmod(0o750)
    (data / "link-rel").symlink_to("notes.txt")
    (data / "link-abs").symlink_to(data / "sub" / "deeper" / "keep.dat")
    (data / "link-dangling").symlink_to("no-such-file")
    (data / "link-dir").symlink_to("sub")
    (data / "sub" / "up").symlink_to("..")
    (data / "files" / "file-1M.bin").write_bytes(os.urandom(2048))
    os.utime(data / "notes.txt", ns=(1_000_000_000, 1_000_000_000))


def _tree(data: Path) -> dict[str, tuple[object, ...]]:
    """Everything below `data` (not following links): type, mode, size, mtime, inode links, content, target."""
    found: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(data, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(data))
            top = rel.split("/")[0]
            if top.startswith(SCRATCH_PREFIX) and top != LOOKALIKE:
                continue  # a run's scratch directory: checked on its own
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", st.st_mode, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", st.st_mode, st.st_mtime_ns)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[rel] = ("file", st.st_mode, st.st_size, st.st_mtime_ns, st.st_nlink, digest)
    return found


def _scratch_dirs(data: Path) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.name.startswith(SCRATCH_PREFIX) and p.name != LOOKALIKE)


@pytest.fixture
def planted(site: StockSite) -> tuple[Path, str, dict[str, tuple[object, ...]]]:
    site.start("ftp")
    data = site.root("ftp") / "data"
    _plant(data)
    before = _tree(data)
    assert len(before) >= 20 and LOOKALIKE in before and "link-dangling" in before
    return data, site.url("ftp") + "data", before


def _start(site: StockSite, tmp_path: Path, url: str, *plan: str) -> subprocess.Popen[str]:
    argv = workbench_argv("run", url, "--protocols", "ftp/ftplib", *plan)
    argv += ["--files", str(tmp_path / "files"), "--db", str(tmp_path / "runs.sqlite")]

    def as_from_a_terminal() -> None:
        # a shell that starts the tests in the background (or nohup) hands its children SIGINT or SIGHUP ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)

    return subprocess.Popen(
        argv,
        env=site.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell's job: the signal reaches its children too
        preexec_fn=as_from_a_terminal,
    )


def _wait_for_copies(data: Path, proc: subprocess.Popen[str]) -> str:
    """The scratch directory's name once a 32M upload lands in its incoming/: the copies are under way."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for scratch in _scratch_dirs(data):
            if any(p.name == "file-32M.bin" for p in (data / scratch / "incoming").rglob("*")):
                return scratch
        time.sleep(0.02)
    raise AssertionError("no upload landed in the scratch directory within 120 s")


LONG_RUN = ("--sizes", "1M,32M", "--repeat", "30", "--warmup", "0")


def test_a_finished_run_leaves_the_users_files_as_they_were(
    site: StockSite, tmp_path: Path, planted: tuple[Path, str, dict[str, tuple[object, ...]]]
) -> None:
    data, url, before = planted
    proc = _start(site, tmp_path, url, "--sizes", "1M", "--small", "4x4K", "--repeat", "1", "--warmup", "0")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:] + err
    assert _scratch_dirs(data) == []
    assert _tree(data) == before


def test_a_run_whose_server_dies_mid_copy_leaves_the_users_files_as_they_were(
    site: StockSite, tmp_path: Path, planted: tuple[Path, str, dict[str, tuple[object, ...]]]
) -> None:
    data, url, before = planted
    proc = _start(site, tmp_path, url, *LONG_RUN)
    try:
        _wait_for_copies(data, proc)
        server = site.servers["ftp"]
        assert server.proc is not None
        os.killpg(server.proc.pid, signal.SIGKILL)  # the server and its children, mid-copy
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode not in (0, None), out[-3000:] + err  # its rows failed
    assert "Traceback" not in err
    assert _tree(data) == before  # its scratch directory stays for a later run: the server could not remove it


@pytest.mark.parametrize(
    ("sig", "code", "words"),
    [
        (signal.SIGINT, ExitCode.INTERRUPTED, "interrupted"),
        (signal.SIGTERM, ExitCode.TERMINATED, "terminated"),
        (signal.SIGHUP, ExitCode.HANGUP, "hung up"),
    ],
)
def test_an_interrupted_run_removes_its_scratch_and_nothing_else(
    site: StockSite,
    tmp_path: Path,
    planted: tuple[Path, str, dict[str, tuple[object, ...]]],
    sig: signal.Signals,
    code: ExitCode,
    words: str,
) -> None:
    data, url, before = planted
    proc = _start(site, tmp_path, url, *LONG_RUN)
    try:
        scratch = _wait_for_copies(data, proc)
        os.killpg(proc.pid, sig)  # as a terminal (Ctrl-C, hangup) or a shell's `kill %1` sends it
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == code, out[-3000:] + err
    assert err.strip().splitlines()[-1] == words and "Traceback" not in err, err
    assert not (data / scratch).exists() and _scratch_dirs(data) == []
    assert _tree(data) == before
