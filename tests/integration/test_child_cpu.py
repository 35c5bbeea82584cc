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
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.core import runner
from workbench.protocols import process
from workbench.shared import childcpu
from workbench.shared.cgroupfs import remove_group

BUSY_S = 0.3  # the grandchild's CPU: well above what the shell and the start-up cost (a few ms)
# What a child's exit may cost beyond its own last reading (its rename, the interpreter's teardown): 21.5 ms once on
# a slow machine. Still under the 50 ms a child of these tests is busy, so a child counted twice fails.
AFTER_LAST_READING_S = 0.04
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
def fresh_state() -> Iterator[None]:
    """Each test starts with no group, as a run does, and leaves none: the group a test made (a directory named
    after this worker, the same for every group it makes) is removed, and a later count_tree child in this worker
    makes a new one."""
    childcpu.remove()
    assert childcpu._group is None and not childcpu._tried
    yield
    childcpu.remove()


def _rusage_children_s() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def _busy(out: Path, s: float, count_tree: bool = True) -> None:
    """Run, through run_native, a child busy for `s` seconds of CPU that leaves what it read in `out`."""
    done = process.run_native(
        [sys.executable, "-S", "-c", GRANDCHILD.format(s=s, wall=WAIT_S), str(out)],
        progress=lambda _n: None,
        total_bytes=None,
        timeout=WAIT_S,
        count_tree=count_tree,
    )
    assert done.returncode == 0


def _left_unreaped(out: Path) -> None:
    """Run, through run_native, a shell that starts the busy grandchild in the background and exits at once."""
    script = GRANDCHILD.format(s=BUSY_S, wall=WAIT_S)
    argv = ["sh", "-c", 'exec 1>/dev/null 2>&1; "$0" -S -c "$1" "$2" & exit 0', sys.executable, script, str(out)]
    done = process.run_native(argv, progress=lambda _n: None, total_bytes=None, timeout=WAIT_S, count_tree=True)
    assert done.returncode == 0


def _group_dir() -> Path:
    parent = childcpu._parent_dir()
    assert parent is not None, "no cgroup v2 here"
    return parent / f"{childcpu.PREFIX}{os.getpid()}"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root")


@needs_root
def test_an_unreaped_grandchilds_cpu_is_counted_through_the_group(fresh_state: None, tmp_path: Path) -> None:
    before_s, rusage_before_s = runner._cpu_now()[1], _rusage_children_s()
    assert childcpu._group is None  # a reading makes no group: only a child that joins one does
    out = tmp_path / "busy"
    _left_unreaped(out)
    group = childcpu._group
    assert group is not None and group.path == _group_dir()
    # the shell is gone, the grandchild may still run: the closing reading waits for it to end (bounded)
    assert childcpu.wait_emptied(WAIT_S)
    used_s = float(out.read_text())
    assert "populated 0" in (group.path / "cgroup.events").read_text().splitlines()
    counted_s = runner._cpu_now()[1] - before_s
    # the group holds the grandchild's CPU (its whole clock) and the shell's; getrusage saw the shell only
    assert used_s >= BUSY_S
    assert counted_s >= used_s, (counted_s, used_s)
    assert _rusage_children_s() - rusage_before_s < BUSY_S / 3
    childcpu.remove()
    assert not group.path.exists()  # removed at exit, and here


@needs_root
def test_the_group_is_made_for_the_first_counted_child_and_its_probe_is_no_copys(
    fresh_state: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a probe that burns a figure no reading may show (the real one, `true`, burns about a millisecond)
    out = tmp_path / "probe"
    monkeypatch.setattr(
        childcpu, "PROBE_ARGV", (sys.executable, "-S", "-c", GRANDCHILD.format(s=0.05, wall=WAIT_S), str(out))
    )
    before_s = childcpu.children_cpu_s()
    assert childcpu._group is None and not _group_dir().exists()  # readings alone make none
    assert childcpu.preexec_join() is not None  # what run_native asks for a count_tree child: made now
    assert childcpu._group is not None and _group_dir().is_dir()
    probe_s = float(out.read_text())
    assert probe_s >= 0.05
    assert childcpu.children_cpu_s() - before_s < 0.01, "the probe child's CPU was counted"


@needs_root
def test_after_removal_a_counted_child_makes_a_new_group(fresh_state: None, tmp_path: Path) -> None:
    childcpu.prepare()
    first = childcpu._group
    assert first is not None
    childcpu.remove()
    assert not first.path.exists()
    _busy(tmp_path / "busy", 0.01)
    assert childcpu._group is not None and childcpu._group is not first and _group_dir().is_dir()


@needs_root
def test_a_group_that_refuses_a_child_is_dropped_and_the_child_runs_outside(
    fresh_state: None, tmp_path: Path
) -> None:
    childcpu.prepare()
    group = childcpu._group
    assert group is not None
    remove_group(group.path)  # gone behind the module's back: its open cgroup.procs refuses every write
    assert not group.path.exists()
    before_s = runner._cpu_now()[1]
    out = tmp_path / "busy"
    _busy(out, 0.05)
    # started again without joining: counted by getrusage, once
    assert childcpu._group is None and process._joined == set()
    used_s = float(out.read_text())
    assert used_s - 0.001 <= runner._cpu_now()[1] - before_s < used_s + AFTER_LAST_READING_S
    assert childcpu.preexec_join() is None  # dropped for good in this process


@needs_root
def test_a_child_that_did_not_join_is_not_taken_off(
    fresh_state: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # another thread makes the group between run_native's asking (no group then) and the child's start
    make = childcpu.preexec_join

    def racing() -> None:
        make()  # (the other thread's)

    monkeypatch.setattr(childcpu, "preexec_join", racing)
    before_s = childcpu.children_cpu_s()
    out = tmp_path / "busy"
    _busy(out, 0.05)
    assert childcpu._group is not None and process._joined == set()  # made meanwhile, not joined
    assert childcpu.children_cpu_s() - before_s >= float(out.read_text()) - 0.001  # counted, not taken off


def test_without_a_group_the_reading_is_getrusages_reaped_children(
    fresh_state: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a directory that is no cgroup: the group is made there, cannot be joined, and is taken away again
    monkeypatch.setattr(childcpu, "_parent_dir", lambda: tmp_path)
    # getrusage read first here and last below: a child something else reaps meanwhile widens its span only
    rusage_before_s, before_s = _rusage_children_s(), childcpu.children_cpu_s()
    assert childcpu.preexec_join() is None and childcpu._group is None
    assert list(tmp_path.iterdir()) == []
    out = tmp_path / "busy"
    _busy(out, 0.05)  # count_tree asked, but there is no group to join
    read_s, rusage_s = childcpu.children_cpu_s() - before_s, _rusage_children_s() - rusage_before_s
    assert read_s >= float(out.read_text()) - 0.0005  # a reaped child is counted, to getrusage's microsecond
    assert read_s <= rusage_s + 1e-9  # what getrusage says, no more (to float rounding: an offset is taken off)


@needs_root
def test_a_killed_runs_group_is_removed_by_the_next(fresh_state: None) -> None:
    parent = childcpu._parent_dir()
    assert parent is not None, "no cgroup v2 here"
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs: the owner of a group a killed run left
    left = parent / f"{childcpu.PREFIX}{gone.pid}"
    live = _group_dir()  # this process's: its owner runs, it stays
    try:
        left.mkdir()
        childcpu.prepare()  # making this process's group clears the stale ones
        assert not left.exists()
        assert live.is_dir()
    finally:
        with contextlib.suppress(OSError):
            left.rmdir()


@needs_root
def test_a_joined_child_reaped_is_counted_once_and_others_as_before(fresh_state: None, tmp_path: Path) -> None:
    childcpu.prepare()
    before_s = runner._cpu_now()[1]
    assert childcpu._group is not None
    used_s = 0.0
    for count_tree in (True, False):  # one in the group, reaped with wait4; one outside it, reaped as always
        out = tmp_path / f"busy-{count_tree}"
        _busy(out, 0.1, count_tree)
        used_s += float(out.read_text())
    counted_s = runner._cpu_now()[1] - before_s
    # each child's own clock at its last line, its exit after: each counted, neither twice
    assert used_s - 0.001 <= counted_s < used_s + 2 * AFTER_LAST_READING_S, (counted_s, used_s)
    assert process._joined == set()
