"""The fixed cost per copy seen before a copy's data move, and the client's CPU per file the per-file ceiling
charges: pure arithmetic on made-up copies."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from workbench.core import fixedcost
from workbench.core.ceiling import Bound, format_ms
from workbench.core.explain import _after_start, _lost_after_start_s, explain
from workbench.core.results import Baseline, Result, RowExplanation, Run, Sample
from workbench.protocols import exchanges
from workbench.protocols.details import ClientDetails

MIB = 1 << 20
PATH = 62.5e6  # bytes/s
SLOT = 6_000_000  # bytes per 100 ms slot once streaming: 60 MB/s


def _streaming(lead: int, slots: int = 11) -> tuple[int, ...]:
    return (0,) * lead + (SLOT,) * slots


def test_the_start_up_is_the_slots_before_the_data_moved_less_what_a_lumpy_meter_may_hide() -> None:
    copy = fixedcost.Copy(bytes=16 * SLOT, seconds=1.6, intervals=_streaming(5))
    # five slots under a tenth of the mean slot (6 MB each: 600 kB), less 6 MB at 62.5 MB/s
    assert fixedcost.startup_s(copy, 0.1, PATH) == pytest.approx(0.5 - SLOT / PATH)
    # a slot that moved a little (a login's bytes) is still start-up; one that moved a tenth of the mean is not
    little = fixedcost.Copy(bytes=16 * SLOT, seconds=1.6, intervals=(10_000, 0, 0, 0, 590_000, *(SLOT,) * 11))
    assert fixedcost.startup_s(little, 0.1, PATH) == pytest.approx(0.5 - SLOT / PATH)
    moving = fixedcost.Copy(bytes=16 * SLOT, seconds=1.6, intervals=(700_000, *(SLOT,) * 15))
    assert fixedcost.startup_s(moving, 0.1, PATH) == 0.0
    # a meter that sees a local file grow 16 MiB at a time: three empty slots are mostly the lump's, not start-up
    lumpy = fixedcost.Copy(bytes=64 * MIB, seconds=1.25, intervals=(0, 0, 0, 16 * MIB, *(8 * MIB,) * 6))
    assert fixedcost.startup_s(lumpy, 0.1, PATH) == pytest.approx(0.3 - 16 * MIB / PATH)
    assert fixedcost.startup_s(fixedcost.Copy(bytes=1, seconds=0.1, intervals=()), 0.1, PATH) == 0.0


def test_a_start_up_cost_is_the_median_copys_and_too_small_a_one_is_none() -> None:
    copies = [fixedcost.Copy(16 * SLOT, 1.6 + 0.1 * lead, _streaming(lead + 5), 0.4) for lead in (0, 1, 2)]
    cost = fixedcost.startup(copies, 0.1, PATH)
    assert cost is not None and cost.method == "start-up" and cost.sizes == (16 * SLOT,)
    assert cost.fixed_s == pytest.approx(0.6 - SLOT / PATH)
    assert cost.client_cpu_s == 0.4
    assert cost.streaming_bytes_per_s == pytest.approx(16 * SLOT / (1.7 - cost.fixed_s))
    assert fixedcost.startup([fixedcost.Copy(16 * SLOT, 1.6, _streaming(1))], 0.1, PATH) is None  # under 20 ms
    assert fixedcost.startup([], 0.1, PATH) is None


def _row(label: str, direction: str, name: str, size: int, files: int, samples: list[Sample], **details: Any) -> Result:
    protocol, client = label.split("/")
    return Result(
        protocol, client, direction, name, size, files, samples=tuple(samples), details=ClientDetails(**details)
    )


def test_fixed_costs_come_from_a_streamed_set_and_else_from_a_per_copy_clients_start_up() -> None:
    big = [Sample(bytes=64 * MIB, seconds=0.18 + 64 * MIB / 60e6, client_cpu_s=0.25) for _ in range(3)]
    small = [Sample(bytes=100 * 65536, seconds=0.18 + 100 * 65536 / 60e6, files=100) for _ in range(3)]
    # rsync streams its sets: the set is a second size of the same stream, and the fit finds 180 ms and 60 MB/s
    rsync = [
        _row("rsync/daemon", "upload", "64M", 64 * MIB, 1, big, timed_includes_setup=True),
        _row(
            "rsync/daemon", "upload", "100x64K", 100 * 65536, 100, small, timed_includes_setup=True, streams_sets=True
        ),
    ]
    cost = fixedcost.of_rows(rsync, PATH)
    assert cost is not None and cost.method == "fit"
    assert cost.fixed_s == pytest.approx(0.18) and cost.streaming_bytes_per_s == pytest.approx(60e6)
    assert cost.client_cpu_s == 0.25  # the single file's CPU, which paid the start-up
    # a set that costs more than its bytes and a start-up (work per file) draws a line faster than the path: no
    # fit, and rsync over ssh, started per copy, is left its start-up
    slow_set = [Sample(bytes=100 * 65536, seconds=0.8 + 100 * 65536 / 60e6, files=100) for _ in range(3)]
    late = [Sample(bytes=64 * MIB, seconds=1.7, intervals=_streaming(6, 12)) for _ in range(3)]
    overstated = [
        _row("rsync/ssh", "upload", "64M", 64 * MIB, 1, late, timed_includes_setup=True),
        _row(
            "rsync/ssh", "upload", "100x64K", 100 * 65536, 100, slow_set, timed_includes_setup=True, streams_sets=True
        ),
    ]
    assert fixedcost.fit([(s.bytes, s.seconds) for r in overstated for s in r.good_samples]) is not None
    fallback = fixedcost.of_rows(overstated, PATH)
    assert fallback is not None and fallback.method == "start-up"
    # a client whose sets are file by file gives one size: a per-copy client's start-up, else nothing
    late = [Sample(bytes=64 * MIB, seconds=1.7, intervals=_streaming(6, 12), client_cpu_s=0.4) for _ in range(3)]
    sftp = [_row("sftp/openssh", "download", "64M", 64 * MIB, 1, late, timed_includes_setup=True)]
    started = fixedcost.of_rows(sftp, PATH)
    assert started is not None and started.method == "start-up"
    assert started.fixed_s == pytest.approx(0.6 - SLOT / PATH)
    logged_in = [_row("sftp/paramiko", "download", "64M", 64 * MIB, 1, late, timed_includes_setup=False)]
    assert fixedcost.of_rows(logged_in, PATH) is None  # its login is outside the timed copy
    assert fixedcost.of_rows(sftp, None) is None


def test_the_clients_cpu_per_file_leaves_out_what_its_start_up_could_have_taken() -> None:
    samples = [Sample(bytes=100 * 65536, seconds=6.0, files=100, client_cpu_s=cpu) for cpu in (1.0, 1.1, 1.2)]
    row = _row("ftp/curl", "download", "100x64K", 100 * 65536, 100, samples)
    # 1.1 s of CPU, less the per-copy allowance, over 100 files
    assert fixedcost.client_cpu_per_file_s(row, None) == pytest.approx(0.0109)
    cost = fixedcost.FixedCost(0.1, 60e6, (64 * MIB,), "start-up", client_cpu_s=0.25)
    assert fixedcost.client_cpu_per_file_s(row, cost) == pytest.approx(0.0084)
    assert fixedcost.client_cpu_per_file_s(row, fixedcost.FixedCost(0.1, 60e6, (1,), client_cpu_s=2.0)) == 0.0


def _set(label: str, seconds: float, client_cpu_s: float, server_cpu_s: float = 0.0, **details: Any) -> Result:
    cpu_s = client_cpu_s + fixedcost.PER_COPY_CPU_S  # the charge leaves a copy's once-only work out
    server_s = server_cpu_s + fixedcost.PER_COPY_CPU_S if server_cpu_s else 0.0
    samples = [
        Sample(bytes=50 * 65536, seconds=seconds, files=50, verified=True, client_cpu_s=cpu_s, server_cpu_s=server_s)
        for _ in range(3)
    ]
    return _row(label, "download", "50x64K", 50 * 65536, 50, samples, **details)


def _why(row: Result) -> RowExplanation:
    base = Baseline(up_bytes_per_s=PATH, down_bytes_per_s=PATH, rtt_ms=2.8)
    return explain(Run(id=1, meta={}, baseline=base, results=(row,)), "10.77.0.2").rows[0]


def test_the_per_file_ceiling_charges_a_one_file_at_a_time_clients_cpu_beyond_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(exchanges.COUNTED, ("smb/pysmb", "download"), exchanges.Exchanges(per_file=4, per_set=0))
    monkeypatch.setitem(exchanges.COUNTED, ("smb/smbprotocol", "download"), exchanges.Exchanges(per_file=4, per_set=0))
    wire_s = 4 * 0.0028 + 65536 / PATH  # 12.25 ms per file
    # 3 ms of client CPU per file, 1.05 of it while the file's bytes move: 1.95 ms more per file, which this
    # copy at 14.4 ms per file meets
    row = _set("smb/pysmb", 50 * 0.0144, client_cpu_s=50 * 0.003)
    why = _why(row)
    per_file = next(b for b in why.bounds if b.label == "per-file")
    assert per_file.bytes_per_s == pytest.approx(65536 / (wire_s + 0.003 - 65536 / PATH))
    assert "ms client per file" in per_file.explanation and why.bound == "per-file"
    # CPU that fits within the bytes' time costs nothing more
    light = next(b for b in _why(_set("smb/pysmb", 0.7, client_cpu_s=50 * 0.0005)).bounds if b.label == "per-file")
    assert light.bytes_per_s == pytest.approx(65536 / wire_s) and "4 RTT + 64 KiB per file" in light.explanation
    # a client with files in flight may spend its CPU while it waits: not charged
    overlapping = _set("smb/smbprotocol", 50 * 0.0144, client_cpu_s=50 * 0.003, files_in_flight=4)
    flight = next(b for b in _why(overlapping).bounds if b.label == "per-file")
    assert "client" not in flight.explanation
    # the charge is a ceiling like any other: a copy faster than it is unexplained, never labelled by it
    fast = _why(_set("smb/pysmb", 50 * 0.0125, client_cpu_s=50 * 0.003))
    assert fast.bound == "unexplained" and fast.bound_explanation is not None
    assert "beats its per-file ceiling" in fast.bound_explanation
    # a copy far slower says what is left: neither wire nor CPU
    slow = _why(_set("smb/pysmb", 50 * 0.03, client_cpu_s=50 * 0.003))
    assert slow.bound == "unexplained" and slow.bound_explanation is not None
    assert "off the wire and off its CPU" in slow.bound_explanation
    # before that: the bytes and the receiving client's CPU, charged as overlapping, may have run one after another
    # (its bytes' 1.05 ms would add to the client's 3 ms)
    said = "(its bytes and the client's CPU) may have run in turn (in turn they would add ≈1.0 ms per file)"
    assert f"{said}, or time" in slow.bound_explanation
    # with how much running in turn would add per file: the overlapping parts but the longest, here the bytes' 1.05
    # ms (64 KiB at 62.5 MB/s) beside the client's 3, so that a reader sees it covers 1 ms of the 14.8 missing; the
    # sending server's 1 ms is charged in turn already
    both = _why(_set("smb/pysmb", 50 * 0.03, client_cpu_s=50 * 0.003, server_cpu_s=50 * 0.001))
    both_per_file = next(b for b in both.bounds or () if b.label == "per-file")
    assert both_per_file.bytes_per_s == pytest.approx(65536 / (wire_s + 0.001 + 0.003 - 65536 / PATH))
    assert "may have run in turn (in turn they would add ≈1.0 ms per file), or time" in (both.bound_explanation or "")
    # a copy whose ceiling charged one part only (no CPU measured on either side) has nothing that may have run in
    # turn, and says its time off the wire at once
    bytes_only = _why(_set("smb/pysmb", 50 * 0.03, client_cpu_s=0.0)).bound_explanation or ""
    assert "in turn" not in bytes_only and "per file (≈" in bytes_only and "): time the client" in bytes_only
    # a client with files in flight had no CPU charged: only its bytes and the server's are named
    slow_flight = _why(
        _set("smb/smbprotocol", 50 * 0.03, client_cpu_s=50 * 0.003, server_cpu_s=50 * 0.001, files_in_flight=4)
    )
    assert "(its bytes and the server's CPU) may have run in turn" in (slow_flight.bound_explanation or "")


def test_a_per_copy_clients_start_up_is_paid_by_its_single_file_and_its_set() -> None:
    late = [Sample(bytes=64 * MIB, seconds=1.7, intervals=_streaming(6, 12), client_cpu_s=0.4) for _ in range(3)]
    single = _row("sftp/openssh", "download", "64M", 64 * MIB, 1, late, timed_includes_setup=True)
    base = Baseline(up_bytes_per_s=PATH, down_bytes_per_s=PATH, rtt_ms=2.8)
    explained = explain(Run(id=1, meta={}, baseline=base, results=(single,)), "10.77.0.2")
    (why,) = explained.rows
    fixed = 0.6 - SLOT / PATH
    assert why.fixed_cost_s == pytest.approx(fixed, abs=1e-4) and why.bound == "raw-tcp"
    assert why.ceiling_bytes_per_s == pytest.approx(64 * MIB / (fixed + 64 * MIB / PATH))
    assert any("fixed per copy (before its data moved)" in n for n in explained.notes)


def test_a_streamed_set_far_from_its_ceiling_names_each_sides_cpu_per_file() -> None:
    samples = [
        Sample(bytes=100 * 65536, seconds=0.6, files=100, verified=True, client_cpu_s=0.1, server_cpu_s=0.3)
        for _ in range(3)
    ]
    row = _row("rsync/daemon", "upload", "100x64K", 100 * 65536, 100, samples, streams_sets=True)
    why = _why(row)
    assert why.bound == "unexplained" and why.bound_explanation is not None
    assert "a set streamed whole doing each file's own work (CPU per file: client 1.0 ms, server 3.0 ms" in (
        why.bound_explanation
    )


def _ssh_rows(set_intervals: tuple[int, ...], **details: Any) -> tuple[Result, Result]:
    """rsync over SSH: a 64M copy whose data moved after four slots of start-up, and a 100 × 64 KiB set streamed
    whole that took 0.75 s with `set_intervals` of progress."""
    late = [Sample(bytes=64 * MIB, seconds=1.5, intervals=_streaming(4, 12), client_cpu_s=0.4) for _ in range(3)]
    kind = {"timed_includes_setup": True, "streams_sets": True, **details}
    single = _row("rsync/ssh", "upload", "64M", 64 * MIB, 1, late, **kind)
    copies = [
        Sample(bytes=100 * 65536, seconds=0.75, files=100, verified=True, intervals=set_intervals) for _ in range(3)
    ]
    return single, _row("rsync/ssh", "upload", "100x64K", 100 * 65536, 100, copies, **kind)


def _set_explanation(single: Result, streamed: Result) -> str:
    base = Baseline(up_bytes_per_s=PATH, down_bytes_per_s=PATH, rtt_ms=2.8)
    explained = explain(Run(id=1, meta={}, baseline=base, results=(single, streamed)), "10.77.0.2")
    why = explained.rows[1]
    assert why.bound == "unexplained" and why.bound_explanation is not None
    return why.bound_explanation


STALLED = (0, 0, 0, 0, 3_000_000, 1_000_000, 1_000_000, 1_500_000, 53_600)  # 6.55 MB, slowed once it started


def test_a_copy_slow_after_its_data_started_says_what_a_fixed_cost_seen_before_leaves_out() -> None:
    # after the slot its data started in and before its last moving one (both partial), three slots moved 3.5 MB;
    # with the largest slot's 3 MB allowed for, at the raw-TCP ceiling's 62.5 MB/s that is 196 ms lost
    said = _set_explanation(*_ssh_rows(STALLED))
    lost = format_ms(0.3 - 6_500_000 / PATH)
    assert lost == "196 ms"
    assert (
        f"≈{lost} of it in the median copy after its data started, which a fixed cost read before its data moved "
        "leaves out: time the client"
    ) in said
    # a copy that moved at the ceiling's rate once its data started has nothing to add
    steady = _set_explanation(*_ssh_rows((0, 0, 0, 0, 200_000, 6_250_000, 103_600)))
    assert "after its data started" not in steady


def test_time_after_the_data_started_is_said_only_against_a_start_up_cost_and_within_the_gap() -> None:
    _, streamed = _ssh_rows(STALLED)
    bound = Bound("raw-tcp", PATH, "raw-tcp ≤ 62.5 MB/s")
    start_up = fixedcost.FixedCost(0.3, PATH, (64 * MIB,), "start-up")
    assert "≈196 ms of it" in _after_start(streamed, bound, 0.5, PATH, start_up)
    # never more than the gap the row misses its ceiling by
    assert "≈100 ms of it" in _after_start(streamed, bound, 0.1, PATH, start_up)
    # a fitted fixed cost holds what the copies spent after their data started: nothing to say
    assert _after_start(streamed, bound, 0.5, PATH, dataclasses.replace(start_up, method="fit")) == ""
    assert _after_start(streamed, bound, 0.5, PATH, None) == ""
    # nor is it said of a set copied file by file: its per-file ceiling charges each file's work, not a stream's
    _, per_file = _ssh_rows(STALLED, streams_sets=False)
    assert _after_start(per_file, bound, 0.5, PATH, start_up) == ""
    # under 10 ms is within the slots' rounding: here 100 ms less 2.9 MB twice at 62.5 MB/s, 7.2 ms
    brisk = dataclasses.replace(
        streamed,
        samples=tuple(dataclasses.replace(c, intervals=(0, 2_900_000, 2_900_000, 1)) for c in streamed.samples),
    )
    assert _lost_after_start_s(brisk.samples[0], PATH, PATH) == pytest.approx(0.1 - 5_800_000 / PATH)
    assert _after_start(brisk, bound, 0.5, PATH, start_up) == ""
    # two copies of three that cannot tell (seen in lumps): not said from the one left
    mixed = dataclasses.replace(
        streamed,
        samples=(
            streamed.samples[0],
            *(dataclasses.replace(c, intervals=(0, 8 * MIB, 0, 1)) for c in streamed.samples[1:]),
        ),
    )
    assert _after_start(mixed, bound, 0.5, PATH, start_up) == ""


def test_time_lost_after_the_data_started_is_not_read_off_a_meter_that_sees_lumps() -> None:
    lumps = Sample(bytes=64 * MIB, seconds=1.3, intervals=(0, 0, 8 * MIB, 0, 8 * MIB, 0, *(8 * MIB,) * 6))
    assert _lost_after_start_s(lumps, PATH, PATH) is None
    # seen smoothly, eleven slots between moved ten slots' worth at 60 MB/s, less one slot for a lump's edge
    smooth = (0, 0, SLOT, SLOT // 2, SLOT // 2, *(SLOT,) * 9, 1_000)
    copy = Sample(bytes=sum(smooth), seconds=1.5, intervals=smooth)
    assert _lost_after_start_s(copy, PATH, PATH) == pytest.approx(1.1 - 11 * SLOT / PATH)
    # no slot between the start and the last moving one: nothing to read
    assert _lost_after_start_s(Sample(bytes=SLOT, seconds=0.3, intervals=(0, SLOT // 2, SLOT // 2)), PATH, PATH) is None


def test_the_ceilings_charge_the_least_rtt_the_path_showed() -> None:
    base = Baseline(up_bytes_per_s=PATH, down_bytes_per_s=PATH, rtt_ms=3.44, details={"rtt_min_ms": 2.97})
    run = Run(id=1, meta={}, baseline=base, results=(), link={"rtt_ms": 2.81})
    assert run.least_rtt_ms == pytest.approx(2.81)  # the lab link's idle RTT
    assert dataclasses.replace(run, link=None).least_rtt_ms == pytest.approx(2.97)  # the probe's fastest ping
    # the least, whichever it is: here the probe's fastest ping under a link's idle RTT
    assert dataclasses.replace(run, link={"rtt_ms": 3.0}).least_rtt_ms == pytest.approx(2.97)
    assert Run(id=1, meta={}, baseline=Baseline(rtt_ms=3.44), results=()).least_rtt_ms == pytest.approx(3.44)
    assert Run(id=1, meta={}, baseline=Baseline(), results=()).least_rtt_ms is None
    # what is no RTT is left out: zero, a negative one, a bool, text
    odd = Baseline(rtt_ms=3.44, details={"rtt_min_ms": 0})
    for link_rtt in (0, -1.0, True, "2.0"):
        assert Run(id=1, meta={}, baseline=odd, results=(), link={"rtt_ms": link_rtt}).least_rtt_ms == 3.44


def test_a_per_file_ceiling_charges_the_least_rtt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(exchanges.COUNTED, ("smb/pysmb", "download"), exchanges.Exchanges(per_file=4, per_set=0))
    row = _set("smb/pysmb", 50 * 0.0144, client_cpu_s=50 * 0.003)
    base = Baseline(up_bytes_per_s=PATH, down_bytes_per_s=PATH, rtt_ms=3.44, details={"rtt_min_ms": 2.97})
    run = Run(id=1, meta={}, baseline=base, results=(row,), link={"rtt_ms": 2.8})
    per_file = next(b for b in explain(run, "10.77.0.2").rows[0].bounds or () if b.label == "per-file")
    assert per_file.bytes_per_s == pytest.approx(65536 / (4 * 0.0028 + 0.003))  # 4 × 2.8 ms, not 3.44
