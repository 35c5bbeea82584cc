"""The server host's CPU cap holds on the real kernel: a CPU-bound load on the lab's server host, capped at a
quarter of one core, uses about a quarter of a core per second of wall time, well below the same load uncapped;
the lab records the cap, and its cgroup goes with the lab (or, left by a killed lab, with the next one)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from workbench.lab import cpucap
from workbench.lab.link import Lab, LinkSpec

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(lab_unavailable() is not None, reason=lab_unavailable() or ""),
    pytest.mark.skipif(cpucap.detect() is None, reason="no cgroup file system mounted here"),
]

# No delay line: the kernel builds it (veth), so the lab is quick to make and its emulator takes no CPU.
KERNEL_LINK = LinkSpec(rate_bits_per_s=1_000_000_000, rtt_ms=0.0)
LOAD_S = 20.0  # each busy process ends by itself after this long, whatever happens to the test
MEASURE_S = 2.0
# Three loops: even on two cores shared with other work they take well over a quarter core uncapped (CFS gives
# each runnable task its share), where the cap must hold all three together to a quarter.
LOOPS = 3
BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def _busy(lab: Lab | None) -> list[subprocess.Popen[bytes]]:
    """LOOPS CPU-bound loops: on the lab's server host (moved under its cgroup), or on this host (lab None)."""
    argv = [sys.executable, "-c", BUSY.format(s=LOAD_S)]
    if lab is not None:
        argv = ["ip", "netns", "exec", lab.server_ns, *argv]
    procs = [subprocess.Popen(argv) for _ in range(LOOPS)]
    if lab is not None:
        time.sleep(0.3)  # by now each has entered the namespace, where cap_server_host() finds it
        assert lab.cap_server_host() >= LOOPS
    return procs


def _cpu_s(procs: list[subprocess.Popen[bytes]]) -> float:
    """CPU seconds these processes used so far (user and system, from /proc)."""
    total = 0
    for proc in procs:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def _cores_used(lab: Lab) -> tuple[float, float, dict]:
    """Cores' worth of CPU the loops on the capped server host used, and the same loops beside them on this
    host, uncapped, over the same seconds (one machine's load weighs on both alike); the watch's report."""
    capped_procs, free_procs = _busy(lab), _busy(None)
    try:
        watch = lab.cpu_watch()
        free0, wall0 = _cpu_s(free_procs), time.monotonic()
        watch.start()
        time.sleep(MEASURE_S)
        report = watch.report()
        free = (_cpu_s(free_procs) - free0) / (time.monotonic() - wall0)
    finally:
        for proc in (*capped_procs, *free_procs):
            proc.kill()
            proc.wait()
    assert report is not None and report["server_cpu_s_per_s"] is not None
    return report["server_cpu_s_per_s"], free, report


@pytest.fixture
def groups_before() -> Iterator[set[Path]]:
    yield _lab_groups()


def _lab_groups() -> set[Path]:
    controllers = cpucap.detect()
    assert controllers is not None
    return {g for root in controllers.roots(capped=True) for g in root.glob("wb-lab-*")}


def test_a_quarter_core_cap_holds_a_cpu_bound_server_host_near_a_quarter(groups_before: set[Path]) -> None:
    controllers = cpucap.detect()
    if controllers is None or controllers.cpu is None:
        pytest.skip("no cgroup CPU controller here")
    with Lab(KERNEL_LINK, server_cpu_cores=0.25) as lab:
        described = lab.describe()
        assert described["server_cpu_cap_cores"] == 0.25 and "25000" in described["server_cpu_cgroup"]
        mine = _lab_groups() - groups_before
        assert mine and all(g.name == lab.server_ns for g in mine)
        capped, uncapped, report = _cores_used(lab)
        assert report["server_throttled_s"] and report["server_throttled_s"] > 0  # the cap held them back
    assert not any(g.exists() for g in mine)  # the lab's teardown removed its group
    print(f"CPU seconds per second of {LOOPS} busy loops: capped at 0.25 {capped:.3f}, uncapped {uncapped:.3f}")
    assert 0.1 <= capped <= 0.35, capped  # the loops ran, and no more than the cap (and its period's slack)
    assert uncapped >= 1.5 * capped, (capped, uncapped)  # the same loops uncapped take far more


def test_an_uncapped_lab_counts_its_server_hosts_cpu_without_capping_it() -> None:
    with Lab(KERNEL_LINK) as lab:
        assert lab.describe()["server_cpu_cap_cores"] is None
        procs = _busy(lab)
        try:
            watch = lab.cpu_watch()
            watch.start()
            time.sleep(MEASURE_S / 2)
            report = watch.report()
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    assert report is not None and report["server_cpu_s_per_s"] and report["server_cpu_s_per_s"] > 0
    assert report["server_throttled_s"] is None


ENDED_BUSY_S = 0.05
# a process on the server host that ends mid-copy (a connection's sshd child): it burns its CPU and ends
ENDED = "import time\nwhile time.process_time() < {s}:\n    pass"
# bash's `times`: the shell's own user and system time, then its reaped children's, to the millisecond
TIMES = re.compile(r"(\d+)m([\d.]+)s")


def _times_s(line: str) -> float:
    """User plus system seconds from one line of bash's `times` ("0m0.050s 0m0.004s")."""
    return sum(int(m) * 60 + float(s) for m, s in TIMES.findall(line))


def test_the_server_hosts_cgroup_keeps_the_cpu_of_a_process_that_ended() -> None:
    """What each copy's server CPU is read from in a lab (lab.servercpu): a process that ran and ended between two
    readings is in their difference, to well under a clock tick, whoever reaped it.

    The child's CPU is its whole life as its parent reaped it (the shell's `times`): an interpreter's exit, which
    its own clock read at the end would leave out, took more than the bound on a slow machine."""
    child = f"{sys.executable} -S -c '{ENDED.format(s=ENDED_BUSY_S)}'"
    script = f"echo ready; read go; {child}; times; echo done; read end"
    with Lab(KERNEL_LINK) as lab:
        usage_s = lab.cpu_watch().server_usage()
        assert usage_s is not None
        shell = subprocess.Popen(
            ["ip", "netns", "exec", lab.server_ns, "bash", "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "LC_ALL": "C"},  # `times` writes the locale's decimal point
        )
        assert shell.stdin is not None and shell.stdout is not None
        try:
            assert shell.stdout.readline() == "ready\n"  # in the namespace now
            assert lab.cap_server_host() >= 1
            before = usage_s()
            shell.stdin.write("go\n")
            shell.stdin.flush()
            shell.stdout.readline()  # the shell's own time: mostly its start, before the cgroup held it
            child_cpu_s = _times_s(shell.stdout.readline())
            assert shell.stdout.readline() == "done\n"  # the child ended, and the shell reaped it
            after = usage_s()
        finally:
            shell.kill()
            shell.wait()
    assert before is not None and after is not None
    print(f"cgroup: {after - before:.5f} s over a child that used {child_cpu_s:.5f} s in its life")
    assert child_cpu_s >= ENDED_BUSY_S
    # the difference holds the child's whole life (times rounds to the millisecond) and the shell's fork and wait
    assert -0.002 <= (after - before) - child_cpu_s < 0.005, (after - before, child_cpu_s)


def test_a_group_left_by_a_killed_lab_goes_with_the_next_cleanup() -> None:
    dead = subprocess.Popen(["true"])  # its pid: an owner that is gone
    dead.wait()
    cap = cpucap.CpuCap.make(f"wb-lab-{dead.pid}-1-s", None)
    if cap is None:
        pytest.skip("no cgroup to count CPU time in here")
    assert all(g.is_dir() for g in cap.groups)
    removed = cpucap.cleanup_stale()
    assert not any(g.exists() for g in cap.groups)
    assert any(str(g) in line for line in removed for g in cap.groups)
