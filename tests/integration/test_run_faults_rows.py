"""`workbench run` end to end when copies go wrong on real servers: a file changed on the far host after the
manifest was made, and a connection lost in the middle of a row. Each row says what happened, the run
goes on, every finished row is in the database and the exit code says rows failed (8)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

from tests.far_host import (
    HOST,
    FarHost,
    bytes_read,
    saved_rows,
    settle_serve,
    start_workbench,
    wait_for,
    with_program,
)
from tests.helpers import free_port
from tests.schema_check import assert_valid_run_document
from tests.serve_fixtures import ServeRunner
from workbench.core.store import Store
from workbench.server.daemons import supervisor
from workbench.shared.errors import ExitCode

FAST = ["--repeat", "1", "--warmup", "0", "--tcp-duration", "1"]


def _serve_args(runner: ServeRunner) -> list[str]:
    return [
        "--target",
        str(runner.ctx.state_dir / "target.json"),
        "--credentials",
        str(runner.ctx.state_dir / "credentials.json"),
    ]


def test_a_file_changed_on_the_far_host_after_the_manifest_is_not_verified(
    served: ServeRunner, tmp_path: Path
) -> None:
    doc_path, db = tmp_path / "run.json", tmp_path / "runs.sqlite"
    # a size no other test uses: serve heals the file at its next run, but no other test shares it
    proc = start_workbench(
        "run",
        *_serve_args(served),
        "--protocols",
        "http/aiohttp,ftp/ftplib",
        "--sizes",
        "300K",
        *FAST,
        "--files",
        str(tmp_path / "files"),
        "--db",
        str(db),
        "--json",
        str(doc_path),
        home=tmp_path / "home",
    )
    assert proc.stdout is not None
    seen = ""
    while "measuring the raw TCP limit" not in seen:  # printed once both hosts made their files
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    served_file = served.ctx.root / "files" / "file-300K.bin"
    assert "measuring the raw TCP limit" in seen and served_file.stat().st_size == 300 << 10, seen
    # the copies start after the baseline (1 s each way): change one byte the far host will serve
    with open(served_file, "r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))
    rest, err = proc.communicate(timeout=240)
    assert proc.returncode == ExitCode.ROWS_FAILED, seen + rest + err
    assert "Traceback" not in err
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    rows = {(r["client"], r["direction"]): r for r in doc["results"]}
    assert set(rows) == {(c, d) for c in ("aiohttp", "ftplib") for d in ("upload", "download")}
    for client in ("aiohttp", "ftplib"):
        down, up = rows[(client, "download")], rows[(client, "upload")]
        assert down["verified"] is False and "verification failed" in down["error"], down
        assert [s["verified"] for s in down["samples"]] == [False]
        assert up["verified"] is True and up["error"] is None  # uploads send the client's intact copy
    with Store(db) as store:  # the database holds the same verdicts as the JSON
        stored = {(r.client, r.direction): r for r in store.load(doc["run"]["id"]).results}
    assert stored[("aiohttp", "download")].verified is False and stored[("ftplib", "upload")].verified is True
    rows_shown = [ln for ln in rest.splitlines() if ln.startswith("│")]  # table rows, not the verdict under it
    table = [ln for ln in rows_shown if " down " in ln and ("aiohttp" in ln or "ftplib" in ln)]
    assert len(table) == 2 and all("failed" in ln for ln in table), rest  # the summary says so too


def test_servers_up_target_names_every_port(tmp_path: Path) -> None:
    """What `run --target` reads after `servers up` must name sshd's port, however late serve finishes starting."""
    root, state_dir = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    ports = {s: free_port(HOST) for s in ("http", "ftp", "tcp", "iperf3", "ssh")}
    supervisor.up(root, HOST, state_dir, only=["serve", "sshd"], ports=ports)
    try:
        settle_serve(ports)  # serve's last start-up step is its iperf3; it used to rewrite target.json after it
        written = json.loads((state_dir / "target.json").read_text())["ports"]
    finally:
        supervisor.down(state_dir)
    assert {k: written.get(k) for k in ports} == ports


def test_a_connection_lost_mid_row_fails_that_row_and_the_run_goes_on(far_host: FarHost, tmp_path: Path) -> None:
    doc_path, db = tmp_path / "run.json", tmp_path / "runs.sqlite"
    proc = start_workbench(
        "run",
        *far_host.run_args(),
        "--protocols",
        "sftp/paramiko,http/aiohttp",
        "--sizes",
        "16M",
        "--small",
        "10x4K",
        "--repeat",
        "2",
        "--warmup",
        "0",
        "--tcp-duration",
        "1",
        "--files",
        str(tmp_path / "files"),
        "--db",
        str(db),
        "--json",
        str(doc_path),
        home=tmp_path / "home",
    )
    killed: list[int] = []
    try:
        # the first row copies 16 MiB twice over paramiko; once its sftp-server has moved 4 MiB, the
        # server side of the connection dies (as a crashed session or a dropped link would)
        def mid_copy() -> bool:
            servers = with_program("sftp-server", far_host.sessions())
            return any(bytes_read(pid) >= 4 << 20 for pid in servers)

        wait_for("an sftp copy under way", mid_copy, proc)
        assert saved_rows(db) == 0  # still inside the first row
        killed = far_host.sessions()
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert killed
    assert proc.returncode == ExitCode.ROWS_FAILED, out + err
    assert "Traceback" not in err
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    results = doc["results"]
    order = [(r["client"], r["direction"], r["file_set"]) for r in results]
    expected = [(c, d, s) for c in ("paramiko", "aiohttp") for d in ("upload", "download") for s in ("16M", "10x4K")]
    assert order == expected
    first, later = results[0], results[1:]
    assert first["error"] and first["verified"] is False, first
    assert first["samples"][-1]["error"] == first["error"]  # the copy that broke is kept, marked
    for row in later:  # after the reconnect: the same client's later rows, then the next client
        assert row["error"] is None and row["verified"] is True, row
    with Store(db) as store:
        stored = store.load(doc["run"]["id"]).results
    assert [(r.client, r.direction, r.file_set, r.error) for r in stored] == [
        (r["client"], r["direction"], r["file_set"], r["error"]) for r in results
    ]


def test_the_next_run_removes_the_uploads_of_a_killed_run_and_spares_a_live_one(
    served: ServeRunner, tmp_path: Path
) -> None:
    from workbench.core.farhost import ServedFarHost
    from workbench.core.runner import remove_left_by_killed_runs
    from workbench.shared import procs

    target = served.target()
    dead_pid = 1 << 22  # above Linux's largest pid_max (4,194,304 is the limit itself): never a live process
    here = {"host": target.host, "ports": dict(target.ports)}
    owners = {
        "killed": {"pid": dead_pid, "start_ticks": 1},
        "live": {"pid": os.getpid(), "start_ticks": procs.start_ticks(os.getpid())},
    }
    control = ServedFarHost(target)
    with Store(tmp_path / "runs.sqlite") as store:
        ids = {}
        for name, owner in owners.items():
            meta = {"target": here, "upload_token": f"{name}0123", "owner": owner}
            ids[name] = store.begin_run(meta)
            control.mkdir(f"incoming/run-{ids[name]}-{name}0123/http-aiohttp-1M")
        remove_left_by_killed_runs(store, control)
        metas = dict(store.unfinished_runs())
    incoming = served.ctx.root / "incoming"
    assert not (incoming / f"run-{ids['killed']}-killed0123").exists()
    assert (incoming / f"run-{ids['live']}-live0123" / "http-aiohttp-1M").is_dir()
    assert metas[ids["killed"]].get("upload_removed") is True and "upload_removed" not in metas[ids["live"]]
    control.delete(f"incoming/run-{ids['live']}-live0123")
    control.close()
