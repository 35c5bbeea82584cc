"""The fleet for real on one machine: `workbench lab --clients 3` logs in to three client namespaces over SSH (their
own sshds, host keys verified) and runs the plan on all of them at once against the lab's servers, across the one
shared emulated link. Also `run --via-ssh` between two lab hosts. Nothing is left running on any client."""

from __future__ import annotations

import functools
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

from tests.far_host import fleet_members, saved_rows, start_workbench, wait_for
from tests.helpers import lab_unavailable
from tests.lab.concurrent_labs import ConcurrentLabs, LabJob
from tests.schema_check import assert_valid_run_document
from workbench.lab import expected_goodput_bits_per_s, netns
from workbench.shared.errors import ExitCode

LINK_BITS_PER_S = 533e6  # wifi-ac
CLIENTS = [f"client{i}" for i in (1, 2, 3)]
# no figure of the baseline or of the link's own meter is read here: the shortest of each
PLAN = ["--link", "wifi-ac", "--directions", "download", "--small", "none", "--warmup", "0", "--tcp-duration", "0.5"]
PLAN += ["--skip-iperf3"]  # no figure of iperf3 is read
PLAN += ["--goodput-duration", "0"]


def _lab_reason() -> str | None:
    """Why the lab cannot run here, or why its client hosts cannot (they log in over OpenSSH), or None."""
    reason = lab_unavailable()
    if reason is not None:
        return reason
    if not os.path.exists("/usr/sbin/sshd") or shutil.which("ssh") is None:
        return "OpenSSH server or client not installed"
    return None


pytestmark = [pytest.mark.lab, pytest.mark.skipif(_lab_reason() is not None, reason=f"lab: {_lab_reason()}")]


def _nothing_left(lab_tmp: Path, owner: int) -> None:
    """Nothing of the lab run `owner` left: its fleet's members, namespaces, processes and TMPDIR (`lab_tmp`).
    Only its own namespaces count: other labs may run beside it (tests/lab/conftest.py, concurrent_lab)."""
    deadline = time.monotonic() + 30
    while fleet_members() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fleet_members() == []
    assert not [n for n in netns.lab_namespaces() if netns.owner_of(n) == owner]
    leftovers = subprocess.run(["pgrep", "-f", str(lab_tmp)], capture_output=True, text=True).stdout
    assert not leftovers.strip(), leftovers  # no server, sshd or session of this lab is left running
    assert list(lab_tmp.iterdir()) == []


def _fleet(tmp_path: Path, lab_tmp: Path, *args: str) -> subprocess.Popen:
    return start_workbench(
        "lab", "--clients", "3", *PLAN, *args, "--json", str(tmp_path / "fleet.json"),
        "--db", str(tmp_path / "runs.sqlite"), home=tmp_path / "home", tmp_dir=lab_tmp,
    )  # fmt: skip


def test_three_lab_clients_share_the_link_and_report_aggregate_and_own_rows(tmp_path: Path) -> None:
    lab_tmp = Path(tempfile.mkdtemp(prefix="wbt-"))  # short: smbd's socket paths must fit AF_UNIX's limit
    try:
        proc = _fleet(tmp_path, lab_tmp, "--protocols", "http/aiohttp,smb/pysmb", "--sizes", "16M", "--repeat", "2")
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-4000:] + err[-3000:]
        _nothing_left(lab_tmp, proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(lab_tmp, ignore_errors=True)
    doc = json.loads((tmp_path / "fleet.json").read_text())
    assert_valid_run_document(doc)
    assert doc["run"]["fleet"]["clients"] == CLIENTS and doc["run"]["fleet"]["failed_clients"] == {}
    goodput_bytes_per_s = expected_goodput_bits_per_s(int(LINK_BITS_PER_S), 1500) / 8
    by_label: dict[str, dict[str, dict]] = {}
    for row in doc["results"]:
        by_label.setdefault(f"{row['protocol']}/{row['client']}", {})[row["client_host"]] = row
    assert set(by_label) == {"http/aiohttp", "smb/pysmb"}
    for label, rows in by_label.items():
        assert set(rows) == {"all", *CLIENTS}, label
        agg = rows["all"]
        assert agg["aggregate"]["clients"] == CLIENTS
        assert len(agg["samples"]) == 2, agg  # two rounds, each with a window when all three copied
        for window, first_done in zip(agg["samples"], agg["aggregate"]["first_done_s"], strict=True):
            assert 0 < window["seconds"] <= first_done + 1e-6  # the window ends when the first client is done
        rate = agg["median_bytes_per_s"]
        assert rate <= LINK_BITS_PER_S / 8 * 1.02, (label, rate)  # the shared link bounds the total
        clients = [rows[c] for c in CLIENTS]
        assert all(r["verified"] and r["error"] is None and len(r["samples"]) == 2 for r in clients), clients
        # each client's rate is a share: three of them together are more than any one of them
        assert rate > max(r["median_bytes_per_s"] for r in clients), label
    http = by_label["http/aiohttp"]["all"]["median_bytes_per_s"]
    assert http >= 0.5 * goodput_bytes_per_s, http  # a busy 2-core machine only ever lowers it: bench/ says how close
    # pysmb: each client is bound by its own round trips (64 KiB × 1), so three of them carry about three times one
    pysmb = by_label["smb/pysmb"]
    assert pysmb["all"]["median_bytes_per_s"] >= 2 * min(pysmb[c]["median_bytes_per_s"] for c in CLIENTS)
    assert "×3" in out


FAILING = "test_a_lab_client_failing_mid_run_fails_its_rows_and_not_the_others"


def _kill_a_client_mid_run(tmp_path: Path) -> None:
    """The fleet run with one client's member SIGKILLed after every client's first row; its exit code checked and
    nothing of it left. Its JSON is in `tmp_path`."""
    lab_tmp = Path(tempfile.mkdtemp(prefix="wbt-"))
    # two rows each: once every client sent its 8M row, the 48M copies (about 2 s each at a third of the link) run
    proc = _fleet(tmp_path, lab_tmp, "--protocols", "http/aiohttp", "--sizes", "8M,48M", "--repeat", "3")
    try:
        wait_for("each client's first row", lambda: saved_rows(tmp_path / "runs.sqlite") >= 3, proc, timeout_s=300)
        victims = fleet_members()
        assert len(victims) == 3, victims
        os.kill(victims[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == ExitCode.ROWS_FAILED, out[-4000:] + err[-3000:]
        _nothing_left(lab_tmp, proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        shutil.rmtree(lab_tmp, ignore_errors=True)


def concurrent_lab_jobs(items: list[pytest.Item], tmp_path_factory: pytest.TempPathFactory) -> list[LabJob]:
    """The failing client's run, beside the other concurrent lab runs (tests/lab/conftest.py): it shows which rows
    fail and what is left, never a figure. The fleet of three clients measures the shared link: not here."""
    if not any(getattr(item, "originalname", "") == FAILING for item in items):
        return []
    folder = tmp_path_factory.mktemp("fleet-failing")
    return [LabJob("fleet failing client", folder, functools.partial(_kill_a_client_mid_run, folder))]


@pytest.mark.concurrent_lab
def test_a_lab_client_failing_mid_run_fails_its_rows_and_not_the_others(concurrent_labs: ConcurrentLabs) -> None:
    tmp_path, _ = concurrent_labs.result("fleet failing client")
    doc = json.loads((tmp_path / "fleet.json").read_text())
    assert_valid_run_document(doc)
    failed = doc["run"]["fleet"]["failed_clients"]
    assert len(failed) == 1, failed
    (victim,) = failed
    for row in doc["results"]:
        if row["client_host"] == victim:
            continue
        if row["client_host"] == "all":
            assert row["error"] is None  # made of the clients that copied
            continue
        assert row["error"] is None and row["verified"], row
    assert any(r["client_host"] == victim and r["error"] and "stopped" in r["error"] for r in doc["results"])


def test_run_via_ssh_between_two_lab_hosts(tmp_path: Path) -> None:
    """client1 runs `run --via-ssh client2`: the far servers start over SSH on client2 and bind the address the
    login arrived at (10.78.2.2); a known_hosts without client2's key is refused in one line."""
    from workbench.lab import PRESETS, Lab
    from workbench.lab.client_hosts import ClientHosts

    work = Path(tempfile.mkdtemp(prefix="wbt-"))
    plan = ["--protocols", "http/aiohttp", "--sizes", "4M", "--repeat", "1", "--warmup", "0", "--tcp-duration", "0.5"]
    plan += ["--skip-iperf3"]
    try:
        with Lab(PRESETS["wifi-ac"]) as lab, ClientHosts(lab, 2, work / "clients") as hosts:

            def run(config: Path) -> subprocess.CompletedProcess[str]:
                env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "WORKBENCH_SSH_CONFIG": str(config)}
                env.pop("WORKBENCH_PASSWORD", None)
                argv = ["ip", "netns", "exec", hosts.client("client1").namespace, sys.executable, "-m", "workbench"]
                argv += ["run", "--via-ssh", "client2", "--remote-workbench", hosts.remote_workbench, *plan]
                argv += ["--json", str(tmp_path / "via.json")]
                return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)

            done = run(hosts.ssh_config)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            doc = json.loads((tmp_path / "via.json").read_text())
            assert doc["run"]["target"]["host"] == hosts.client("client2").addr
            assert all(r["verified"] for r in doc["results"]), doc["results"]
            empty = work / "empty_known_hosts"
            empty.write_text("")
            strict = work / "strict_config"
            text = hosts.ssh_config.read_text()
            known = next(
                ln.split(None, 1)[1] for ln in text.splitlines() if ln.strip().startswith("UserKnownHostsFile")
            )
            strict.write_text(text.replace(known.strip(), str(empty)))
            refused = run(strict)
            assert refused.returncode == ExitCode.AUTH, refused.stdout + refused.stderr
            lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
            assert len(lines) == 1 and "host key" in lines[0], refused.stderr
    finally:
        shutil.rmtree(work, ignore_errors=True)
    deadline = time.monotonic() + 30
    while (
        subprocess.run(["pgrep", "-f", "over-ssh"], capture_output=True).returncode == 0 and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert subprocess.run(["pgrep", "-f", "servers over-ssh"], capture_output=True).returncode != 0
