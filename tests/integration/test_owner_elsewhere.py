"""A run's owner names its host and boot besides its pid and start time: two hosts sharing one data directory
(an NFS home, a bind mount) never take each other's live runs for killed ones. Another host's record is never
dead here (its leftovers stay, with a one-line note); this host's from an earlier boot always is; records
written before host and boot were kept are read as they always were. The same holds for the owner tag in
the temporary directory's names. Real processes stand for the owners; a real stock FTP server holds the
scratch directories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.stock_urls import StockSite, run_workbench, workbench_argv
from workbench.core.store import Store
from workbench.protocols.mounts import stale
from workbench.shared import procs

OTHER_HOST = "another-host.invalid"  # a name only: nothing connects to it


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)


def test_owner_state_of_each_kind_of_record() -> None:
    live = _sleeper()
    dead = _sleeper()
    dead.kill()
    dead.wait()
    try:
        mine = procs.owner_record(live.pid)
        assert mine["host"] == procs.hostname() and mine["boot_id"] == procs.boot_id() and mine["pid"] == live.pid
        assert procs.owner_state(mine) == procs.OWNER_ALIVE
        assert procs.owner_state(procs.owner_record()) == procs.OWNER_ALIVE  # this very process
        gone = {**procs.owner_record(dead.pid), "start_ticks": mine["start_ticks"]}
        assert procs.owner_state(gone) == procs.OWNER_DEAD
        # another host's run, dead or alive here, is never taken for dead
        assert procs.owner_state({**mine, "host": OTHER_HOST}) == procs.OWNER_ELSEWHERE
        assert procs.owner_state({**gone, "host": OTHER_HOST}) == procs.OWNER_ELSEWHERE
        # this host, an earlier boot: dead, even though a live process has that pid and start time now
        assert procs.owner_state({**mine, "boot_id": "an-earlier-boot"}) == procs.OWNER_DEAD
        # records from before host and boot were kept: pid and start time decide, as before
        old = {"pid": live.pid, "start_ticks": mine["start_ticks"]}
        assert procs.owner_state(old) == procs.OWNER_ALIVE
        assert procs.owner_state({"pid": dead.pid, "start_ticks": mine["start_ticks"]}) == procs.OWNER_DEAD
        assert procs.owner_state({}) == procs.OWNER_UNKNOWN and procs.owner_state(None) == procs.OWNER_UNKNOWN
    finally:
        live.kill()
        live.wait()


def _scratch_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("workbench-"))


def _killed_run(site: StockSite, tmp_path: Path, db: Path) -> str:
    """A run against the FTP server SIGKILLed mid-copy: the name of the scratch directory it left."""
    argv = workbench_argv(
        "run", site.url("ftp"), "--protocols", "ftp/ftplib", "--sizes", "32M", "--repeat", "30", "--warmup", "0"
    )
    argv += ["--files", str(tmp_path / "files"), "--db", str(db)]
    out = subprocess.PIPE
    proc = subprocess.Popen(argv, env=site.env(), stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    root = site.root("ftp")
    try:
        deadline = time.monotonic() + 120
        while not any((root / s / "incoming").exists() for s in _scratch_dirs(root)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    [left] = _scratch_dirs(root)
    return left


def _set_owner(db: Path, owner: dict[str, object]) -> None:
    with Store(db) as store:
        [(run_id, meta)] = store.unfinished_runs()
        meta["owner"] = {**meta["owner"], **owner}
        store.update_meta(run_id, meta)


def test_a_run_of_another_host_keeps_its_scratch_and_an_earlier_boots_loses_it(
    site: StockSite, tmp_path: Path
) -> None:
    site.start("ftp")
    db = tmp_path / "shared-home" / "runs.sqlite"
    left = _killed_run(site, tmp_path, db)
    with Store(db) as store:
        [(_, meta)] = store.unfinished_runs()
    assert meta["owner"]["host"] == procs.hostname() and meta["owner"]["boot_id"] == procs.boot_id()
    # the same run, as a host sharing this data directory recorded it: its pid means nothing here
    _set_owner(db, {"host": OTHER_HOST})
    args = ["--protocols", "ftp/ftplib", "--sizes", "1M", "--repeat", "1", "--warmup", "0", "--directions", "upload"]
    args += ["--files", str(tmp_path / "files"), "--db", str(db)]
    doc = tmp_path / "next.json"
    done = run_workbench(site, "run", site.url("ftp"), *args, "--json", str(doc))
    assert done.returncode == 0, done.stderr
    assert _scratch_dirs(site.root("ftp")) == [left]
    notes = [w for w in json.loads(doc.read_text())["warnings"] if "left alone" in w]
    assert len(notes) == 1 and OTHER_HOST in notes[0] and "\n" not in notes[0], notes
    # this host, but before a reboot: dead, even with its pid now held by a live process that started when
    # it says (a reboot restarts the clock the start time counts from)
    live = _sleeper()
    try:
        _set_owner(db, {"host": procs.hostname(), "boot_id": "an-earlier-boot", "pid": live.pid})
        _set_owner(db, {"start_ticks": procs.start_ticks(live.pid)})
        done = run_workbench(site, "run", site.url("ftp"), *args)
        assert done.returncode == 0, done.stderr
        assert _scratch_dirs(site.root("ftp")) == []
    finally:
        live.kill()
        live.wait()


def test_a_live_runs_record_without_host_or_boot_still_protects_it(site: StockSite, tmp_path: Path) -> None:
    # an older workbench's record: pid and start time only, naming a process that still runs
    site.start("ftp")
    db = tmp_path / "runs.sqlite"
    left = _killed_run(site, tmp_path, db)
    live = _sleeper()
    try:
        with Store(db) as store:
            [(run_id, meta)] = store.unfinished_runs()
            meta["owner"] = {"pid": live.pid, "start_ticks": procs.start_ticks(live.pid)}
            store.update_meta(run_id, meta)
        args = ("--protocols", "ftp/ftplib", "--sizes", "1M", "--repeat", "1", "--warmup", "0")
        done = run_workbench(site, "run", site.url("ftp"), *args, "--directions", "upload", "--db", str(db))
        assert done.returncode == 0, done.stderr
        assert _scratch_dirs(site.root("ftp")) == [left]
    finally:
        live.kill()
        live.wait()
    done = run_workbench(site, "run", site.url("ftp"), *args, "--directions", "upload", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert _scratch_dirs(site.root("ftp")) == []  # its owner gone now: removed


def test_temporary_names_of_another_host_stay_and_of_an_earlier_boot_go(tmp_path: Path) -> None:
    live = _sleeper()
    dead = _sleeper()
    dead.kill()
    dead.wait()
    here, other_host, other_boot = stale.owner_tag(), "a1b2c3" + stale.owner_tag()[6:], stale.owner_tag()[:6] + "d4e5f6"
    assert other_host != here and other_boot != here
    names = {
        f"workbench-sshfs-{live.pid}.{here}-abcdefgh": True,  # kept: alive here
        f"workbench-sshfs-{dead.pid}.{here}-abcdefgh": False,  # gone
        f"workbench-sshfs-{dead.pid}.{other_host}-abcdefgh": True,  # another host's: never gone from here
        f"workbench-cifs-cred-{live.pid}.{other_boot}-abcdefgh": False,  # an earlier boot's: gone
        f"workbench-sshfs-log-{live.pid}-abcdefgh": True,  # an older version's name, its owner alive
        f"workbench-sshfs-log-{dead.pid}-abcdefgh": False,
    }
    try:
        for name in names:
            (tmp_path / name).mkdir()
            (tmp_path / name / "f").write_text("x")
        assert stale.owned_prefix("sshfs").startswith(f"workbench-sshfs-{os.getpid()}.{here}-")
        assert stale.owner_gone(stale.owned_prefix("sshfs") + "abcdefgh") is False
        stale.remove_stale_temp(tmp_path)
        assert {n: (tmp_path / n).exists() for n in names} == names
    finally:
        live.kill()
        live.wait()
