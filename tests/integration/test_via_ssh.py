"""`workbench run --via-ssh`: a real sshd on 127.0.0.1 that lets this user log in with a key and run commands (the
far host is this machine, its `workbench` this venv's); the run starts the far servers over SSH, copies, and
leaves nothing running, also on Ctrl-C; an unknown host key and a missing far workbench are one line each."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.far_host import REPO, saved_rows
from tests.helpers import started_by_this_worker
from tests.ssh_login import HOST, REMOTE_WORKBENCH, LoginHost
from workbench.shared.errors import ExitCode

PLAN = ["--protocols", "http", "--sizes", "1M", "--repeat", "1", "--warmup", "0"]
PLAN += ["--tcp-duration", "1", "--skip-iperf3"]  # no figure of iperf3 is read


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """`workbench run ARGS` in its own process group (so a test can Ctrl-C it as a terminal would)."""
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    env["TMPDIR"] = str(_local_tmp(tmp_path))  # this side's key directory goes here (ssh does not pass it on)
    argv = [sys.executable, "-m", "workbench", "run", *args]
    # A shell starting the tests in the background hands its children SIGINT ignored: a terminal's run has it.
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _local_tmp(tmp_path: Path) -> Path:
    path = tmp_path / "local-tmp"
    path.mkdir(exist_ok=True)
    return path


def _over_ssh_processes() -> list[str]:
    """Command lines of far-side processes a --via-ssh run of this test worker starts: `servers over-ssh` and its
    servers."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if ("over-ssh" in cmd or "workbench-over-ssh-" in cmd) and started_by_this_worker(int(pid)):
            found.append(f"{pid}: {cmd}")
    return found


def _state_dir(output: str) -> Path:
    found = re.search(r"state (/\S+workbench-over-ssh-[^\s)]+)", output)
    assert found, output
    return Path(found.group(1))


def test_run_via_ssh_measures_and_leaves_nothing(login_host: LoginHost, tmp_path: Path) -> None:
    doc_path = tmp_path / "run.json"
    args = ("--via-ssh", "farbox", "--remote-workbench", REMOTE_WORKBENCH, "--json", str(doc_path))
    proc = _start(tmp_path, *args, *PLAN)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    doc = json.loads(doc_path.read_text())
    rows = [(r["client"], r["direction"]) for r in doc["results"] if r["protocol"] == "http"]
    assert {d for _, d in rows} == {"upload", "download"}, doc["results"]
    assert all(r["verified"] and r["median_bytes_per_s"] > 0 for r in doc["results"]), doc["results"]
    assert saved_rows(tmp_path / "home" / "runs.sqlite") == len(doc["results"])
    # the far servers' ports came over SSH, not the defaults (so they are the ones this run started)
    assert doc["run"]["target"]["host"] == HOST and doc["run"]["target"]["ports"]["http"] != 8181
    assert list(_local_tmp(tmp_path).glob("workbench-via-ssh-*")) == []  # the far host's keys, held here
    state = _state_dir(out + err)
    assert not state.exists(), f"the far side left {state}"
    assert _over_ssh_processes() == []


def test_unknown_host_key_is_one_line(login_host: LoginHost, tmp_path: Path) -> None:
    login_host.known_hosts.write_text("")
    proc = _start(tmp_path, "--via-ssh", "farbox", "--remote-workbench", REMOTE_WORKBENCH, *PLAN)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.AUTH, out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "host key" in lines[0] and "ssh farbox" in lines[0], err
    assert _over_ssh_processes() == []
    # --insecure-host-keys logs in all the same: this time it is the far workbench that is missing
    proc = _start(
        tmp_path, "--via-ssh", "farbox", "--remote-workbench", "/nonexistent/wb", "--insecure-host-keys", *PLAN
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.NOT_FOUND, out + err


def test_missing_far_workbench_names_the_install(login_host: LoginHost, tmp_path: Path) -> None:
    proc = _start(tmp_path, "--via-ssh", "farbox", "--remote-workbench", "/nonexistent/workbench", *PLAN)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.NOT_FOUND, out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install filecopy-workbench" in lines[0], err


def test_via_ssh_with_target_is_a_usage_error(tmp_path: Path) -> None:
    proc = _start(tmp_path, "--via-ssh", "farbox", "--target", str(tmp_path / "t.json"), *PLAN)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.USAGE, out + err
    assert "--via-ssh and --target" in err


def test_ctrl_c_brings_the_far_host_down(login_host: LoginHost, tmp_path: Path) -> None:
    # curl: a Ctrl-C landing inside an aiohttp copy may end as a failed row instead of an interrupted run
    plan = [
        "--protocols",
        "http/curl",
        "--sizes",
        "64M",
        PLAN[4],
        "3",
        *PLAN[6:],
    ]  # long enough to be inside the copies
    proc = _start(tmp_path, "--via-ssh", "farbox", "--remote-workbench", REMOTE_WORKBENCH, *plan)
    db = tmp_path / "home" / "runs.sqlite"
    deadline = time.monotonic() + 60
    while saved_rows(db) < 1:  # a row saved: the far servers are up and the copies are under way
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    assert any("workbench-over-ssh-" in p for p in _over_ssh_processes())
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, out + err
    state = _state_dir(out + err)
    assert not state.exists(), f"the far side left {state}"
    assert _over_ssh_processes() == []
    assert list(_local_tmp(tmp_path).glob("workbench-via-ssh-*")) == []


def test_killed_run_still_brings_the_far_host_down(login_host: LoginHost, tmp_path: Path) -> None:
    """SIGKILL leaves no cleanup code to run here: the far side ends everything once its SSH stdin ends."""
    proc = _start(tmp_path, "--via-ssh", "farbox", "--remote-workbench", REMOTE_WORKBENCH, *PLAN[:3], "64M", *PLAN[4:])
    deadline = time.monotonic() + 60
    while not (found := re.search(r"/\S*workbench-over-ssh-[^/\s]+", " ".join(_over_ssh_processes()))):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    state = Path(found.group(0))
    proc.kill()
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while (_over_ssh_processes() or state.exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _over_ssh_processes() == []
    assert not state.exists(), f"the far side left {state}"
