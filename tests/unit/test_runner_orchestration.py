"""The runner's orchestration without servers: warm-up, samples, a failed copy and the reconnect after it,
unavailable clients, each finished row handed on in order, Ctrl-C mid-row.

The client and the far host are the pure-logic fakes of tests/fakes.py; the copies are real file copies
between two temporary directories, verified by the runner against the manifest's hashes as always.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import FAKE, FAKE_NO_HELPER, FAKE_UNAVAILABLE, FakeFarHost, ListRecorder, Script
from workbench.core.context import EmulatorReport, LabContext
from workbench.core.plan import Plan
from workbench.core.results import Explanation, Run
from workbench.core.runner import UNAVAILABLE, execute
from workbench.protocols.base import ClientOptions
from workbench.protocols.registry import Entry
from workbench.shared.credentials import Credentials
from workbench.shared.sizes import SmallSet
from workbench.shared.target import Target


def plan_of(
    tmp_path: Path,
    entries: tuple[Entry, ...] = (FAKE,),
    directions: tuple[str, ...] = ("upload", "download"),
    sizes: tuple[int, ...] = (64 << 10,),
    repeat: int = 2,
    warmup: int = 1,
    small_sets: tuple[SmallSet, ...] = (),
) -> Plan:
    return Plan(
        target=Target("127.0.0.1", Credentials("u", "p")),
        entries=entries,
        directions=directions,
        sizes=sizes,
        small_sets=small_sets,
        profile="random",
        seed=1,
        repeat=repeat,
        warmup=warmup,
        tcp_duration=1.0,
        files_dir=tmp_path / "files",
        options=ClientOptions(stall_timeout_s=5.0),
        iperf3=False,
    )


def copies(script: Script) -> list[tuple[int, str, int]]:
    """(copy number, remote path, session) of every copy the fake client was asked for."""
    return [(n, remote, session) for kind, *rest in script.events if kind == "copy" for n, remote, session in [rest]]


def test_warm_up_copies_are_not_samples(tmp_path: Path, script: Script) -> None:
    far = FakeFarHost(script.far_root)
    recorder = ListRecorder(script.events)
    run = execute(plan_of(tmp_path, directions=("upload",), repeat=3, warmup=2), recorder, far=far)

    [row] = run.results
    assert (row.label, row.direction, row.error) == ("fake/scripted", "upload", None)
    assert row.warmup == 2 and len(row.samples) == 3  # five copies made, the first two untimed
    assert script.copies == 5
    assert all(s.verified and s.bytes == 64 << 10 for s in row.samples)
    assert row.verified
    assert run.meta["plan"]["repeat"] == 3 and run.meta["plan"]["warmup"] == 2
    assert recorder.finished is run and "finished_utc" in run.meta
    assert far.deleted[-1] == run.meta["upload_dir"]  # the run's upload directory is removed on the far host


def test_a_failed_copy_fails_its_row_reconnects_and_the_next_row_still_runs(tmp_path: Path, script: Script) -> None:
    script.fail_copies = {2}  # the upload row's first timed copy (copy 1 is its warm-up)
    recorder = ListRecorder(script.events)
    run = execute(plan_of(tmp_path), recorder, far=FakeFarHost(script.far_root))

    upload, download = run.results
    assert upload.error is not None and "connection reset" in upload.error
    assert len(upload.samples) == 1 and upload.samples[0].error == upload.error  # no further copy on a broken row
    assert download.error is None and download.verified and len(download.samples) == 2
    # the download row ran on a fresh session: the broken one was closed and a new one connected
    assert [e[:1] + e[-1:] for e in script.events if e[0] in ("connect", "close")] == [
        ("connect", 1),
        ("close", 1),
        ("connect", 2),
        ("close", 2),
    ]
    assert [s for n, _, s in copies(script) if n > 2] == [2, 2, 2]


def test_an_unavailable_client_gives_unavailable_rows_and_the_others_run(tmp_path: Path, script: Script) -> None:
    plan = plan_of(tmp_path, entries=(FAKE_UNAVAILABLE, FAKE_NO_HELPER, FAKE), directions=("upload", "download"))
    run = execute(plan, ListRecorder(script.events), far=FakeFarHost(script.far_root))

    by_label = {(r.label, r.direction): r for r in run.results}
    for label in ("fake/absent", "fake/nohelper"):
        for direction in ("upload", "download"):
            error = by_label[(label, direction)].error
            assert error is not None and error.startswith(UNAVAILABLE), error
    assert "fakelib not importable" in str(by_label[("fake/absent", "upload")].error)
    assert "only on a platform" in str(by_label[("fake/nohelper", "upload")].error)
    assert by_label[("fake/scripted", "upload")].verified and by_label[("fake/scripted", "download")].verified
    assert script.copies == 2 * (1 + 2)  # only the available client copied


def test_each_finished_row_reaches_the_recorder_in_order_before_the_next_row_starts(
    tmp_path: Path, script: Script
) -> None:
    plan = plan_of(tmp_path, sizes=(16 << 10, 64 << 10), repeat=1, warmup=0)
    recorder = ListRecorder(script.events)
    run = execute(plan, recorder, far=FakeFarHost(script.far_root))

    assert [index for index, _ in recorder.rows] == [0, 1, 2, 3]
    assert [row for _, row in recorder.rows] == list(run.results)
    assert [(r.direction, r.file_set) for r in run.results] == [
        ("upload", "16K"),
        ("upload", "64K"),
        ("download", "16K"),
        ("download", "64K"),
    ]
    # each row is handed on as soon as it finishes: between its own copy and the next row's
    kinds = [e[0] for e in script.events if e[0] in ("copy", "row")]
    assert kinds == ["copy", "row"] * 4


def test_ctrl_c_mid_row_keeps_the_rows_already_finished(tmp_path: Path, script: Script) -> None:
    script.interrupt_copy = 4  # upload row: copies 1-3; the download row's warm-up is interrupted
    recorder = ListRecorder(script.events)
    far = FakeFarHost(script.far_root)
    with pytest.raises(KeyboardInterrupt):
        execute(plan_of(tmp_path), recorder, far=far)

    finished = recorder.finished
    assert finished is not None  # the run as it ended, for the database and the JSON document
    assert [(r.direction, r.verified) for r in finished.results] == [("upload", True)]
    assert [index for index, _ in recorder.rows] == [0]
    assert "finished_utc" in finished.meta
    assert far.deleted[-1] == finished.meta["upload_dir"]  # the run's upload directory goes with it
    assert [e for e in script.events if e[0] == "close"] == [("close", 1)]  # the session was closed


class _Watch:
    def __init__(self) -> None:
        self.read = 0

    def report(self) -> EmulatorReport:
        self.read += 1
        return EmulatorReport(cpu_fraction=0.9, drops=3, seconds=1.5, notes=("the link emulator was busy",))


def test_a_lab_context_adds_the_link_the_sweep_and_the_emulator_figures(tmp_path: Path, script: Script) -> None:
    watch = _Watch()
    lab = LabContext(
        link={"rate_bits_per_s": 8e8, "rtt_ms": 1.0},
        window_sweep=({"window_bytes": 65536},),
        emulator=watch,
        after_baseline=lambda: script.events.append(("after_baseline",)),
    )
    run = execute(
        plan_of(tmp_path, directions=("upload",), repeat=1, warmup=0),
        ListRecorder(script.events),
        far=FakeFarHost(script.far_root),
        lab=lab,
    )
    assert watch.read == 1  # read once, after the copies
    # the lab's stalls start once the baseline is in (the hook runs after it) and before the first copy
    names = [e[0] for e in script.events]
    assert names.count("after_baseline") == 1 and names.index("after_baseline") < names.index("row")
    assert run.link == {
        "rate_bits_per_s": 8e8,
        "rtt_ms": 1.0,
        "emulator": {"cpu_fraction": 0.9, "drops": 3, "offloaded_drops": 0, "seconds": 1.5},
    }
    assert run.window_sweep == ({"window_bytes": 65536},)
    assert "the link emulator was busy" in run.warnings
    assert lab.link == {"rate_bits_per_s": 8e8, "rtt_ms": 1.0}  # the context itself is left as it was


def test_the_explanation_reads_the_run_as_recorded_and_a_failing_one_still_records_it(
    tmp_path: Path, script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.core.explain as explain_module

    real = explain_module.explain
    seen: list[Run] = []

    def watching(run: Run, host: str) -> Explanation:
        seen.append(run)
        return real(run, host)

    monkeypatch.setattr(explain_module, "explain", watching)
    watch = _Watch()
    lab = LabContext(link={"rate_bits_per_s": 8e8, "rtt_ms": 1.0}, window_sweep=None, emulator=watch)
    recorder = ListRecorder(script.events)
    run = execute(
        plan_of(tmp_path, directions=("upload",), repeat=1, warmup=0),
        recorder,
        far=FakeFarHost(script.far_root),
        lab=lab,
    )

    [read] = seen  # one run, explained once: the very one recorded, the link's own account already in it
    assert read.explanation is None and "finished_utc" in read.meta and read.link is not None
    assert read.link["emulator"]["drops"] == 3
    assert recorder.finished is run and run.explanation is not None
    assert run == read.explained(run.explanation)

    def failing(run: Run, host: str) -> Explanation:
        raise ValueError("no explanation")

    monkeypatch.setattr(explain_module, "explain", failing)
    recorder = ListRecorder(script.events)
    with pytest.raises(ValueError):
        execute(
            plan_of(tmp_path, directions=("upload",), repeat=1, warmup=0), recorder, far=FakeFarHost(script.far_root)
        )
    assert recorder.finished is not None and recorder.finished.explanation is None
    assert [r.verified for r in recorder.finished.results] == [True]  # the measured row is kept


@pytest.mark.parametrize(
    ("seconds", "said"), [(0.5, "(0.5 s each way)"), (1.0, "(1 s each way)"), (10.0, "(10 s each way)")]
)
def test_the_baseline_status_says_the_probe_duration_as_set(tmp_path: Path, seconds: float, said: str) -> None:
    import dataclasses

    from workbench.core.farhost import ServedFarHost

    plan = dataclasses.replace(plan_of(tmp_path, ()), tcp_duration=seconds)
    with ServedFarHost(plan.target) as far:  # no call is made: the status is the plan's
        assert said in far.describe_baseline(plan)
