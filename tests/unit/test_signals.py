"""Signals during a cleanup: Ctrl-C, SIGTERM and SIGHUP are held until it is done (signals.held), from every
thread, without passing a blocked mask on to the programs it starts; after a first signal switched further ones
off, no cleanup switches them back on; a fleet member unwinds on SIGHUP or SIGTERM as every command does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.lab.lifecycle import Hosts, Lifecycle
from workbench.shared import signals
from workbench.shared.errors import ExitCode, Terminated

RAISES: dict[int, type[BaseException]] = {
    signal.SIGINT: KeyboardInterrupt,
    signal.SIGTERM: Terminated,
    signal.SIGHUP: signals.HungUp,
}


@pytest.fixture(autouse=True)
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI's handlers, put back as they were afterwards; a hangup leaves the test's own streams alone."""
    before = {sig: signal.getsignal(sig) for sig in signals.HELD}
    monkeypatch.setattr(signals, "detach_terminal", lambda: None)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in signals.TERMINATING:
        signal.signal(sig, signals.on_signal)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _settle() -> None:
    """Give a pending Python-level handler the bytecode boundaries it runs at."""
    for _ in range(20):
        time.sleep(0.005)


@pytest.mark.parametrize("sig", list(RAISES), ids=lambda s: signal.Signals(s).name)
def test_a_signal_in_a_held_block_raises_right_after_it(sig: int) -> None:
    done = []
    with pytest.raises(RAISES[sig]), signals.held():
        os.kill(os.getpid(), sig)
        _settle()
        done.append("the whole cleanup")
    assert done == ["the whole cleanup"]


def test_a_signal_a_thread_receives_is_held_too() -> None:
    # The kernel hands a process's signal to any thread that does not block it (a progress bar's, a library's);
    # the main thread then runs the Python handler all the same.
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    done = []
    try:
        with pytest.raises(Terminated), signals.held():
            assert other.ident is not None
            signal.pthread_kill(other.ident, signal.SIGTERM)
            _settle()
            done.append("the whole cleanup")
    finally:
        stop.set()
        other.join()
    assert done == ["the whole cleanup"]


def test_programs_started_in_a_held_block_can_still_be_stopped() -> None:
    with signals.held():
        status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, check=True).stdout
    blocked = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
    for sig in signals.HELD:
        assert not blocked & (1 << (sig - 1)), f"{signal.Signals(sig).name} blocked in a child"


def test_a_signal_ignored_before_the_block_stays_ignored() -> None:
    signals.ignore_further()  # as a first SIGTERM does
    with signals.held():
        os.kill(os.getpid(), signal.SIGTERM)
        _settle()
    _settle()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_the_most_severe_of_several_signals_is_the_one_delivered() -> None:
    with pytest.raises(signals.HungUp), signals.held():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGHUP)
        _settle()


def test_the_labs_teardown_never_switches_signals_back_on_after_a_first() -> None:
    life = Lifecycle(Hosts("a", "b"), 1500, None, [])
    life.catch_sigterm()
    with pytest.raises(Terminated) as first:
        os.kill(os.getpid(), signal.SIGTERM)
        _settle()
    assert first.value.code == ExitCode.TERMINATED  # a library user's program exits 143 without a traceback
    with life.signals_held():
        pass  # the lab's teardown, unwinding from the first signal
    # the command's own cleanup goes on after the lab's: a second SIGTERM must not cut it short
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_the_labs_teardown_gives_the_command_its_handlers_back_when_no_signal_came() -> None:
    def commands_own(signum: int, frame: object) -> None:
        raise AssertionError("not called")

    signal.signal(signal.SIGTERM, commands_own)
    life = Lifecycle(Hosts("a", "b"), 1500, None, [])
    life.catch_sigterm()
    assert signal.getsignal(signal.SIGTERM) is signals.on_signal
    with life.signals_held():
        pass
    assert signal.getsignal(signal.SIGTERM) is commands_own


@pytest.mark.parametrize(
    ("sig", "said", "code"), [(signal.SIGHUP, "hung up", 129), (signal.SIGTERM, "terminated", 143)]
)
def test_a_fleet_member_unwinds_on_a_hangup_as_every_command(sig: int, said: str, code: int) -> None:
    script = "import sys\nfrom workbench.core.fleet_member import serve_member\nsys.exit(serve_member())\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        hello = json.loads(proc.stdout.readline())
        assert hello["event"] == "hello"
        proc.send_signal(sig)  # waiting for its job
        last = json.loads(proc.stdout.readline())
        assert proc.wait(timeout=60) == code
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert last == {"event": "error", "message": f"stopped: {said}", "exit_code": code}


_WRITES_ON = """
import sys
from pathlib import Path
from workbench.shared import signals
signals.install()
from workbench.cli.app import out
print("first", flush=True)
sys.stdin.readline()  # the reader of stdout is gone now: the cleanup's messages go on regardless
for n in range(3):
    print("cleanup line", n, flush=True)
    out.print(f"[bold]cleanup[/] line {n}")
Path(sys.argv[1]).write_text("the whole cleanup")
"""


def test_output_to_a_pipe_whose_reader_died_is_dropped_not_raised(tmp_path: Path) -> None:
    # `workbench run URL | tee log` in a terminal that closes: tee dies of the hangup, and every later write to
    # the pipe fails (EPIPE) as writes to the terminal do (EIO)
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITES_ON, str(marker)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == b"first\n"
        proc.stdout.close()  # the reader dies
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr is not None
    said = proc.stderr.read().decode()
    assert code == 0 and "Error" not in said, said
    assert marker.read_text() == "the whole cleanup"


@pytest.mark.parametrize("sig", list(RAISES), ids=lambda s: signal.Signals(s).name)
def test_a_signal_while_the_far_side_goes_down_still_removes_the_ssh_key(sig: int, tmp_path: Path) -> None:
    """run --via-ssh's bring-down: a signal it holds is delivered only once the client key's directory is gone."""
    from workbench.core import far_servers
    from workbench.core.ssh_session import Lines

    keys_dir = tmp_path / "keys"
    keys_dir.mkdir()
    (keys_dir / "client_key").write_text("private")
    # Stands in for ssh: on "down" it signals this process, as a Ctrl-C or a SIGTERM in the middle would.
    far = subprocess.Popen(
        ["sh", "-c", f"read line; kill -{signal.Signals(sig).name[3:]} {os.getpid()}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert far.stdout is not None
    with pytest.raises(RAISES[sig]):
        far_servers._bring_down(far, Lines(far.stdout.fileno()), keys_dir)
    assert far.returncode == 0  # the signal came during the bring-down, which then ran to its end
    assert not keys_dir.exists()


def test_a_killed_runs_ssh_key_directory_is_removed_by_the_next_runs_sweep(tmp_path: Path) -> None:
    """A run killed outright leaves its key directory: its name records an owner the sweep sees is gone."""
    from workbench.protocols.mounts import stale

    made = subprocess.run(
        [sys.executable, "-c", "from workbench.core.far_servers import make_keys_dir; print(make_keys_dir())"],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    left = Path(made.stdout.strip())
    (left / "client_key").write_text("private")
    assert left.parent == tmp_path and stale.owner_of(left) is not None
    assert stale.remove_stale_temp(tmp_path) == [f"temporary {left}"]
    assert not left.exists()
