"""workbench's afpd under `servers up`: it serves the root to the AFP client, keeps the password off every command
line and config file, and leaves no process and no mount behind however it ends (`servers down`, or its master
killed with SIGKILL), since the mounts it needs live only in its own mount namespace."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.contract.suite import Counter
from tests.helpers import free_port, write_random
from workbench.protocols.afp import AfpPythonClient
from workbench.server.daemons import supervisor
from workbench.server.daemons.afpd import Afpd
from workbench.shared import credentials, target
from workbench.shared.paths import CREDENTIALS_FILE, TARGET_FILE

HOST = "127.0.0.1"


def _mounts_under(path: Path) -> list[str]:
    """Mount points in this (the host's) mount table at or beneath `path`."""
    points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [p for p in points if p == str(path) or p.startswith(f"{path}/")]


def _mounted_ids(pid: str) -> set[tuple[int, int]]:
    """(device, inode) of the root of every mount in the mount namespace of process `pid`.

    The mount table names a bind mount's source by its path within its file system, which on a tmpfs /tmp
    lacks the /tmp; the mount point, reached through the process's own root, shows what is mounted there."""
    ids = set()
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")  # octal escapes such as \040 for a space
        try:
            st = os.stat(f"/proc/{pid}/root{point}")
        except OSError:
            continue
        ids.add((st.st_dev, st.st_ino))
    return ids


def _netatalk_pids_for(state_dir: Path) -> list[int]:
    """netatalk and afpd processes whose mount namespace holds this server's state folder (or a file of it)
    bound in."""
    ours = set()
    for path in [state_dir, *state_dir.rglob("*")]:
        with contextlib.suppress(OSError):  # a lock or log file may come and go meanwhile
            st = path.stat()
            ours.add((st.st_dev, st.st_ino))
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{entry}/comm").read_text().strip() not in ("netatalk", "afpd", "cnid_metad"):
                continue
            if _mounted_ids(entry) & ours:
                found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture
def up(tmp_path: Path):
    if reason := Afpd.unavailable_reason():
        pytest.skip(reason)
    root, state_dir = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    state = supervisor.up(root, HOST, state_dir, only=["afpd"], ports={"afp": free_port(HOST)})
    try:
        yield root, state_dir, state
    finally:
        supervisor.down(state_dir)


def test_servers_up_serves_afp_and_down_leaves_nothing(up, tmp_path: Path) -> None:
    root, state_dir, state = up
    (entry,) = [s for s in state.servers if s["name"] == "afpd"]
    creds = credentials.read(state_dir / CREDENTIALS_FILE)
    served = target.read(state_dir / TARGET_FILE, creds)
    data = write_random(tmp_path / "up.bin", 300_000)
    with AfpPythonClient(served) as client:
        client.mkdir("incoming/afp")
        client.upload(tmp_path / "up.bin", "incoming/afp/up.bin", Counter())
        client.download("incoming/afp/up.bin", tmp_path / "back.bin", Counter())
    assert (root / "incoming" / "afp" / "up.bin").read_bytes() == data == (tmp_path / "back.bin").read_bytes()
    # the password: in no command line, no config file; hashed once in the private shadow
    for pid in [entry["pid"], *_netatalk_pids_for(state_dir)]:
        assert creds.password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    for path in (state_dir / "afpd").rglob("*"):
        if path.is_file():
            assert creds.password.encode() not in path.read_bytes(), path
    assert "password" not in json.dumps(state.__dict__).lower()
    assert _netatalk_pids_for(state_dir), "no netatalk process holds this server's mounts"
    assert _mounts_under(state_dir) == [] and _mounts_under(root) == []  # never in the host's table
    supervisor.down(state_dir)
    assert _netatalk_pids_for(state_dir) == []


def test_a_killed_master_leaves_no_mount_and_down_stops_the_rest(up) -> None:
    root, state_dir, state = up
    (entry,) = [s for s in state.servers if s["name"] == "afpd"]
    os.kill(int(entry["pid"]), signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # reaped, as init reaps it once `servers up` has exited
        os.waitpid(int(entry["pid"]), 0)
    supervisor.down(state_dir)
    deadline = time.monotonic() + 10
    while _netatalk_pids_for(state_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _netatalk_pids_for(state_dir) == []
    assert _mounts_under(state_dir) == [] and _mounts_under(root) == []
