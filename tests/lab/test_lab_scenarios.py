"""`workbench lab --scenario`: each published story runs to its end in its reduced form; the broken-tso story's
run also shows a path that breaks offloaded packets (collapse with the server's TSO on, recovery with it off); and
the lab's client window clamp holds every streaming client's download at window / RTT, bound by the window."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from tests.lab.concurrent_labs import DRAIN_DEADLINE_S, ConcurrentLabs, LabJob
from tests.schema_check import assert_valid_run_document
from workbench.lab import scenarios

REPO = Path(__file__).resolve().parents[2]

needs_lab = pytest.mark.skipif(lab_unavailable() is not None, reason=lab_unavailable() or "")


def _workbench(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


EACH_STORY = "test_each_scenario_runs_to_its_end_in_its_reduced_form"
MEASURED_STORY = "broken-tso"  # its offload test compares figures: run alone, not beside the concurrent runs


def concurrent_lab_jobs(items: list[pytest.Item], tmp_path_factory: pytest.TempPathFactory) -> list[LabJob]:
    """One run per selected story, beside the other concurrent lab runs (tests/lab/conftest.py): their reduced
    forms are checked for what they show, not for figures (but broken-tso's: measured_story). A story builds a lab
    per variant, one after the other."""
    selected = {
        item.callspec.params["name"]
        for item in items
        if getattr(item, "originalname", "") == EACH_STORY and hasattr(item, "callspec")
    }
    jobs = []
    for name in (n for n in scenarios.SCENARIOS if n in selected and n != MEASURED_STORY):
        tmp = tmp_path_factory.mktemp(f"story-{name}")
        jobs.append(LabJob(f"story {name}", tmp, functools.partial(_story, tmp, name), labs=_labs(name)))
    return jobs


# Flags typed beside --scenario win over its reduced form. No test reads the link's own goodput meter, so it is
# skipped; a story checked for what it shows (not measured_story) needs its raw TCP only to have a figure.
ROWS_ONLY = ["--goodput-duration", "0"]
SHOWN_ONLY = [*ROWS_ONLY, "--tcp-duration", "0.5", "--skip-iperf3"]


def _story(tmp: Path, name: str) -> subprocess.CompletedProcess:
    flags = ROWS_ONLY if name == MEASURED_STORY else SHOWN_ONLY
    return _workbench(tmp, "lab", "--scenario", name, "--quick", *flags, "--json", str(tmp / "story.json"))


def _labs(name: str) -> int:
    return len(scenarios.SCENARIOS[name].variants)


@pytest.fixture(scope="module")
def measured_story(
    concurrent_labs: ConcurrentLabs, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess]:
    """broken-tso's run, once the concurrent runs have ended: the offload test compares its two variants' raw TCP
    (the collapse is twenty times slower), and a sender short of a core sends fewer super-packets for the line to
    drop (beside three other labs its collapsed download once ran at 2.6 of 40.5 MB/s)."""
    concurrent_labs.drain(DRAIN_DEADLINE_S)
    tmp = tmp_path_factory.mktemp(f"story-{MEASURED_STORY}")
    return tmp, _story(tmp, MEASURED_STORY)


@pytest.mark.lab
@needs_lab
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=() if name == MEASURED_STORY else pytest.mark.concurrent_lab)
        for name in scenarios.SCENARIOS
    ],
)
def test_each_scenario_runs_to_its_end_in_its_reduced_form(name: str, request: pytest.FixtureRequest) -> None:
    story = scenarios.SCENARIOS[name]
    if name == MEASURED_STORY:
        tmp_path, proc = request.getfixturevalue("measured_story")
    else:
        tmp_path, proc = request.getfixturevalue("concurrent_labs").result(f"story {name}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    # the story's table: every published figure on its own line, beside a lab figure, and the verdicts
    table = out[out.index(f"story: {name}") :]
    for published in story.published:
        line = next((line for line in table.splitlines() if published.what in line), None)
        assert line is not None and published.figure in line, published.what
    assert "reduced form" in table and story.notes[0][:40] in " ".join(table.split())
    for variant in story.variants:
        assert f"verdict ({variant.name})" in table
        slug = variant.name.replace(" ", "-").replace(",", "")
        doc = json.loads((tmp_path / f"story-{slug}.json").read_text())
        assert_valid_run_document(doc)
        assert doc["results"] and all(r["error"] is None and r["verified"] for r in doc["results"]), variant.name
        assert doc["verdict"]
    # raw TCP always has a lab figure: each story's first published line (iperf, or the link)
    first = next(line for line in table.splitlines() if story.published[0].what in line)
    cells = [cell.strip() for cell in first.split("│")]  # "", what, published, lab, unit, ""
    assert cells[3] != "—" and float(cells[3].replace(",", "")) > 0, first


@pytest.mark.lab
@needs_lab
def test_a_sender_with_tso_on_collapses_on_a_line_that_breaks_offloads_and_recovers_with_them_off(
    measured_story: tuple[Path, subprocess.CompletedProcess],
) -> None:
    """A path that breaks offloaded packets, from the broken-tso story's reduced form (64 KiB copies, one each, 1 s
    of raw TCP each way: a collapsed flow still ends, it moves a few KB/s). With the server's TSO and GSO on, raw
    TCP down collapses, most of what the server sends is sent again, and the verdict names the offloads and the
    fix; with them off (switched on the server host's link device) the same line carries the download."""
    tmp_path, proc = measured_story
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    on = json.loads((tmp_path / "story-server-TSO-and-GSO-on.json").read_text())
    off = json.loads((tmp_path / "story-server-TSO-and-GSO-off.json").read_text())
    for doc in (on, off):
        assert_valid_run_document(doc)
        assert doc["link"]["breaks"] == "offloaded"
    # what the server host's link device had, as read back from its kernel
    assert off["link"]["offloads"]["server"]["offloads"]["tso"].startswith("off")
    assert on["link"]["offloads"]["server"]["offloads"]["tso"].startswith("on")
    down_on, down_off = on["baseline"]["down_bytes_per_s"], off["baseline"]["down_bytes_per_s"]
    assert down_off and down_on is not None and down_on < down_off / 20, (down_on, down_off)
    # most of what a collapsed sender sends is sent again: the probe's own counters, or the copy's
    probe = (on["baseline"].get("tcp") or {}).get("download") or {}
    shares = [probe.get("retrans_fraction") if probe.get("side") == "sender" else None]
    shares += [r.get("retransmitted_share") for r in on["results"]]
    assert max((s for s in shares if s is not None), default=0.0) > 0.1, shares
    verdict = " ".join(on["verdict"])
    assert "TSO" in verdict and "ethtool -K" in verdict and "tso off gso off" in verdict, on["verdict"]
    assert 3 <= len(on["verdict"]) <= 6
    print("TSO on :", on["baseline"]["down_bytes_per_s"], shares, on["verdict"])
    print("TSO off:", off["baseline"]["down_bytes_per_s"], [r.get("median_bytes_per_s") for r in off["results"]])


@pytest.mark.lab
@needs_lab
def test_a_client_window_holds_every_streaming_download_at_window_over_rtt(tmp_path: Path) -> None:
    doc_path = tmp_path / "clamped.json"
    clients = "http/curl,http/aiohttp,ftp/ftplib,ftp/curl,smb/smbclient"
    proc = _workbench(
        tmp_path, "lab", "--client-window", "64K", "--protocols", clients, "--directions", "download",
        "--sizes", "48M", "--small", "none", "--repeat", "2", "--warmup", "0", "--tcp-duration", "3", "--skip-iperf3",
        "--goodput-duration", "0", "--json", str(doc_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    assert doc["link"]["client_window_bytes"] == 65536 and not doc["link"]["client_window_ports"]
    # bytes/s: 23.4 MB/s at 2.8 ms. 48 MiB copies: smbclient's timed copy includes its login (~80 ms), which
    # a 16 MiB copy lets cost it 11 % of the rate, a 48 MiB one 4 % (a 32 MiB copy, with a busy machine, came to
    # 0.82 of it)
    expected = 65536 / (doc["link"]["rtt_ms"] / 1000)
    rows = {f"{r['protocol']}/{r['client']}": r for r in doc["results"]}
    assert sorted(rows) == sorted(clients.split(","))
    for label, row in rows.items():
        # The faster of two copies: the window caps both, while a neighbour's burst on these 2 shared cores only
        # ever slows one. Too fast would be the window not holding: the best copy shows it, within 15 %. Slower is
        # the machine, not the window: on a slow day both of smbclient's copies came to 0.845 of window/RTT (and a
        # single copy to 0.849 in a full test run once), so below only as far as a ceiling still explains a rate.
        rate = max(s["bytes"] / s["seconds"] for s in row["samples"])
        assert 0.75 <= rate / expected <= 1.15, (label, rate, expected)
        # The window is a ceiling that explains the rate. It binds, or raw TCP does: the raw-TCP probe runs under
        # the same clamp, so the two are one limit, and a probe slowed by a busy machine (21.1 of 23.4 MB/s once,
        # in a full test run) comes out the lower of them. Its 3 s: on a slow machine a probe of 1 s came to 19.7
        # MB/s and one of 2 s to 21.4, each 5 % under aiohttp's copy, which then beat its raw-TCP ceiling.
        window = {b["label"]: b["bytes_per_s"] for b in row["details"]["bounds"]}.get("window")
        assert window is not None and abs(rate / window - 1) <= 0.25, (label, rate, window)
        assert row["bound"] in ("window", "raw-tcp"), (label, row["bound"], row.get("bound_explanation"))
        tcp = row["tcp"]
        if tcp and tcp.get("limit"):  # seen by the sender's own counters: the server's, here
            assert tcp["limit"] == "receive-window", (label, tcp)
