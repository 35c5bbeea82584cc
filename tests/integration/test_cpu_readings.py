"""The CPU readings a copy's figures come from: the lab server host's, read through its cgroup with the reading
calls and serve's sampling left out (against a real serve), and the client's reaped children's to the microsecond.
That the cgroup keeps the CPU of a process that ended is tests/lab/test_server_cpu_cap.py's, on the real kernel."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.serve_fixtures import ServeRunner
from workbench.core import runner
from workbench.core.farhost import ServedFarHost
from workbench.lab import servercpu

# Each cgroup reading of a scripted host: before and after the first call, then before and after the second. The
# calls took 4 and 3 ms of the group's CPU; 46 ms passed between them (10.050 - 10.004), the copy's.
READINGS = (10.000, 10.004, 10.050, 10.053)
BETWEEN_S = READINGS[2] - READINGS[1]


def _scripted(readings: tuple[float, ...]) -> Iterator[float]:
    yield from readings


def test_a_copys_server_cpu_is_the_groups_between_the_calls_less_serves_sampling(served: ServeRunner) -> None:
    readings = _scripted(READINGS)
    far = servercpu.CgroupFarHost(served.target(), lambda: next(readings), timeout=10.0)
    first = far.cpu_seconds()
    sampling0 = far.sampling_cpu_s
    assert far.cpu_waits_ns() is not None  # serve is still asked: its threads' waits come with each reading
    second = far.cpu_seconds()
    sampling1 = far.sampling_cpu_s
    assert first is not None and second is not None and sampling0 is not None and sampling1 is not None
    assert second - first == pytest.approx(BETWEEN_S - (sampling1 - sampling0), abs=1e-9)
    assert 0 <= sampling1 - sampling0 < BETWEEN_S  # no watch ran: serve's sampling took (next to) nothing


def test_a_host_without_a_counting_cgroup_is_read_as_any_serve(served: ServeRunner) -> None:
    plain = servercpu.far_host(served.target(), None, timeout=10.0)
    assert type(plain) is ServedFarHost and servercpu.method(plain) == servercpu.PROCESS_TREES
    assert type(servercpu.far_host(served.target(), lambda: None, timeout=10.0)) is ServedFarHost
    counted = servercpu.far_host(served.target(), lambda: 1.0, timeout=10.0)
    assert servercpu.method(counted) == servercpu.CGROUP


def test_a_reading_serve_cannot_answer_is_none_not_the_cgroups_alone(served: ServeRunner) -> None:
    far = servercpu.CgroupFarHost(served.target(), lambda: 1.0, timeout=10.0)
    far.base = far.base.replace("/ctl/", "/nothing-here/")  # serve answers 404: no waits, no sampling figure
    assert far.cpu_seconds() is None


# busy until its CPU clock (start-up included) reads `s`, then says what it reads and ends at once: the
# interpreter's own shutdown (3.8-5.1 ms of CPU on a loaded CI machine) would come after its last reading
BUSY = (
    "import os, time\nwhile time.process_time() < {s}:\n    pass\n"
    "os.write(1, str(time.process_time()).encode())\nos._exit(0)"
)


def test_a_reaped_childs_cpu_is_read_finer_than_a_clock_tick() -> None:
    """os.times() reads children in 10 ms ticks; the runner's reading is what each child says it used."""
    gaps, off_tick = [], []
    for busy_s in (0.023, 0.027, 0.034, 0.041, 0.046):
        before = runner._cpu_now()[1]
        out = subprocess.run([sys.executable, "-S", "-c", BUSY.format(s=busy_s)], capture_output=True, check=True)
        read_s = runner._cpu_now()[1] - before
        gaps.append(read_s - float(out.stdout))  # the child's own CPU clock at its last line: only its exit follows
        off_tick.append(abs(read_s * 100 - round(read_s * 100)) > 0.05)
    assert all(-0.0005 < gap < 0.005 for gap in gaps), gaps
    assert any(off_tick)  # in ticks, every reading would be a whole number of 10 ms
