"""The server host's CPU cap as data: which cgroup interface a mount table offers, the quota a cap amounts to,
the files a group is set up with (on a folder laid out as each interface lays its groups out), and the CPU
figures a watch reports. The cap holding on the real kernel is tests/lab/test_server_cpu_cap.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.lab import cpucap
from workbench.lab.cpucap import Controllers, CpuCap, HostCpuWatch, parse_mountinfo, quota_us
from workbench.shared.errors import UsageError

V1_APART = """\
25 1 0:23 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
30 25 0:27 / /sys/fs/cgroup/cpu rw,relatime shared:12 - cgroup cgroup rw,cpu
31 25 0:28 / /sys/fs/cgroup/cpuacct rw,relatime shared:13 - cgroup cgroup rw,cpuacct
32 25 0:29 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory
39 25 0:36 / /sys/fs/cgroup/unified rw,relatime shared:21 - cgroup2 cgroup2 rw
"""
V1_TOGETHER = """\
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
"""
V2 = """\
22 1 0:21 / /proc rw,nosuid - proc proc rw
29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
"""


def test_a_v1_cpu_hierarchy_is_the_interface_even_beside_a_v2_mount() -> None:
    found = parse_mountinfo(V1_APART)
    assert found == Controllers(1, Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpuacct"))
    # capped: a group in each hierarchy (quota in cpu, CPU time in cpuacct); counted only: cpuacct's
    assert found.roots(capped=True) == (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpuacct"))
    assert found.roots(capped=False) == (Path("/sys/fs/cgroup/cpuacct"),)


def test_cpu_and_cpuacct_mounted_together_make_one_group() -> None:
    found = parse_mountinfo(V1_TOGETHER)
    assert found is not None and found.cpu == found.usage == Path("/sys/fs/cgroup/cpu,cpuacct")
    assert found.roots(capped=True) == (Path("/sys/fs/cgroup/cpu,cpuacct"),)


def test_v2_offers_the_cpu_controller_only_when_its_root_lists_it(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "cgroup"
    root.mkdir()
    text = V2.replace("/sys/fs/cgroup", str(root))
    (root / "cgroup.controllers").write_text("cpuset io memory pids\n")
    assert parse_mountinfo(text) == Controllers(2, None, root)  # counted, never capped
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    assert parse_mountinfo(text) == Controllers(2, root, root)


def test_no_cgroup_mount_is_none() -> None:
    assert parse_mountinfo("22 1 0:21 / /proc rw - proc proc rw\n") is None


def test_a_cap_is_a_quota_per_period_and_out_of_range_caps_are_refused() -> None:
    assert quota_us(0.25) == 25_000 and quota_us(1.5) == 150_000
    assert quota_us(0.001) == cpucap.MIN_QUOTA_US  # the kernel takes no less
    cpucap.check_cores(None)
    cpucap.check_cores(0.01)
    for bad in (0.0, 0.005, -1.0, 2048.0):
        with pytest.raises(UsageError, match="--server-cpu"):
            cpucap.check_cores(bad)


def test_a_v1_group_gets_its_quota_and_reads_cpuacct(tmp_path: Path) -> None:
    cpu, acct = tmp_path / "cpu", tmp_path / "cpuacct"
    cpu.mkdir()
    acct.mkdir()
    cap = CpuCap("wb-lab-1-1-s", 0.25, Controllers(1, cpu, acct))
    cap._create()
    assert (cpu / cap.name / "cpu.cfs_quota_us").read_text() == "25000"
    assert (cpu / cap.name / "cpu.cfs_period_us").read_text() == "100000"
    assert cap.describe() == "cgroup v1 cpu.cfs_quota_us 25000 per cpu.cfs_period_us 100000"
    (acct / cap.name / "cpuacct.usage").write_text("1500000000\n")
    (cpu / cap.name / "cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 250000000\n")
    assert cap.usage_s() == 1.5 and cap.throttled_s() == 0.25


def test_a_v2_group_gets_cpu_max_and_reads_cpu_stat(tmp_path: Path) -> None:
    (tmp_path / "cgroup.subtree_control").write_text("memory\n")
    cap = CpuCap("wb-lab-1-1-s", 0.5, Controllers(2, tmp_path, tmp_path))
    cap._create()
    assert "+cpu" in (tmp_path / "cgroup.subtree_control").read_text()  # enabled for the root's children
    assert (tmp_path / cap.name / "cpu.max").read_text() == "50000 100000"
    (tmp_path / cap.name / "cpu.stat").write_text("usage_usec 2000000\nuser_usec 1\nthrottled_usec 300000\n")
    assert cap.usage_s() == 2.0 and cap.throttled_s() == 0.3
    assert cap.describe() == "cgroup v2 cpu.max 50000 100000"
    cap.remove()
    assert (tmp_path / "cgroup.subtree_control").read_text() == "-cpu"  # the root as it was before the lab


def test_a_v2_root_that_had_the_cpu_controller_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory\n")
    cap = CpuCap("wb-lab-1-1-s", 0.5, Controllers(2, tmp_path, tmp_path))
    cap._create()
    cap.remove()
    assert (tmp_path / "cgroup.subtree_control").read_text() == "cpu memory\n"


def test_an_uncapped_group_is_counted_in_the_usage_hierarchy_only(tmp_path: Path) -> None:
    cpu, acct = tmp_path / "cpu", tmp_path / "cpuacct"
    cpu.mkdir()
    acct.mkdir()
    cap = CpuCap("wb-lab-1-1-s", None, Controllers(1, cpu, acct))
    cap._create()
    assert not (cpu / cap.name).exists() and (acct / cap.name).is_dir()
    assert cap.throttled_s() is None and cap.describe() == "cgroup v1, not capped"


def test_a_watch_without_a_group_reports_the_client_host_only() -> None:
    watch = HostCpuWatch(None)
    assert watch.report() is None  # not started: no copies measured
    watch.start()
    sum(i * i for i in range(200_000))  # some CPU of this process: the client host's
    report = watch.report()
    assert report is not None and report["server_cpu_s"] is None and report["server_cpu_s_per_s"] is None
    assert report["client_cpu_s"] > 0 and report["seconds"] > 0


class _Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def status(self, text: str) -> None:
        self.lines.append(text)


class _StockHost:
    def __init__(self, problem: str | None) -> None:
        self.problem = problem

    def iperf3_check(self) -> str | None:
        return self.problem


class _CappedLab:
    def __init__(self) -> None:
        self.capped = 0

    def cap_server_host(self) -> int:
        self.capped += 1
        return 1


def test_a_stock_iperf3_started_again_mid_run_goes_back_into_the_server_hosts_cgroup() -> None:
    from workbench.lab.run import _check_iperf3

    lab, said = _CappedLab(), _Said()
    _check_iperf3(lab, _StockHost(None), said)  # type: ignore[arg-type]
    assert lab.capped == 0 and said.lines == []  # alive: left where it is
    restarted = "stock-iperf3 had exited (status 1); started again"
    _check_iperf3(lab, _StockHost(restarted), said)  # type: ignore[arg-type]
    assert lab.capped == 1 and said.lines == [f"lab: {restarted}"]  # the new one joins the cap, then it is said


def test_the_server_hosts_group_leaves_out_this_process_and_netatalks_restarting_master(monkeypatch) -> None:
    """netatalk's master restarts an unused cnid_metad every second: no copy's work, kept out of the group."""
    import os
    import subprocess
    import time
    from pathlib import Path

    argv = ["sleep", "30"]
    master = subprocess.Popen(["/usr/sbin/netatalk", "30"], executable="/bin/sleep")
    server = subprocess.Popen(argv)
    try:
        # a child names its program only once it has exec'd: until then it reads as this interpreter
        deadline = time.monotonic() + 10
        for proc, program in ((master, b"/usr/sbin/netatalk"), (server, b"sleep")):
            while Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0] != program:
                assert time.monotonic() < deadline, f"{program!r} did not start"
                time.sleep(0.01)
        monkeypatch.setattr(cpucap.netns, "pids_in", lambda ns: [os.getpid(), master.pid, server.pid])
        assert cpucap.server_host_pids("wb-lab-test") == [server.pid]
    finally:
        for proc in (master, server):
            proc.kill()
            proc.wait()
