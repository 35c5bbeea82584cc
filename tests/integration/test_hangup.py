"""SIGHUP is handled as SIGTERM everywhere: a closed terminal or a dropped SSH session never kills workbench
outright. `run URL` under a real pseudo-terminal whose other end closes mid-copy (the kernel's own hangup,
after which every write to the terminal fails) exits 129 and removes its scratch directory; `serve` stops
cleanly; a fleet's controller ends every client's session and keeps the rows; the lab's own handler turns
SIGHUP into exit 129 like the CLI's; a process started with SIGHUP ignored (nohup) keeps it ignored."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.far_host import saved_rows
from tests.helpers import free_port
from tests.integration.test_stranger_files_safe import LONG_RUN, _plant, _scratch_dirs, _tree
from tests.ssh_login import LoginHost
from tests.stock_urls import StockSite, workbench_argv
from workbench.shared.errors import ExitCode
from workbench.shared.net import port_open


def _wait_exit(pid: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"pid {pid} did not end within {timeout_s} s of the hangup")


def test_run_url_on_a_terminal_that_closes_mid_copy(site: StockSite, tmp_path: Path) -> None:
    site.start("ftp")
    data = site.root("ftp") / "data"
    _plant(data)
    before = _tree(data)
    argv = workbench_argv("run", site.url("ftp") + "data", "--protocols", "ftp/ftplib", *LONG_RUN)
    argv += ["--files", str(tmp_path / "files"), "--db", str(tmp_path / "runs.sqlite")]
    env = {**site.env(), "TERM": "xterm"}
    pid, master = pty.fork()  # the child leads a new session whose controlling terminal is this pty
    if pid == 0:  # pragma: no cover -- the child
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execve(argv[0], argv, env)
    screen = b""
    try:
        deadline = time.monotonic() + 120
        scratch = None
        while scratch is None:
            assert time.monotonic() < deadline, screen[-3000:]
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    screen += os.read(master, 65536)  # drained, so the run never blocks writing its progress
                except OSError:
                    break
            for name in _scratch_dirs(data):
                if any(p.name == "file-32M.bin" for p in (data / name / "incoming").rglob("*")):
                    scratch = name
        assert scratch is not None, screen[-3000:]
    finally:
        os.close(master)  # the terminal goes away: the kernel hangs up the session
    code = _wait_exit(pid, 120)
    assert code == ExitCode.HANGUP, screen[-3000:]
    assert not (data / scratch).exists() and _scratch_dirs(data) == []
    assert _tree(data) == before


def test_serve_stops_on_a_hangup(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    port = free_port()
    argv = [sys.executable, "-m", "workbench", "serve", "--root", str(root), "--state-dir", str(tmp_path / "state")]
    argv += ["--http-port", str(port), "--ftp-port", "0", "--tcp-port", "0", "--no-iperf3"]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WORKBENCH_HOME": str(tmp_path / "home")},
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        while not port_open("127.0.0.1", port):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # stopped as on Ctrl-C (0), or, when the hangup came before its loop took the signals over, unwound by
    # the CLI's handler (129): never killed by the signal itself (-1)
    assert proc.returncode in (0, ExitCode.HANGUP), out + err
    assert "Traceback" not in err
    assert not port_open("127.0.0.1", port)


_LAB_HANDLER = textwrap.dedent(
    """
    import os, signal, sys
    from workbench.lab.lifecycle import Hosts, Lifecycle
    life = Lifecycle(Hosts("a", "b"), 1500, None, [])
    life.catch_sigterm()
    try:
        os.kill(os.getpid(), signal.SIGHUP)
        signal.pause()
    finally:
        print("teardown ran", flush=True)
    """
)


def test_the_labs_own_handler_unwinds_on_a_hangup() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _LAB_HANDLER],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    assert proc.returncode == ExitCode.HANGUP, proc.stderr
    assert proc.stdout == "teardown ran\n"


@pytest.mark.parametrize("ignored", [True, False])
def test_a_hangup_ignored_at_start_stays_ignored(ignored: bool) -> None:
    script = textwrap.dedent(
        """
        import os, signal, time
        from workbench.shared import signals
        signals.install()
        try:
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.2)
            print("still here", flush=True)
        except signals.HungUp:
            print("hung up", flush=True)
        """
    )
    handler = signal.SIG_IGN if ignored else signal.SIG_DFL
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, handler),
    )
    assert proc.stdout == ("still here\n" if ignored else "hung up\n"), proc.stderr


def test_fleet_hangup_ends_every_client_session_and_keeps_the_rows(
    site: StockSite, login_host: LoginHost, tmp_path: Path
) -> None:
    from tests.integration.test_fleet_cli import _gone, _hosts
    from tests.integration.test_fleet_cli import _start as start_fleet

    # the controller inherits SIGHUP's disposition: a test run under nohup must not hand it SIGHUP ignored
    old = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        proc = start_fleet(site, login_host, tmp_path, _hosts(login_host, tmp_path), "--repeat", "6")
    finally:
        signal.signal(signal.SIGHUP, old)
    db = site.base / "workbench-home" / "runs.sqlite"
    try:
        deadline = time.monotonic() + 120
        while saved_rows(db) < 1:  # copies under way on both clients
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGHUP)  # the controller's terminal closed
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == ExitCode.HANGUP, out + err
    assert err.strip().splitlines()[-1] == "hung up" and "Traceback" not in err, err
    assert saved_rows(db) >= 1
    assert _gone() == []  # every member ended with its session
