"""Server lifecycle on the far host: `down` stops exactly what `up` started (never a reused pid, also the
group of a leader that died), serve's iperf3 dies with serve, and `serve`/`servers up` refuse layouts that
would serve their own state. Real processes and real servers on 127.0.0.1; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers import free_port
from workbench.server.daemons import supervisor
from workbench.shared import procs
from workbench.shared.errors import UnavailableError, UsageError
from workbench.shared.net import port_open

HOST = "127.0.0.1"
needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed")


def _ports() -> dict[str, int]:
    return {s: free_port(HOST) for s in ("http", "ftp", "tcp", "iperf3")}


def _wait_until(check, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _reap(pid: int) -> None:
    """Collect a child of this test process so its pid stops being a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    root.mkdir()
    return root, tmp_path / "state"


# ------------------------------------------------------------------ identity recorded and checked


def test_up_records_identity_and_down_stops_it(layout: tuple[Path, Path]) -> None:
    root, state = layout
    started = supervisor.up(root, HOST, state, only=["serve"], ports=_ports())
    try:
        record = json.loads((state / "servers.json").read_text())["servers"][0]
        pid = record["pid"]
        assert record["start_ticks"] == procs.start_ticks(pid)
        assert record["cmdline"] == procs.cmdline(pid) and "serve" in record["cmdline"]
        assert record["pgid"] == os.getpgid(pid)
        assert "running" in supervisor.status(state)[0]
    finally:
        lines = supervisor.down(state)
    assert started.servers[0]["pid"] == pid
    assert "stopped" in lines[0]
    _reap(pid)
    assert not procs.pid_alive(pid)


def test_a_server_found_unavailable_at_start_is_marked_and_the_others_serve(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.server.daemons.rsyncd import Rsyncd

    def no_acls(self: Rsyncd) -> None:  # stands for a root on a file system without POSIX ACLs
        raise UnavailableError("the served root's file system has no POSIX ACLs", "serve a root on ext4 or tmpfs")

    monkeypatch.setattr(Rsyncd, "prepare", no_acls)
    root, state = layout
    ports = {**_ports(), "rsync": free_port(HOST)}
    started = supervisor.up(root, HOST, state, only=["serve", "rsyncd"], ports=ports)
    try:
        by_name = {s["name"]: s for s in started.servers}
        assert "no POSIX ACLs" in by_name["rsyncd"]["unavailable"]
        assert procs.pid_alive(by_name["serve"]["pid"]) and port_open(HOST, ports["http"])
        assert any("rsyncd" in line and "unavailable" in line for line in supervisor.status(state))
    finally:
        supervisor.down(state)


@pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="sshd not installed")
def test_sshd_rewriting_its_command_line_is_still_recognised(layout: tuple[Path, Path]) -> None:
    import socket

    root, state = layout
    port = free_port(HOST)
    supervisor.up(root, HOST, state, only=["sshd"], ports={"ssh": port})
    record = json.loads((state / "servers.json").read_text())["servers"][0]
    pid = record["pid"]
    try:
        # connections still in pre-authentication change sshd's title ("[listener] 2 of 10-100 startups"). Two
        # of them: the record may already count one, `up`'s own port check, if sshd had not yet retired it.
        with socket.create_connection((HOST, port), timeout=5) as conn, socket.create_connection(
            (HOST, port), timeout=5
        ) as second:
            conn.recv(64)  # the banners: both connections are accepted and counted
            second.recv(64)
            assert _wait_until(lambda: procs.cmdline(pid) != record["cmdline"], 5), procs.cmdline(pid)
            assert "running" in supervisor.status(state)[0]
            lines = supervisor.down(state)
    finally:
        supervisor.down(state)
        _reap(pid)
    assert lines[0].split()[1] == "stopped", lines
    assert not procs.pid_alive(pid)


def _fake_state(state: Path, record: dict) -> None:
    state.mkdir(mode=0o700, exist_ok=True)
    doc = {"bind": HOST, "root": "/nonexistent", "netns": None, "servers": [{"name": "serve", "ports": {}, **record}]}
    (state / "servers.json").write_text(json.dumps(doc))


def test_down_never_signals_a_reused_pid(tmp_path: Path) -> None:
    # An unrelated process that now holds the recorded pid: same pid, another start time and argv.
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        pid = bystander.pid
        real_start = procs.start_ticks(pid)
        assert real_start is not None
        state = tmp_path / "state"
        _fake_state(
            state,
            {"pid": pid, "pgid": pid, "start_ticks": real_start - 1, "cmdline": [sys.executable, "-m", "workbench"]},
        )
        status = supervisor.status(state)
        assert "DEAD" in status[0] and "now another process" in status[0]
        lines = supervisor.down(state)
        assert f"pid {pid} is now another process; not signalled" in lines[0]
        assert bystander.poll() is None, "down signalled a process it did not start"
        # same start time but another command line is not the server either
        _fake_state(state, {"pid": pid, "pgid": pid, "start_ticks": real_start, "cmdline": ["sshd", "-D"]})
        assert "not signalled" in supervisor.down(state)[0]
        assert bystander.poll() is None
        # nor may `up` think the servers still run because the pid exists
        _fake_state(state, {"pid": pid, "pgid": pid, "start_ticks": real_start - 1, "cmdline": ["x"]})
        assert not any(supervisor._running(s) for s in supervisor.read_state(state).servers)  # type: ignore[union-attr]
    finally:
        bystander.kill()
        bystander.wait()


def test_down_stops_the_group_of_a_leader_that_died(tmp_path: Path) -> None:
    # A leader with a child in its process group, like serve and its iperf3; the leader is SIGKILLed.
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    ident = procs.identity(leader.pid)
    assert ident is not None
    state = tmp_path / "state"
    _fake_state(state, {"pid": leader.pid, "pgid": leader.pid, **ident})
    try:
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait()
        assert procs.pid_alive(child), "the child should outlive its leader for this test"
        assert "DEAD" in supervisor.status(state)[0]
        lines = supervisor.down(state)
        assert "stopped 1 process" in lines[0], lines
        assert _wait_until(lambda: not procs.pid_alive(child), 3)
    finally:
        with_suppress_kill(child)


def with_suppress_kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------ iperf3 dies with serve


@needs_iperf3
def test_iperf3_dies_with_a_sigkilled_serve_and_down_leaves_nothing(layout: tuple[Path, Path]) -> None:
    root, state = layout
    ports = _ports()
    supervisor.up(root, HOST, state, only=["serve"], ports=ports)
    record = json.loads((state / "servers.json").read_text())["servers"][0]
    pid, pgid = record["pid"], record["pgid"]
    try:
        # serve starts iperf3 after its own listeners, so `up` may return a moment before it listens
        assert _wait_until(lambda: port_open(HOST, ports["iperf3"]), 10), "serve did not start its iperf3"
        iperf = [p for p in procs.in_group(pgid) if p != pid]
        assert iperf and all("iperf3" in (procs.cmdline(p) or [""])[0] for p in iperf)
        os.kill(pid, signal.SIGKILL)
        assert _wait_until(lambda: not port_open(HOST, ports["iperf3"]), 2.0), "iperf3 outlived serve"
        assert "DEAD" in supervisor.status(state)[0]
    finally:
        supervisor.down(state)
        _reap(pid)
    assert not procs.in_group(pgid)
    for port in ports.values():
        assert not port_open(HOST, port)


# ------------------------------------------------------------------ refused layouts


def test_root_of_slash_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="whole file system") as exc:
        supervisor.up(Path("/"), HOST, tmp_path / "state", only=["serve"])
    assert exc.value.hint
    assert not (tmp_path / "state").exists()


def test_root_containing_the_state_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="contains the state directory"):
        supervisor.up(tmp_path, HOST, tmp_path / "state", only=["serve"])
    with pytest.raises(UsageError, match="contains the state directory"):
        supervisor.up(tmp_path, HOST, tmp_path, only=["serve"])
    assert not (tmp_path / "files").exists(), "nothing may be written before the refusal"


def test_root_inside_the_state_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "sshd").mkdir(parents=True, mode=0o700)
    with pytest.raises(UsageError, match="inside the state directory"):
        supervisor.up(state / "sshd", HOST, state, only=["serve"])


def _workbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, WORKBENCH_HOME=str(tmp_path / "home"))
    env.pop("WORKBENCH_PASSWORD", None)
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )


def _one_line_refusal(done: subprocess.CompletedProcess[str], words: str) -> None:
    text = (done.stdout + done.stderr).strip()
    assert done.returncode == 2, text
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    assert words in text, text


def test_serve_refuses_credentials_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    creds = root / "c.json"
    state = str(tmp_path / "s")
    done = _workbench(tmp_path, "serve", "--root", str(root), "--state-dir", state, "--credentials", str(creds))
    _one_line_refusal(done, "contains the credentials file")
    assert not creds.exists() and not (root / "files").exists()


def test_state_dir_open_to_others_is_refused(layout: tuple[Path, Path]) -> None:
    root, state = layout
    state.mkdir(mode=0o700)
    os.chmod(state, 0o755)
    with pytest.raises(UsageError, match="open to others") as exc:
        supervisor.up(root, HOST, state, only=["serve"])
    assert exc.value.hint == f"chmod 700 {state}"
    done = _workbench(root.parent, "serve", "--root", str(root), "--state-dir", str(state), "--http-port", "0")
    _one_line_refusal(done, "open to others")


def test_state_dir_of_another_user_is_refused(layout: tuple[Path, Path]) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    root, state = layout
    state.mkdir(mode=0o700)
    os.chown(state, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to uid 65534"):
        supervisor.up(root, HOST, state, only=["serve"])


def test_missing_state_dir_is_created_private(layout: tuple[Path, Path]) -> None:
    root, state = layout
    supervisor.up(root, HOST, state, only=["serve"], ports=_ports())
    try:
        assert state.stat().st_mode & 0o777 == 0o700
    finally:
        pid = json.loads((state / "servers.json").read_text())["servers"][0]["pid"]
        supervisor.down(state)
        _reap(pid)


def test_cli_refusal_is_one_line(tmp_path: Path) -> None:
    done = _workbench(tmp_path, "servers", "up", "--root", "/", "--state-dir", str(tmp_path / "s"))
    _one_line_refusal(done, "whole file system")
    done = _workbench(tmp_path, "serve", "--root", str(tmp_path), "--state-dir", str(tmp_path / "s"))
    _one_line_refusal(done, "contains the state directory")


# ------------------------------------------------------------------ a SIGKILLed lab leaves nothing


def _lab_reason() -> str | None:
    try:
        from workbench.lab import check_available

        check_available()
    except Exception as exc:  # any reason the lab cannot run here is a reason to skip
        return str(exc)
    if shutil.which("sshfs") is None or not os.path.exists("/dev/fuse"):
        return "sshfs/FUSE missing"
    return None


def _owned_mounts(owner: int) -> list[str]:
    from workbench.protocols.mounts import stale

    return [p for p, _ in stale.mounts() if stale.owner_of(p) == owner]


def _lab_dirs(owner: int) -> list[Path]:
    from workbench.lab.leftovers import LAB_DIR_PREFIX, lab_dir_owner

    base = Path(tempfile.gettempdir())
    return [p for p in base.iterdir() if p.name.startswith(LAB_DIR_PREFIX) and lab_dir_owner(p) == owner]


@pytest.mark.lab
@pytest.mark.skipif(_lab_reason() is not None, reason=f"lab unavailable: {_lab_reason()}")
def test_a_sigkilled_lab_is_cleaned_by_the_next(tmp_path: Path) -> None:
    from workbench.lab import cleanup_stale, netns
    from workbench.lab.lifecycle import _forwarder_pids
    from workbench.protocols.mounts import stale

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(repo)}
    env.pop("WORKBENCH_PASSWORD", None)
    # a slow link keeps the sshfs mount up long enough to be caught mid-copy
    argv = [sys.executable, "-m", "workbench", "lab", "--protocols", "sftp/sshfs", "--sizes", "4M", "--rate", "40mbit"]
    # nothing before the copy is read: the shortest probe, no iperf3 cross-check, no goodput meter
    argv += ["--small", "none", "--repeat", "1", "--warmup", "0", "--tcp-duration", "0.25", "--skip-iperf3"]
    argv += ["--goodput-duration", "0"]
    log = open(tmp_path / "lab.log", "wb")  # noqa: SIM115 -- closed in finally
    lab = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=repo)
    try:
        assert _wait_until(lambda: bool(_owned_mounts(lab.pid)) or lab.poll() is not None, 180), "no mount in time"
        assert lab.poll() is None, (tmp_path / "lab.log").read_text()[-2000:]
        os.kill(lab.pid, signal.SIGKILL)
        lab.wait()
        # what the killed lab left (so the checks below can fail)
        namespaces = [n for n in netns.lab_namespaces() if netns.owner_of(n) == lab.pid]
        dirs = _lab_dirs(lab.pid)
        mounts = _owned_mounts(lab.pid)
        assert namespaces and dirs and mounts
        # The namespace cleanup SIGTERMs sshfs, which then unmounts itself; an sshfs killed outright (OOM,
        # kill -9) leaves a dead mount (ENOTCONN) that only an unmount removes: make that the case here.
        for pid in procs.with_argument(mounts[0]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert _wait_until(lambda: not procs.with_argument(mounts[0]), 5)
        assert mounts[0] in _owned_mounts(lab.pid), "a SIGKILLed sshfs should leave its mount behind"
        recorded = json.loads((dirs[0] / "state" / "servers.json").read_text())["servers"]
        server_pids = [(s["pid"], s["start_ticks"]) for s in recorded if s.get("pid")]
        removed = cleanup_stale()
        assert any("mount" in r for r in removed) and any("namespace" in r for r in removed), removed
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
        log.close()
        cleanup_stale()
    assert not [n for n in netns.lab_namespaces() if netns.owner_of(n) == lab.pid]
    assert not _owned_mounts(lab.pid)
    assert not [f for f, owner in _forwarder_pids().items() if owner == lab.pid], "the emulator survived"
    assert not _lab_dirs(lab.pid), "the lab's root, keys or uploads survived"
    assert not [p for p in Path(tempfile.gettempdir()).iterdir() if stale.owner_of(p) == lab.pid]
    for pid, start in server_pids:
        assert not procs.same_process(pid, start, None) or not procs.pid_alive(pid), f"server pid {pid} survived"


def test_only_a_dead_owners_temporary_files_are_removed(tmp_path: Path) -> None:
    from workbench.protocols.mounts import stale

    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names no process
    dead = tmp_path / f"workbench-dl-{gone.pid}-abcd_123"
    live = tmp_path / f"workbench-cifs-cred-{os.getpid()}-abcd_123"
    ownerless = tmp_path / "workbench-dl-12345678"  # an old name whose random part is all digits: no owner
    other = tmp_path / f"something-{gone.pid}-abcd_123"
    for path in (dead, live, ownerless, other):
        (path / "sub").mkdir(parents=True)
        (path / "sub" / "secret").write_text("x")
    assert stale.owner_of(live) == os.getpid() and stale.owner_of(ownerless) is None
    assert stale.owner_of(tmp_path / "workbench-sshfs-log-77-abcdefgh") == 77
    dead_lab = tmp_path / f"workbench-lab-{gone.pid}-abcd_123"  # names a dead lab's servers: the next lab's to clean
    (dead_lab / "state").mkdir(parents=True)
    removed = stale.remove_stale_temp(tmp_path, keep_kinds=("lab",))
    assert removed == [f"temporary {dead}"]
    assert not dead.exists() and live.exists() and ownerless.exists() and other.exists() and dead_lab.exists()
