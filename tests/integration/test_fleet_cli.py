"""`workbench fleet --clients HOSTS URL`: two client "hosts" (two SSH aliases of a real sshd on 127.0.0.1, whose
`workbench` is this venv's) copy to a stock WebDAV server at once. One run: per step an aggregate row and each
client's row; a client killed mid-run fails only its own rows; an unknown host key fails that client in one line;
Ctrl-C ends every session; the password never appears on a command line; nothing is left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.argv_watch import ArgvWatch
from tests.far_host import fleet_members, saved_rows
from tests.ssh_login import REMOTE_WORKBENCH, LoginHost, keygen
from tests.stock_urls import StockSite, workbench_argv
from workbench.shared.errors import ExitCode

PLAN = ["--protocols", "http/aiohttp", "--sizes", "64M", "--repeat", "2", "--warmup", "0", "--tcp-duration", "1"]
ALIASES = ("farbox", "farbox2")


def _hosts(login_host: LoginHost, tmp_path: Path, *, bad_key_for: str | None = None) -> Path:
    """A HOSTS file of two aliases of the login sshd; `bad_key_for`'s known_hosts holds another key."""
    config = login_host.ssh_config.read_text()
    block = config.split("Host farbox\n", 1)[1]
    if bad_key_for == "farbox2":
        keygen(tmp_path / "other_key")  # a real key, but not the sshd's: a changed or spoofed host
        kind, blob = (tmp_path / "other_key.pub").read_text().split()[:2]
        wrong = tmp_path / "wrong_known_hosts"
        wrong.write_text(f"[127.0.0.1]:{login_host.port} {kind} {blob}\n")
        block = block.replace(str(login_host.known_hosts), str(wrong))
    login_host.ssh_config.write_text(config + "Host farbox2\n" + block)
    hosts = tmp_path / "hosts"
    hosts.write_text("# the test's two clients\n" + "\n".join(ALIASES) + "\n")
    return hosts


def _start(site: StockSite, login_host: LoginHost, tmp_path: Path, hosts: Path, *extra: str) -> subprocess.Popen[str]:
    site.start("webdav")
    env = site.env(WORKBENCH_SSH_CONFIG=str(login_host.ssh_config), PYTHONUNBUFFERED="1")
    argv = workbench_argv("fleet", "--clients", str(hosts), site.url("webdav"), "--remote-workbench", REMOTE_WORKBENCH)
    argv += ["--json", str(tmp_path / "fleet.json"), *PLAN, *extra]
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _gone(timeout_s: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := fleet_members()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_fleet_of_two_gives_aggregate_and_per_client_rows(
    site: StockSite, login_host: LoginHost, tmp_path: Path
) -> None:
    hosts = _hosts(login_host, tmp_path)
    with ArgvWatch(site.credentials.password, pause_s=0.05) as watch:
        proc = _start(site, login_host, tmp_path, hosts)
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, out + err
    assert watch.scans > 5 and watch.hits == []  # the password went down the SSH channels only
    doc = json.loads((tmp_path / "fleet.json").read_text())
    assert doc["schema"] == 3
    rows = doc["results"]
    assert {r["client_host"] for r in rows} == {"all", *ALIASES}
    aggregates = [r for r in rows if r["client_host"] == "all"]
    assert {r["direction"] for r in aggregates} == {"upload", "download"}
    for agg in aggregates:
        assert agg["aggregate"]["clients"] == list(ALIASES)
        assert agg["median_bytes_per_s"] > 0 and agg["samples"], agg
        # the window never exceeds a copy: it runs from the later start to the earlier end
        ends = agg["aggregate"]["first_done_s"]
        assert all(s["seconds"] <= e + 1e-6 for s, e in zip(agg["samples"], ends, strict=False)), agg
    clients = [r for r in rows if r["client_host"] in ALIASES]
    assert len(clients) == 2 * len(aggregates)
    assert all(r["verified"] and r["error"] is None and len(r["samples"]) == 2 for r in clients), clients
    # each aggregate row comes first, then its clients' rows
    assert [r["client_host"] for r in rows[:3]] == ["all", *ALIASES]
    assert set(doc["run"]["fleet"]["clients"]) == set(ALIASES)
    assert _gone() == []
    assert "aiohttp ×2" in out or "×2" in out, out


def test_a_client_killed_mid_run_fails_only_its_rows(site: StockSite, login_host: LoginHost, tmp_path: Path) -> None:
    hosts = _hosts(login_host, tmp_path)
    proc = _start(site, login_host, tmp_path, hosts, "--repeat", "4")
    db = site.base / "workbench-home" / "runs.sqlite"
    deadline = time.monotonic() + 120
    while saved_rows(db) < 1 or len(fleet_members()) < 2:  # a client row is in: both are past their first row
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    victim = fleet_members()[0]
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == ExitCode.ROWS_FAILED, out + err
    doc = json.loads((tmp_path / "fleet.json").read_text())
    by_host = {h: [r for r in doc["results"] if r["client_host"] == h] for h in ALIASES}
    failed = [h for h, rows in by_host.items() if any(r["error"] for r in rows)]
    assert len(failed) == 1, doc["results"]
    survivor = next(h for h in ALIASES if h not in failed)
    assert by_host[survivor] and all(r["error"] is None and r["verified"] for r in by_host[survivor])
    assert any("stopped" in (r["error"] or "") for r in by_host[failed[0]])
    assert failed[0] in doc["run"]["fleet"]["failed_clients"]
    assert _gone() == []


def test_an_unknown_host_key_fails_that_client_in_one_line(
    site: StockSite, login_host: LoginHost, tmp_path: Path
) -> None:
    hosts = _hosts(login_host, tmp_path, bad_key_for="farbox2")
    proc = _start(site, login_host, tmp_path, hosts, "--directions", "download", "--repeat", "1")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == ExitCode.ROWS_FAILED, out + err
    doc = json.loads((tmp_path / "fleet.json").read_text())
    bad = [r for r in doc["results"] if r["client_host"] == "farbox2"]
    good = [r for r in doc["results"] if r["client_host"] == "farbox"]
    assert bad and all("host key" in r["error"] for r in bad), bad
    assert good and all(r["error"] is None for r in good), good
    assert _gone() == []


def test_ctrl_c_ends_every_client_session_and_keeps_the_rows(
    site: StockSite, login_host: LoginHost, tmp_path: Path
) -> None:
    hosts = _hosts(login_host, tmp_path)
    proc = _start(site, login_host, tmp_path, hosts, "--repeat", "6")
    db = site.base / "workbench-home" / "runs.sqlite"
    deadline = time.monotonic() + 120
    while saved_rows(db) < 1:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.INTERRUPTED, out + err
    assert saved_rows(db) >= 1
    assert _gone() == []


def test_a_hosts_file_that_names_nobody_is_a_usage_error(
    site: StockSite, login_host: LoginHost, tmp_path: Path
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# nobody yet\n")
    proc = _start(site, login_host, tmp_path, hosts)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.USAGE, out + err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1 and "names no host" in err, err


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # a workbench from before fleets: typer's own usage error for an unknown command
        ("import sys; sys.stderr.write(\"Error: No such command 'fleet-member'.\\n\"); sys.exit(2)", "older version"),
        # a member speaking another version of the protocol
        (
            "import json; print(json.dumps({'event': 'hello', 'protocol': 'workbench-fleet/0', 'version': '0.0.1'}))",
            "speaks 'workbench-fleet/0'",
        ),
    ],
)
def test_a_client_with_an_incompatible_workbench_is_named_with_the_install(
    site: StockSite, login_host: LoginHost, tmp_path: Path, script: str, expected: str
) -> None:
    fake = tmp_path / "old_workbench.py"
    fake.write_text(script + "\n")
    hosts = _hosts(login_host, tmp_path)
    site.start("webdav")
    env = site.env(WORKBENCH_SSH_CONFIG=str(login_host.ssh_config))
    argv = workbench_argv("fleet", "--clients", str(hosts), site.url("webdav"), *PLAN, "--directions", "download")
    argv += ["--remote-workbench", f"{sys.executable} {fake}", "--json", str(tmp_path / "fleet.json")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    # no client started: one line, the install's exit code, and the run's failed rows still recorded
    assert done.returncode == ExitCode.NOT_FOUND, done.stdout + done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no client started" in lines[0] and "pip install" in lines[0], done.stderr
    doc = json.loads((tmp_path / "fleet.json").read_text())
    for host in ALIASES:
        why = doc["run"]["fleet"]["failed_clients"][host]
        assert expected in why and "pip install filecopy-workbench" in why, why
    assert all(r["error"] for r in doc["results"] if r["client_host"] in ALIASES)


# ---------------------------------------------------------------- a hostile member
FAKE = Path(__file__).resolve().parents[1] / "fleet_fake_member.py"
SMALL = ["--protocols", "http/aiohttp", "--sizes", "1M", "--repeat", "1", "--warmup", "0", "--tcp-duration", "1"]
# mode of tests/fleet_fake_member.py: what the one line naming farbox2 says
HOSTILE = {
    "wait-without-step": "wait.step: Field required",
    "step-of-strings": "wait.step.0: Input should be a valid integer",
    "infinite-number": "Input should be a finite number",
    "nan": "Input should be a finite number",
    "deep": "nested deeper than 16 levels",
    "bytes-zz": "row.row.bytes: Input should be a valid integer",
    "unknown-event": "Input tag 'take-over'",
    "ten-megabytes": "a line longer than 4 MiB",
    "binary": "Invalid JSON",
    "escapes": "control character",
    "second-row": "a second row for http/aiohttp",
    "foreign-row": "a row the plan does not have: http/evil",
    "no-newline": "its session ended in the middle of a line",
    "endless-stderr": "the session ended mid-run: the last words",
}


def _hostile_run(site: StockSite, login_host: LoginHost, tmp_path: Path, mode: str) -> subprocess.CompletedProcess:
    hosts = _hosts(login_host, tmp_path)
    site.start("webdav")
    env = site.env(WORKBENCH_SSH_CONFIG=str(login_host.ssh_config))
    argv = workbench_argv("fleet", "--clients", str(hosts), site.url("webdav"), *SMALL)
    argv += ["--remote-workbench", f"{sys.executable} {FAKE} {mode}", "--json", str(tmp_path / "fleet.json")]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


def _runs(db: Path) -> list[tuple[int, bool, dict]]:
    """(id, finished, meta) of each run in id order, its meta as the store reads it: what later runs recorded of
    its leftovers (beside it, in the cleanup column) over what the run itself recorded."""
    from workbench.core.store import Store

    with Store(db) as store:
        return [(s.id, s.finished, store.load(s.id).meta) for s in reversed(store.history())]


@pytest.mark.parametrize("mode", list(HOSTILE))
def test_a_hostile_member_fails_only_its_rows_in_one_line(
    site: StockSite, login_host: LoginHost, tmp_path: Path, mode: str
) -> None:
    done = _hostile_run(site, login_host, tmp_path, mode)
    text = done.stdout + done.stderr
    assert done.returncode == ExitCode.ROWS_FAILED, text
    assert "internal error" not in text.lower() and "Traceback" not in text, text
    assert not any(c in text for c in ("\x1b", "\x9b", "\x07", "\u202e")), text  # none of its escapes shown
    said = [ln for ln in text.splitlines() if ln.startswith("fleet: farbox2") and HOSTILE[mode] in ln]
    assert len(said) == 1 and len(said[0]) < 600, text
    doc = json.loads((tmp_path / "fleet.json").read_text())
    good = [r for r in doc["results"] if r["client_host"] == "farbox"]
    bad = [r for r in doc["results"] if r["client_host"] == "farbox2"]
    assert len(good) == 2 and all(r["error"] is None and r["verified"] for r in good), good
    # its first row arrived before the hostile line and stands; the rest fail, naming why
    assert bad[0]["error"] is None and bad[0]["verified"], bad
    assert bad[1:] and all("farbox2 stopped" in r["error"] and HOSTILE[mode] in r["error"] for r in bad[1:]), bad
    # the run is finished in the database and reads back
    db = site.base / "workbench-home" / "runs.sqlite"
    (run_id, finished, meta), *_ = _runs(db)
    assert finished and set(meta["fleet"]["scratches"]) == set(ALIASES), meta["fleet"]
    env = site.env(WORKBENCH_SSH_CONFIG=str(login_host.ssh_config))
    report = subprocess.run(workbench_argv("report", str(run_id)), capture_output=True, text=True, env=env, timeout=60)
    assert report.returncode == 0 and "farbox2" in report.stdout and "Traceback" not in report.stderr, report
    assert _gone() == []


def test_a_killed_members_scratch_is_removed_by_the_next_run(
    site: StockSite, login_host: LoginHost, tmp_path: Path
) -> None:
    done = _hostile_run(site, login_host, tmp_path, "no-newline")  # the member beneath is killed: no clean-up
    assert done.returncode == ExitCode.ROWS_FAILED, done.stdout + done.stderr
    db = site.base / "workbench-home" / "runs.sqlite"
    (run_id, _, meta), *_ = _runs(db)
    scratches = meta["fleet"]["scratches"]
    assert scratches["farbox"]["removed"] and not scratches["farbox2"]["removed"], scratches
    left = site.root("webdav") / scratches["farbox2"]["server"]["scratch"]
    assert left.is_dir() and "scratch_removed" not in meta
    assert [p.name for p in site.root("webdav").iterdir()] == [left.name]  # farbox removed its own
    # a later fleet against the same URL: its first member removes it, the controller records that
    hosts = tmp_path / "hosts"
    site.start("webdav")
    env = site.env(WORKBENCH_SSH_CONFIG=str(login_host.ssh_config))
    argv = workbench_argv("fleet", "--clients", str(hosts), site.url("webdav"), *SMALL, "--remote-workbench")
    again = subprocess.run([*argv, REMOTE_WORKBENCH], capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not left.exists() and list(site.root("webdav").iterdir()) == []
    runs = {i: m for i, _, m in _runs(db)}
    assert runs[run_id]["fleet"]["scratches"]["farbox2"]["removed"] and runs[run_id]["scratch_removed"] is True
    assert all(m.get("scratch_removed") is True for m in runs.values())
