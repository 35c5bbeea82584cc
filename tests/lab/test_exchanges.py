"""Each client's declared round trips per file and per set are what the lab link shows, and counts taken on
wifi-ac carry to the small-file sets of wan (40 ms) and gige.

Bounded: sets of 2 and 5 files of 64 KiB on wifi-ac, one of 3 on wan and sets of 4 and 16 on gige (the smaller for
gige's own CPU per file), one timed copy each.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.test_lab_run import _lab_reason
from workbench.core.ceiling import link_goodput_bytes_per_s
from workbench.core.explain import paces_bursts
from workbench.core.results import Run
from workbench.core.settings import default
from workbench.lab.exchangecount import (
    IN_FLIGHT_TURNS,
    ClientCount,
    count_clients,
    cpu_per_file_s,
    expected_s,
    lab_run,
    predicted_s,
)
from workbench.protocols import exchanges, registry

pytestmark = [pytest.mark.lab, pytest.mark.skipif(_lab_reason() is not None, reason=f"lab: {_lab_reason()}")]

FILES = (2, 5)
# A set's round trips as declared and as the wire shows them again: within 20 % or two round trips. The split
# between files and set moves from copy to copy (a fresh connection's slow-start flights merge or not; a client
# that defers its acknowledgements waits for them now per file, now at the end), the sum much less.
SET_SLACK_SHARE = 0.2
SET_SLACK_TRIPS = 2.0
PREDICTS = 0.25
HELD_SHARE = 0.8  # of the clients' predictions on wan (expectations on gige), the share within PREDICTS
# Without a warm-up the first copy of a row by a client that keeps its session (aiohttp, paramiko, pysmb, afp/python)
# took one to two round trips more: on wifi-ac that moved round trips from per file to per set, on wan it made those
# sets 15-40 % slower than their counts predict. On gige those round trips are a fraction of a millisecond, but its
# two sets give its own CPU per file, which a first copy's start (a process's first imports, a session's opening)
# would put in the set it falls in: a warm-up there too.
WARMUP = {"wan": 1, "gige": 1}
# Per link, the sets copied: gige's smaller one gives that link's own CPU per file (exchangecount.cpu_per_file_s)
SETS = {"wan": (3,), "gige": (4, 16)}


def _flags(link: str, small: list[str], protocols: str | None = None, warmup: int = 1) -> dict[str, object]:
    # No figure of the link's goodput meter nor of the raw-TCP baseline is read here: the path's rate is the link's
    # expected goodput (link_goodput_bytes_per_s), its RTT the lab's idle one. The meter is skipped and the baseline
    # kept short.
    flags: dict[str, object] = {
        "link": link,
        "sizes": "",
        "small": small,
        "repeat": 1,
        "warmup": warmup,
        "tcp_duration": 0.5,
        "skip_iperf3": True,
        "goodput_duration": 0,
    }
    if protocols is not None:
        flags["protocols"] = protocols
    return flags


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private data directory: the lab's test files are made there, not in the user's."""
    path = tmp_path_factory.mktemp("exchanges-home")
    before = os.environ.get("WORKBENCH_HOME")
    os.environ["WORKBENCH_HOME"] = str(path)
    yield path
    if before is None:
        os.environ.pop("WORKBENCH_HOME", None)
    else:
        os.environ["WORKBENCH_HOME"] = before


@pytest.fixture(scope="module")
def counting(home: Path) -> tuple[Run, list[ClientCount]]:
    run, packets, marks = lab_run(_flags("wifi-ac", [f"{n}x64K" for n in FILES]), "exchanges test")
    assert packets, "nothing captured on the lab link"
    found = count_clients(run, packets, marks)
    assert found
    return run, found


@pytest.fixture(scope="module")
def counts(counting: tuple[Run, list[ClientCount]]) -> list[ClientCount]:
    return counting[1]


def test_every_client_declares_the_round_trips_the_wire_shows(counting: tuple[Run, list[ClientCount]]) -> None:
    """The default lab's clients (the ones this lab runs), each direction counted and as declared. Clients
    outside that selection (scp, sshfs, smbprotocol, whose several files in flight blur a wall-clock count)
    are counted by bench/count_exchanges.py, not here."""
    run, counts = counting
    # a client that copies no set (netatalk's afp_speedtest times one file of its own) has no exchange per file:
    # its set rows say so, and it is the only kind left out (a client unavailable for another reason is counted
    # missing)
    no_sets = {
        r.label
        for r in run.results
        if r.files > 1 and (r.error or "").startswith("unavailable:") and "times one file" in (r.error or "")
    }
    selected = {
        e.label
        for e in registry.select(default("protocols", "lab"))
        if not isinstance(registry.load(e), str) and not e.label.startswith("rsync/") and e.label not in no_sets
    }  # rsync streams a whole set: no exchange per file, its flights come and go with the stream
    counted = {(c.label, c.direction): c for c in counts}
    wanted = {(label, d) for label in selected for d in ("upload", "download")}
    assert not wanted - counted.keys(), f"clients not counted: {sorted(wanted - counted.keys())}"
    for label, direction in sorted(wanted):
        wire = counted[(label, direction)]
        said = exchanges.declared(label, direction)
        assert said is not None, f"{label} {direction} declares no counted round trips; the wire shows {wire}"
        # the rows' ceilings read "files in flight" from the client's declaration, the predictions from its
        # counted turns (exchanges.waited_per_file): the two must agree
        sets = [r for r in run.results if (r.label, r.direction) == (label, direction) and r.files > 1]
        declared_in_flight = any((r.details.files_in_flight or 1) > 1 for r in sets)
        assert (wire.turns_per_file < IN_FLIGHT_TURNS) == declared_in_flight, (label, direction, wire)
        # what the ceiling uses: the round trips of a whole set, files and set together
        wire_total = wire.per_file * FILES[1] + wire.per_set
        said_total = said.per_file * FILES[1] + said.per_set
        slack = max(SET_SLACK_TRIPS, SET_SLACK_SHARE * said_total)
        print(f"{label} {direction}: round trips of a set, {wire_total:.1f} on the wire, {said_total:g} said")
        assert abs(wire_total - said_total) <= slack, (label, direction, wire, said)
        # and the waits for a delayed ACK among them (an OpenSSH login's two), which the ceiling charges a timer's
        # time each: as declared, within one
        wire_acks = wire.delayed_acks_per_file * FILES[1] + wire.delayed_acks_per_set
        said_acks = said.delayed_acks_per_file * FILES[1] + said.delayed_acks_per_set
        assert abs(wire_acks - said_acks) <= 1, (label, direction, wire, said)


# wan's sets are small: each of its round trips is 40 ms, and three files are two files' differences, enough to
# see a count that is a round trip off per file
@pytest.mark.parametrize("link", ["wan", "gige"])
def test_counts_from_wifi_ac_predict_another_links_small_files(counts: list[ClientCount], link: str) -> None:
    """The counted turns are real waits: on another link every set takes at least their share of its time (turns ×
    its RTT). The whole prediction is the per-file ceiling's time: the turns, the sending side's CPU in turn, then
    the longer of the bytes and the other side's CPU, each counted on wifi-ac (time on a core, which load does not
    stretch), a model's time and not a floor: the clients' median prediction holds within 25 % where round trips
    dominate (wan). Where CPU is most of a file's time (gige), CPU counted on wifi-ac over-charges (a side's CPU per
    file grows with the link's RTT: exchangecount.cpu_per_file_s), so there the expectation holds, client by client:
    the counted round trips, setups and waits with gige's own CPU per file, read from the very copies it is checked
    against (so it checks the counts and the model's rule that adds a turn-taking client's two sides, not that CPU
    carries between links); bench/bench_per_file_predictions.py prints every client's."""
    # only the counted clients copy: a client without a count predicts nothing (afp_speedtest, which times no set)
    labels = {c.label for c in counts}
    counted = ",".join(e.label for e in registry.select(default("protocols", "lab")) if e.label in labels)
    flags = _flags(link, [f"{n}x64K" for n in SETS[link]], counted, WARMUP[link])
    run, _, _ = lab_run(flags, f"predictions on {link}")
    rtt_s = float((run.link or {}).get("rtt_ms") or 0) / 1e3
    by_client = {(c.label, c.direction): c for c in counts}
    own_cpu = cpu_per_file_s(run)
    ratios = []
    expected = []
    below = []
    for row in run.results:
        count = by_client.get((row.label, row.direction))
        times = sorted(s.seconds for s in row.good_samples)
        path = link_goodput_bytes_per_s(run.link, row.direction)
        if row.files <= 1 or count is None or not times or not path:
            continue
        measured = times[len(times) // 2]
        # the client's own turns wait a round trip on any link; its flights (a sender waiting on ACKs) depend on
        # the window the link leaves it, so a longer link may merge them: they are no floor
        waits_s = max(0.0, count.turns_per_file) * row.files * rtt_s
        overlaps = (row.details.files_in_flight or 1) > 1  # more of its files overlap on a longer link
        if measured < 0.9 * waits_s and not overlaps:
            below.append((row.label, row.direction, round(waits_s, 3), round(measured, 3)))
        if row.files != max(SETS[link]):  # the smaller set is there for the link's own CPU per file
            continue
        paced = paces_bursts(row, run.link)  # a BBR sender in start-up paces each file's burst, as in the ceiling
        ratios.append(predicted_s(count, row.files, row.bytes // row.files, rtt_s, path, paced=paced) / measured)
        print(f"{link} {row.label} {row.direction}: predicted/measured {ratios[-1]:.2f}")
        client_s, server_s = own_cpu.get((row.label, row.direction), (None, None))
        if client_s is not None and server_s is not None and count.setup_s is not None:
            file_bytes = row.bytes // row.files
            expected.append(expected_s(count, row.files, file_bytes, rtt_s, path, client_s, server_s, paced) / measured)
            print(f"{link} {row.label} {row.direction}: expected/measured {expected[-1]:.2f}")
    assert len(ratios) >= len(by_client) // 2
    assert not below, below  # a set faster than its counted waits: the count is too high
    if link == "wan":
        assert abs(statistics.median(ratios) - 1) <= PREDICTS, sorted(ratios)
        # and client by client, four in five within 25 %: 21 of these 22 were, and 28 of 30 with the clients
        # this lab leaves out (bench/bench_per_file_predictions.py); the misses there are smbprotocol's per-set
        # count, which holds its pace, and sshfs's uploads
        held = [r for r in ratios if abs(r - 1) <= PREDICTS]
        assert len(held) >= HELD_SHARE * len(ratios), sorted(ratios)
    else:
        # every predicted set has its expectation: the lab's servers are its own, their CPU read on every copy
        assert expected and len(expected) == len(ratios), (len(expected), len(ratios))
        assert abs(statistics.median(expected) - 1) <= PREDICTS, sorted(expected)
        # and four in five within 25 %: in this test's sets, 21 of these 22 were in each of two runs (and 28 of 30
        # with every client, in the bench's sets of 10 and 30 files)
        held = [r for r in expected if abs(r - 1) <= PREDICTS]
        assert len(held) >= HELD_SHARE * len(expected), sorted(expected)
