"""Each client's round trips per file and per set, counted on the lab link, and what they predict elsewhere.

`count_clients` runs a lab (`workbench lab` itself: its servers, its runner, its timing) copying two small-file
sets of different sizes with every client asked for, captures the client host's link device meanwhile
(workbench.lab.wirecount) and cuts the capture into each timed copy by the runner's own progress calls. Per
client and direction, the round trips of the larger set less those of the smaller one, over the files between
them, are the round trips per file; what the smaller set has beyond its files' share is the set's own (a
login). The copies' durations give, the same way, the time per file and per set that is neither round trips
nor bytes on the wire: the client's and the server's turnaround, which is this machine's and not the link's.
Their CPU gives each side's CPU per file the same way (the server's read from the lab server host's cgroup,
exact, with the per-connection processes that ended mid-copy: workbench.lab.servercpu; the client's from this
process and its reaped children, to the microsecond, and what the ssh that scp starts per remote file used,
counted through a cgroup v2 group: only where no cgroup v2 group can be made are a child's own children that it
never reaps left out, workbench.shared.childcpu), and the time the two sets' line gives at zero files, less
the set's round trips, is the set's setup (`with_setups`).

`predicted_s` carries them to another link through the `per-file` ceiling's model: round trips × its RTT + the
sending side's CPU for a client that takes turns + the longest of the bytes at its rate and the other side's CPU
(each side's, for one that keeps files in flight), and the setup once per set; plus the waits for
a delayed ACK counted per file and per set (wirecount.delayed_ack_waits), each as long as it was counted, since a
timer sets it and not the link. That model's time is not a floor (ceiling.per_file_s says why), so a prediction
checks the model from either side. CPU figures are time on a core, which a loaded host does not stretch. The time
either side waited for a core (their most-waiting threads' run-queue wait, workbench.shared.schedstat) is not added:
the two sides' waits overlap each other and the wire, and added they made predictions longer than the copies on
every link (`predicted_s` can charge them, to show it).

CPU per file carries less well than round trips: a side's CPU per file grows with the link's RTT (`cpu_per_file_s`),
so where CPU is most of a file's time the figure counted on another link over-charges.
`expected_s` takes the counted round trips, setup and waits with a link's own CPU per file through the same model:
an expectation of the sets on that link, where `predicted_s` carries the counting link's CPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.core.ceiling import (
    link_goodput_bytes_per_s,
    paced_file_s,
    per_file_bound,
    per_file_s,
    sending_side,
    with_fixed_cost,
)
from workbench.core.results import Result, Run
from workbench.lab.lifecycle import CLIENT_ADDR, CLIENT_DEV
from workbench.lab.wirecount import Capture, Packet, control_connections, count_round_trips, delayed_ack_waits, within
from workbench.protocols.exchanges import COUNTED_FILE_BYTES, waited_per_file

WARMUP = "warm-up"
# A client counted at fewer turns per file than this keeps files in flight: it sent the next file's requests before
# the last one's reply. A request/response client waits a whole turn (or more) per file in every counting, and the
# clients that keep files in flight counted 0.06 to 0.62 (how often their pace left a gap of half an RTT).
IN_FLIGHT_TURNS = 0.75


@dataclass(frozen=True)
class ClientCount:
    """One client's counted pattern copying sets one way, and the turnaround it showed on this machine."""

    label: str
    direction: str
    per_file: float  # round trips per file (turns and flights)
    per_set: float  # round trips the set pays once
    turns_per_file: float
    flights_per_file: float
    turnaround_per_file_s: float  # per file: time that is neither round trips nor bytes on the wire
    turnaround_per_set_s: float
    files: tuple[int, int]  # the two set sizes counted
    # per file, each side's CPU seconds (the larger set's less the smaller's, over the files between them); None:
    # not measured
    client_cpu_per_file_s: float | None = None
    server_cpu_per_file_s: float | None = None
    # per set: the counted sets' time at zero files (the intercept of the line through the two) less the set's
    # round trips and its waits for delayed ACKs, never below 0 (a login's CPU, a process start); None: no CPU
    # measured
    setup_s: float | None = None
    # the waits for a delayed ACK (wirecount.delayed_ack_waits) per file and per set, and their seconds beyond
    # their round trips: a timer's time, not the link's (an OpenSSH login waits twice, about 85 ms, on each lab link)
    delayed_acks_per_file: float = 0.0
    delayed_acks_per_set: float = 0.0
    delayed_ack_wait_per_file_s: float = 0.0
    delayed_ack_wait_per_set_s: float = 0.0


@dataclass
class _Marks:
    """The runner's progress calls, in time: (wall-clock time, description); a description of None ends a row."""

    marks: list[tuple[float, str | None]] = field(default_factory=list)
    capture: Capture | None = None

    def status(self, line: str) -> None:
        print(f"  {line}", file=sys.stderr)

    def row_progress(self, description: str, total_bytes: int) -> _Progress:
        return _Progress(self)


class _Progress:
    def __init__(self, marks: _Marks) -> None:
        self.owner = marks

    def restart(self, description: str) -> None:
        owner = self.owner
        if owner.capture is None:  # the runner calls this from the client namespace: capture there
            owner.capture = Capture(CLIENT_DEV, CLIENT_ADDR)
            owner.capture.start()
        owner.marks.append((time.time(), description))

    def advance(self, done_bytes: int) -> None:
        """Nothing to show."""

    def close(self) -> None:
        self.owner.marks.append((time.time(), None))


def _windows(marks: Sequence[tuple[float, str | None]]) -> list[tuple[str, str, str, float, float]]:
    """(client label, direction, set, start, end) of every timed copy: from its progress restart to the next call."""
    found = []
    for (start, what), (end, _) in itertools.pairwise(marks):
        if what is None or what.endswith(WARMUP):
            continue
        words = what.split()
        if len(words) >= 4:
            found.append((words[0], words[1], words[2], start, end))
    return found


def _set_files(name: str) -> int | None:
    count, _, _ = name.partition("x")
    return int(count) if count.isdigit() else None


def run_rtt_s(run: Run) -> float:
    """A run's round trip in seconds, the one its rows' ceilings charge (Run.least_rtt_ms); 0.0 where none is known."""
    return (run.least_rtt_ms or 0.0) / 1e3


def count_clients(run: Run, packets: Sequence[Packet], marks: Sequence[tuple[float, str | None]]) -> list[ClientCount]:
    """Each client and direction's counts from a run of two small-file sets, its capture and its progress marks."""
    rtt_s = run_rtt_s(run)
    if not rtt_s:
        return []
    skip = control_connections(packets)
    trips: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
    delack: dict[tuple[str, str, int], list[tuple[int, float]]] = {}
    for label, direction, set_name, start, end in _windows(marks):
        files = _set_files(set_name)
        if files is None:
            continue
        copy = within(packets, start, end, skip)
        counted = count_round_trips(copy, rtt_s / 2)
        trips.setdefault((label, direction, files), []).append((counted.turns, counted.flights))
        waited = delayed_ack_waits(copy, rtt_s)
        delack.setdefault((label, direction, files), []).append((len(waited), sum(waited)))
    seconds: dict[tuple[str, str, int], float] = {}
    for row in run.results:
        times = [s.seconds for s in row.good_samples]
        if row.files > 1 and times and row.error is None:
            seconds[(row.label, row.direction, row.files)] = statistics.median(times)
    cpu = cpu_per_file_s(run)
    found = []
    for label, direction in sorted({(k[0], k[1]) for k in trips}):
        sizes = sorted(f for (la, d, f) in trips if (la, d) == (label, direction))
        if (
            len(sizes) < 2
            or (label, direction, sizes[0]) not in seconds
            or (label, direction, sizes[-1]) not in seconds
        ):
            continue
        small, large = sizes[0], sizes[-1]
        span = large - small
        turns = {n: statistics.median(t for t, _ in trips[(label, direction, n)]) for n in (small, large)}
        flights = {n: statistics.median(f for _, f in trips[(label, direction, n)]) for n in (small, large)}
        turns_file = (turns[large] - turns[small]) / span
        flights_file = (flights[large] - flights[small]) / span
        per_file = turns_file + flights_file
        # never below none: a smaller set that waited less than its files' share (a client whose files in flight
        # overlap more in a longer set) pays no round trip of its own
        per_set = max(0.0, turns[small] + flights[small] - small * per_file)
        # the waits for delayed ACKs the same way, their number and their seconds (never below none)
        acks = {n: statistics.median(k for k, _ in delack[(label, direction, n)]) for n in (small, large)}
        acks_s = {n: statistics.median(w for _, w in delack[(label, direction, n)]) for n in (small, large)}
        acks_file = max(0.0, (acks[large] - acks[small]) / span)
        acks_file_s = max(0.0, (acks_s[large] - acks_s[small]) / span)
        path = link_goodput_bytes_per_s(run.link, direction) or run.baseline.for_direction(direction) or 0
        wire_s = COUNTED_FILE_BYTES / path if path else 0.0
        d_small, d_large = seconds[(label, direction, small)], seconds[(label, direction, large)]
        file_s = (d_large - d_small) / span
        client_cpu_s, server_cpu_s = cpu.get((label, direction), (None, None))
        found.append(
            ClientCount(
                label=label,
                direction=direction,
                per_file=round(per_file, 2),
                per_set=round(per_set, 2),
                turns_per_file=round(turns_file, 2),
                flights_per_file=round(flights_file, 2),
                turnaround_per_file_s=file_s - per_file * rtt_s - wire_s,
                turnaround_per_set_s=d_small - small * file_s - per_set * rtt_s,
                files=(small, large),
                client_cpu_per_file_s=client_cpu_s,
                server_cpu_per_file_s=server_cpu_s,
                delayed_acks_per_file=round(acks_file, 2),
                delayed_acks_per_set=round(max(0.0, acks[small] - small * acks_file), 2),
                delayed_ack_wait_per_file_s=round(acks_file_s, 4),
                delayed_ack_wait_per_set_s=round(max(0.0, acks_s[small] - small * acks_file_s), 4),
            )
        )
    return with_setups(run, found)


def waited_round_trips(count: ClientCount) -> float:
    """Round trips per file a prediction charges at another link's RTT, by the rule the rows' per-file ceilings
    follow too (exchanges.waited_per_file, which says why): the counted ones (at least one), or none for a client
    counted under IN_FLIGHT_TURNS turns per file, which keeps files in flight (the ceiling reads the same from the
    client's declared files in flight)."""
    return waited_per_file(count.per_file, count.turns_per_file < IN_FLIGHT_TURNS)


def predicts_by_model(count: ClientCount, path_bytes_per_s: float) -> bool:
    """Whether a prediction of `count` goes through the per-file ceiling's model (`predicted_s`): it has both sides'
    CPU figures and the link a path rate. Otherwise it predicts from its turnaround."""
    has_cpu = count.client_cpu_per_file_s is not None and count.server_cpu_per_file_s is not None
    return has_cpu and path_bytes_per_s > 0


def _sender(count: ClientCount) -> str | None:
    """The side whose CPU the per-file model charges in turn for `count` (ceiling.sending_side), by the round trips
    a prediction waits per file."""
    return sending_side(count.direction, 1, waited_round_trips(count))


def with_setups(run: Run, counts: Sequence[ClientCount]) -> list[ClientCount]:
    """`counts` with each one's setup_s from `run`, the run they were counted in: the time the line through its
    two sets' times gives at zero files (their measured intercept), less its round trips per set, never below 0.
    A count without CPU figures (`predicts_by_model` is false) keeps none, and predicts from its turnaround.

    The intercept, not the sets' time less the model's files: where the copies took longer per file than the model
    charges (its parts ran in turn, or waited for a core), that difference times each set's files would land in
    the setup, and a prediction for a set smaller than the counted ones would overshoot by it (and one for a larger
    set undershoot); the model's own per-file shortfall stays per file, where a prediction shows it."""
    rtt_s = run_rtt_s(run)
    seconds: dict[tuple[str, str, int], float] = {}
    for row in run.results:
        times = [s.seconds for s in row.good_samples]
        if row.files > 1 and times and row.error is None:
            seconds[(row.label, row.direction, row.files)] = statistics.median(times)
    found = []
    for count in counts:
        path = link_goodput_bytes_per_s(run.link, count.direction) or run.baseline.for_direction(count.direction)
        small, large = count.files
        d_small, d_large = (seconds.get((count.label, count.direction, n)) for n in (small, large))
        if not predicts_by_model(count, path or 0.0) or d_small is None or d_large is None or large <= small:
            found.append(count)
            continue
        measured_file_s = (d_large - d_small) / (large - small)
        fixed_s = max(0.0, d_small - small * measured_file_s - count.per_set * rtt_s)
        # the set's waits for delayed ACKs are charged apart (predicted_s), out of the fixed part they were
        # measured in: never more than that part, so the two together give it back
        waits_s = min(count.delayed_ack_wait_per_set_s, fixed_s)
        found.append(dataclasses.replace(count, setup_s=fixed_s - waits_s, delayed_ack_wait_per_set_s=waits_s))
    return found


@dataclass(frozen=True)
class Waits:
    """The median time one copy of a set waited for a core, on each side; None: not measured."""

    client_s: float | None = None
    server_s: float | None = None


def waits_of(row: Result) -> Waits:
    """A row's median run-queue wait per copy, client and server, for a prediction's "with waits" figure: a
    client with files in flight may overlap it with anything, so none for that one."""
    if (row.details.files_in_flight or 1) > 1:
        return Waits()
    client = [w for s in row.good_samples if (w := s.client_wait_s) is not None]
    server = [w for s in row.good_samples if (w := s.server_wait_s) is not None]
    return Waits(statistics.median(client) if client else None, statistics.median(server) if server else None)


def _waited_per_file_s(
    count: ClientCount, files: int, file_bytes: int, rtt_s: float, path_bytes_per_s: float, waits: Waits, paced: bool
) -> float:
    """Per file, the wait a prediction's "with waits" figure adds, by the per-file model's own rule: each side's
    wait per file added to its CPU, the file's time by ceiling.per_file_s less its time without the waits, with the
    bytes' time the bound charges (BBR's paced burst where `paced` and the client takes turns: per_file_bound). The
    sending side's wait adds whole (its CPU is charged in turn); a wait that leaves an overlapping side shorter than
    another part adds nothing."""
    if files <= 0 or path_bytes_per_s <= 0:
        return 0.0
    sender = _sender(count)
    wire_s = max(file_bytes / path_bytes_per_s, paced_file_s(rtt_s, file_bytes, paced, 1, waited_round_trips(count)))
    server_s, client_s = count.server_cpu_per_file_s or 0.0, count.client_cpu_per_file_s or 0.0
    waited_server_s = server_s + (waits.server_s or 0.0) / files
    waited_client_s = client_s + (waits.client_s or 0.0) / files
    waited = per_file_s(0, 0.0, wire_s, waited_server_s, waited_client_s, sender)
    return waited - per_file_s(0, 0.0, wire_s, server_s, client_s, sender)


def _median_cpu(row: Result, side: str) -> float | None:
    values = [getattr(s, f"{side}_cpu_s") for s in row.good_samples if getattr(s, f"{side}_cpu_s") is not None]
    return statistics.median(values) if values else None


def _per_file(
    cpu: Mapping[tuple[str, str, int], tuple[float | None, float | None]],
    label: str,
    direction: str,
    small: int,
    large: int,
    side: int,
) -> float | None:
    """One side's CPU per file: the larger set's less the smaller's, over the files between them (never below 0)."""
    low, high = cpu[(label, direction, small)][side], cpu[(label, direction, large)][side]
    return max(0.0, (high - low) / (large - small)) if low is not None and high is not None else None


def cpu_per_file_s(run: Run) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """Each client and direction's CPU per file on `run`'s own link, client's and server's: its smallest and
    largest small-file sets' median CPU per copy, the larger less the smaller over the files between them, as a
    counting reads it (never below 0). A client with fewer than two set sizes, or without a CPU figure, has none.

    Why a link's own: a side's CPU per file grows with the link's RTT. On the lab's 2-core VM, for the same clients
    and 64 KiB files, CPU per file counted on wifi-ac (2.8 ms RTT) was a median 1.5 times (client) and 1.6 times
    (server) what gige's sets used (0.2 ms), half of the clients between 1.2 and 1.8 times, and wan's (40 ms) a
    median 1.6 and 1.9 times wifi-ac's. A likely reason, not measured: a process that sleeps longer between
    exchanges wakes to colder caches. So a figure counted on one link over-charges a link of shorter waits, which
    matters where CPU is most of a file's time (gige)."""
    cpu: dict[tuple[str, str, int], tuple[float | None, float | None]] = {}
    for row in run.results:
        if row.files > 1 and row.good_samples and row.error is None:
            cpu[(row.label, row.direction, row.files)] = (_median_cpu(row, "client"), _median_cpu(row, "server"))
    found: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for label, direction in {(k[0], k[1]) for k in cpu}:
        sizes = sorted(n for (la, d, n) in cpu if (la, d) == (label, direction))
        if len(sizes) >= 2:
            small, large = sizes[0], sizes[-1]
            found[(label, direction)] = (
                _per_file(cpu, label, direction, small, large, 0),
                _per_file(cpu, label, direction, small, large, 1),
            )
    return found


def expected_s(
    count: ClientCount,
    files: int,
    file_bytes: int,
    rtt_s: float,
    path_bytes_per_s: float,
    client_cpu_per_file_s: float,
    server_cpu_per_file_s: float,
    paced: bool = False,
) -> float:
    """The seconds a set is expected to take on a link from its count's round trips, setup and waits for delayed ACKs,
    with each side's CPU per file measured on that link (`cpu_per_file_s`): `predicted_s` with the link's own CPU,
    since CPU per file depends on the link (`cpu_per_file_s` says why). For a client that takes turns the model
    already adds its two sides' CPU (the sender's in turn, then the longer of the bytes and the receiver's:
    ceiling.per_file_s), as in a turn one side works while the other waits for it: on gige, where CPU is most of a
    file's time, such clients' sets (of clients without a setup of their own) took 1.1 to 2 times the longer side's
    CPU with the round trips, and 0.86 to 1.27 times the sum. A client that keeps files in flight is charged the
    longer side, as its sides overlap."""
    charged = dataclasses.replace(
        count, client_cpu_per_file_s=client_cpu_per_file_s, server_cpu_per_file_s=server_cpu_per_file_s
    )
    return predicted_s(charged, files, file_bytes, rtt_s, path_bytes_per_s, paced=paced)


def predicted_s(
    count: ClientCount,
    files: int,
    file_bytes: int,
    rtt_s: float,
    path_bytes_per_s: float,
    waits: Waits | None = None,
    paced: bool = False,
) -> float:
    """The seconds a set of `files` files of `file_bytes` takes on a link of `rtt_s` and `path_bytes_per_s`:
    the counted round trips at its RTT (none per file for a client that keeps files in flight: waited_round_trips),
    the sending side's CPU per file as counted for a client that takes turns, the longest of the bytes at its rate
    and the other side's CPU (each side's for a client with files in flight), the waits for delayed ACKs as
    counted (per file and per set, in seconds: a timer's, not the link's), and the set's setup; a count without CPU
    figures, its turnaround as counted instead, which holds those waits (added to all its counted round trips,
    since the turnaround was read as what they leave).
    `waits`: what the predicted copies measured waiting for a core, added for the "with waits" figure (the rows'
    own ceilings leave waits out). `paced`: the sender paced each burst (BBR in start-up, as the measured row's
    sockets said or else the lab recorded: workbench.core.explain.paces_bursts), so a file's bytes after a turn
    take ceiling.paced_burst_s at this RTT where that is longer than the path's time, as in the rows' ceilings. A
    count without CPU figures gets none: its turnaround holds the counting link's pacing, at that link's RTT, so on a
    longer link such a prediction is short by up to the difference (about 16 ms a file from wifi-ac to wan).

    With CPU figures, through the model of the per-file ceiling users see: the same `per_file_bound`, the same
    rule for round trips per file (exchanges.waited_per_file) and the set's setup as a fixed cost per copy, which
    like every fixed cost is never negative; so checking a prediction checks that model. Its inputs differ: a
    prediction takes this counting's round trips, CPU per file and setup, a row's ceiling the declared table's
    round trips (workbench.protocols.exchanges) with the row's own CPU and fitted fixed cost; and a row's ceiling
    leaves out the client's CPU of a client that keeps files in flight, which a prediction charges. It is the
    model's time, not a floor (ceiling.per_file_s): a copy that waits for a core or whose parts ran in turn takes
    longer, one whose flights overlapped its bytes or whose side spread its CPU over two cores less."""
    set_bytes = files * file_bytes
    if predicts_by_model(count, path_bytes_per_s) and count.setup_s is not None:
        bound = per_file_bound(
            set_bytes,
            files,
            waited_round_trips(count),
            rtt_s,
            path_bytes_per_s,
            server_per_file_s=count.server_cpu_per_file_s,
            client_per_file_s=count.client_cpu_per_file_s or None,
            set_round_trips=count.per_set,
            waited_per_file_s=(
                _waited_per_file_s(count, files, file_bytes, rtt_s, path_bytes_per_s, waits, paced) if waits else None
            ),
            paced=paced,
            delayed_ack_wait_per_file_s=count.delayed_ack_wait_per_file_s,
            direction=count.direction,
        )
        fixed_s = count.setup_s + count.delayed_ack_wait_per_set_s
        return set_bytes / with_fixed_cost(bound, fixed_s, set_bytes).bytes_per_s
    # the turnaround is, by its reading, the time left beyond the round trips and the bytes: it adds to them
    wire_s = file_bytes / path_bytes_per_s if path_bytes_per_s > 0 else 0.0  # no path rate: no bytes' time known
    file_time_s = count.per_file * rtt_s + wire_s + max(0.0, count.turnaround_per_file_s)
    return count.per_set * rtt_s + files * file_time_s + max(0.0, count.turnaround_per_set_s)


def lab_run(flags: Mapping[str, Any], label: str) -> tuple[Run, list[Packet], list[tuple[float, str | None]]]:
    """`workbench lab` with `flags` (settings by name), its client link captured: the run, packets and marks.

    The run's rows go to a private results database, not the user's.
    """
    from workbench.core.config import resolve
    from workbench.core.store import StoreRecorder
    from workbench.lab.run import lab_request, run_lab

    request = lab_request(resolve("lab", dict(flags)))
    marks = _Marks()
    with tempfile.TemporaryDirectory(prefix="workbench-count-") as work:
        run = run_lab(request, StoreRecorder(Path(work) / "runs.sqlite"), marks, label)
    packets = marks.capture.stop() if marks.capture is not None else []
    return run, packets, marks.marks


def counted(link: str, protocols: str, files: tuple[int, int], repeat: int) -> tuple[list[ClientCount], float]:
    """Every client's counts on the lab link `link` from sets of `files` 64 KiB files, and the idle RTT (ms)."""
    flags = {
        "link": link,
        "protocols": protocols,
        "sizes": "",
        "small": [f"{n}x64K" for n in files],
        "repeat": repeat,
        "warmup": 1,
        "tcp_duration": 1.0,
    }
    run, packets, marks = lab_run(flags, f"count exchanges on {link}")
    return count_clients(run, packets, marks), run_rtt_s(run) * 1e3


def table_source(counts: Sequence[ClientCount]) -> str:
    """The COUNTED table of workbench.protocols.exchanges for `counts`, as Python source lines."""
    lines = ["COUNTED: dict[tuple[str, str], Exchanges] = {"]
    for c in sorted(counts, key=lambda c: (c.label, c.direction)):
        per_file, per_set = round(max(0.0, c.per_file), 1), round(max(0.0, c.per_set), 1)
        acks = [
            f", {name}={round(value, 1):g}"
            for name, value in (
                ("delayed_acks_per_file", c.delayed_acks_per_file),
                ("delayed_acks_per_set", c.delayed_acks_per_set),
            )
            if round(value, 1)
        ]
        exchanged = f"Exchanges(per_file={per_file:g}, per_set={per_set:g}{''.join(acks)})"
        lines.append(f'    ("{c.label}", "{c.direction}"): {exchanged},')
    lines.append("}")
    return "\n".join(lines)


def write_table(path: Path, counts: Sequence[ClientCount]) -> None:
    """Rewrite the table between the BEGIN COUNTED and END COUNTED lines of `path`, keeping the rest."""
    text = path.read_text()
    head, _, rest = text.partition("# BEGIN COUNTED\n")
    _, _, tail = rest.partition("# END COUNTED\n")
    path.write_text(f"{head}# BEGIN COUNTED\n{table_source(counts)}\n# END COUNTED\n{tail}")
