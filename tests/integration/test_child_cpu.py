"""The client children's CPU (workbench.shared.childcpu) on the real kernel: a grandchild no process reaps is
counted through the cgroup v2 group run_native starts a tool in when asked (`count_tree`; getrusage never sees
it), the joined child itself is counted once, and where no group can be made the reading is getrusage's, as
before. Needs root and cgroup v2 (CI has both; the hybrid layout's …/unified counts too)."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.core import runner
from workbench.protocols import process
from workbench.shared import childcpu

BUSY_S = 0.3  # the grandchild's CPU: well above what the shell and the start-up cost (a few ms)
WAIT_S = 30.0  # the longest the grandchild may take on a loaded machine (it stops at BUSY_S of CPU)
# busy until its CPU clock reads `s` (or a wall-clock bound passes), then leaves what it read in `out`
GRANDCHILD = (
    "import os, sys, time\n"
    "end = time.monotonic() + {wall}\n"
    "while time.process_time() < {s} and time.monotonic() < end:\n"
    "    pass\n"
    "open(sys.argv[1] + '.tmp', 'w').write(str(time.process_time()))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
)


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test makes (or fails to make) the group anew; the group it made is removed after it."""
    monkeypatch.setattr(childcpu, "_group", None)
    monkeypatch.setattr(childcpu, "_tried", False)
    yield
    childcpu.remove()


def _rusage_children_s() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def _left_unreaped(out: Path) -> None:
    """Run, through run_native, a shell that starts the busy grandchild in the background and exits at once."""
    script = GRANDCHILD.format(s=BUSY_S, wall=WAIT_S)
    argv = ["sh", "-c", 'exec 1>/dev/null 2>&1; "$0" -S -c "$1" "$2" & exit 0', sys.executable, script, str(out)]
    done = process.run_native(argv, progress=lambda _n: None, total_bytes=None, timeout=WAIT_S, count_tree=True)
    assert done.returncode == 0


def _wait_for(out: Path) -> float:
    deadline = time.monotonic() + WAIT_S + 5
    while not out.exists():
        assert time.monotonic() < deadline, "the grandchild never finished"
        time.sleep(0.05)
    return float(out.read_text())


def _group_empties(group: Path) -> None:
    """The grandchild has written its figure; its exit (and the last of its CPU) follows at once."""
    deadline = time.monotonic() + 10
    while (group / "cgroup.procs").read_text().split():
        assert time.monotonic() < deadline, "the grandchild did not exit"
        time.sleep(0.02)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root")
def test_an_unreaped_grandchilds_cpu_is_counted_through_the_group(fresh_state: None, tmp_path: Path) -> None:
    before_s, rusage_before_s = runner._cpu_now()[1], _rusage_children_s()
    group = childcpu._group
    assert group is not None and group.path.name == f"wb-clients-{os.getpid()}"
    assert childcpu.preexec_join() is not None
    out = tmp_path / "busy"
    _left_unreaped(out)
    used_s = _wait_for(out)
    _group_empties(group.path)
    counted_s = runner._cpu_now()[1] - before_s
    # the group holds the grandchild's CPU (its whole clock) and the shell's; getrusage saw the shell only
    assert used_s >= BUSY_S
    assert counted_s >= used_s, (counted_s, used_s)
    assert _rusage_children_s() - rusage_before_s < BUSY_S / 3
    childcpu.remove()
    assert not group.path.exists()  # removed at exit, and here


def test_without_a_group_the_reading_is_getrusages_reaped_children(
    fresh_state: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a directory that is no cgroup: the group is made there, cannot be joined, and is taken away again
    monkeypatch.setattr(childcpu, "_parent_dir", lambda: tmp_path)
    before_s, rusage_before_s = childcpu.children_cpu_s(), _rusage_children_s()
    assert childcpu._group is None and childcpu.preexec_join() is None
    assert list(tmp_path.iterdir()) == []
    out = tmp_path / "busy"
    script = GRANDCHILD.format(s=0.05, wall=WAIT_S)
    done = process.run_native(
        [sys.executable, "-S", "-c", script, str(out)],
        progress=lambda _n: None,
        total_bytes=None,
        timeout=WAIT_S,
        count_tree=True,  # asked, but there is no group to join
    )
    assert done.returncode == 0
    read_s, rusage_s = childcpu.children_cpu_s() - before_s, _rusage_children_s() - rusage_before_s
    assert read_s >= float(out.read_text()) - 0.0005  # a reaped child is counted, to getrusage's microsecond
    assert read_s <= rusage_s  # what getrusage says (read a moment later), no more


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root")
def test_a_killed_runs_group_is_removed_by_the_next(fresh_state: None) -> None:
    parent = childcpu._parent_dir()
    assert parent is not None, "no cgroup v2 here"
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs: the owner of a group a killed run left
    left = parent / f"{childcpu.PREFIX}{gone.pid}"
    live = parent / f"{childcpu.PREFIX}{os.getpid()}"  # this process's: its owner runs, it stays
    try:
        left.mkdir()
        childcpu.children_cpu_s()  # the first reading makes this process's group and clears the stale ones
        assert not left.exists()
        assert live.is_dir()
    finally:
        with contextlib.suppress(OSError):
            left.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root")
def test_a_joined_child_reaped_is_counted_once_and_others_as_before(fresh_state: None, tmp_path: Path) -> None:
    before_s = runner._cpu_now()[1]
    assert childcpu._group is not None
    used_s = 0.0
    for count_tree in (True, False):  # one in the group, reaped with wait4; one outside it, reaped as always
        out = tmp_path / f"busy-{count_tree}"
        done = process.run_native(
            [sys.executable, "-S", "-c", GRANDCHILD.format(s=0.1, wall=WAIT_S), str(out)],
            progress=lambda _n: None,
            total_bytes=None,
            timeout=WAIT_S,
            count_tree=count_tree,
        )
        assert done.returncode == 0
        used_s += float(out.read_text())
    counted_s = runner._cpu_now()[1] - before_s
    # each child's own clock at its last line, its exit after: each counted, neither twice
    assert used_s - 0.001 <= counted_s < used_s + 0.02, (counted_s, used_s)
    assert process._joined == set()
