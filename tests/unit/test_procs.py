"""CPU over process trees, with real processes: what the rows' client and server CPU figures rest on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from workbench.shared import procs, schedstat

BURN_S = 0.3

# A parent that forks a child into a session of its own (as sshd does for each login), lets it burn CPU,
# and reaps it when told to.
_TREE = textwrap.dedent(
    f"""
    import os, sys, time
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        end = time.process_time() + {BURN_S}
        while time.process_time() < end:
            pass
        os.write(w, b"x")
        time.sleep(60)
        os._exit(0)
    os.read(r, 1)
    print(pid, flush=True)
    sys.stdin.read()
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    print("reaped", flush=True)
    time.sleep(60)
    """
)


def test_process_tree_cpu_counts_children_in_new_sessions_live_and_reaped() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        child = int(parent.stdout.readline())
        assert os.getpgid(child) != parent.pid and child in procs.descendants(parent.pid)
        group_only = procs.cpu_seconds([pid for pid, f in procs.snapshot().items() if int(f[2]) == parent.pid])
        live = schedstat.tree_cpu_and_waits({parent.pid})[0]
        assert group_only < BURN_S / 2  # the listener's group alone misses the session's work...
        assert live >= BURN_S * 0.9  # ...the tree has it
        parent.stdin.close()
        assert parent.stdout.readline().strip() == "reaped"
        reaped = schedstat.tree_cpu_and_waits({parent.pid})[0]
        assert reaped >= live - 0.02  # once reaped, the child's CPU is in its parent's cutime: not lost, not doubled
        assert reaped < live + BURN_S / 2
    finally:
        parent.kill()
        parent.wait()


def test_in_session_and_with_argument_find_real_processes(tmp_path: os.PathLike) -> None:
    marker = str(tmp_path / "marker")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while not procs.with_argument(marker) and time.monotonic() < deadline:
            time.sleep(0.01)  # a process's argv shows in /proc only once its exec has finished
        assert procs.with_argument(marker) == [proc.pid]
        assert procs.in_session(proc.pid) == [proc.pid]
        assert procs.with_argument(marker + "-other") == []
    finally:
        proc.kill()
        proc.wait()
    assert not procs.pid_alive(proc.pid)
