"""Ceilings: the rates a copy cannot exceed on this path, and the one that explains a measured rate.

Pure maths. Rates are bytes/s like everywhere in workbench; RTT in seconds; windows in bytes.
- A window-like limit W allows at most W per round trip: W / RTT.
- A request/response client with n requests of S bytes outstanding waits, per request, a round trip, then the
  data's serialisation at the path's rate B and each side's CPU on the request: n·S / (RTT + t_sender + max(S/B,
  t_receiver)) for a client with one request outstanding, whose sender (the client of an upload, the server of a
  download) produces each request after the last one's answer, S/B being BBR's paced burst where its sender was
  seen pacing; n·S / (RTT + max(S/B, t_server, t_client)) with more than one, whose parts may overlap other
  requests' (`requests_s`, the rule per_file_s gives a file).
- A set of small files costs, per file, its round trips, the sending side's CPU on it where the client takes a
  turn per file, then the longest of its bytes at the path's rate and the other side's CPU on it, taken to overlap
  (`per_file_s`, `per_file_bound`): a model of measured parts, which `holds` checks against each row rather than
  a proven bound.
- A fixed cost per copy (a process start, a login) turns any ceiling C of a copy of `bytes` into
  bytes / (fixed + bytes / C) (`with_fixed_cost`).
- A host that signs or encrypts every SMB message on k cores, at c CPU seconds per byte for the algorithm (and m
  for all its work per byte, where measured and at least CRYPTO_SHARE crypto), carries at most k / c (k / m)
  (`crypto_bound`); a CPU cap makes k less than a core, for the cpu ceiling too.
A ceiling explains a measured rate only when it is within EXPLAINS of it (`explaining_bound`), and bounds it only
when the copy does not beat it by more than the row's own noise (`holds`, `noise_share`): a ceiling a copy
beats is a model that is missing something, and is never the row's label.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.protocols.details import ClientDetails
from workbench.protocols.smb_negotiated import default_signing_algorithm, dialect_of, usual_cipher

LABELS = ("link", "raw-tcp", "window", "requests", "ssh-window", "per-file", "cpu", "crypto")
TIE = 0.05  # ceilings this close are one limit (see binding_bound)
CPU_SATURATED = 0.9  # a process at >= 90 % of one core is CPU-bound, whatever the other bounds say
EXPLAINS = 0.25  # a ceiling within 25 % of the measured rate explains it; further off, the row is unexplained
NOISE_FLOOR = 0.05  # a row's noise is its own spread, but never under 5 % (see noise_share)
UNEXPLAINED = "unexplained"


@dataclass(frozen=True)
class Bound:
    """One ceiling: at most `bytes_per_s` bytes/s because of `label`, explained in one line."""

    label: str
    bytes_per_s: float
    explanation: str
    saturated: bool = False  # a resource measured as fully used (cpu >= CPU_SATURATED)
    # the ceiling of the streaming alone, before a fixed cost per copy was added (with_fixed_cost); None: none was
    streaming_bytes_per_s: float | None = None
    # a per-file or requests bound's: per file or request, what the parts it charges as overlapping (the bytes, the
    # receiving side's CPU, or each side's where none sends in turn) would add if they ran one after another, their
    # sum less the longest; None: no such parts
    in_turn_s: float | None = None
    # a per-file or requests bound's overlapping parts in words ("its bytes", "the server's CPU"), the longest among
    # them
    overlapping: tuple[str, ...] = ()

    @property
    def streaming(self) -> float:
        """The ceiling without the fixed cost per copy: what tells two limits apart (binding_bound)."""
        return self.streaming_bytes_per_s if self.streaming_bytes_per_s is not None else self.bytes_per_s


def bounds(
    *,
    link_bytes_per_s: float | None = None,
    rtt_s: float | None = None,
    window_bytes: int | None = None,
    request_bytes: int | None = None,
    requests_in_flight: int | None = None,
    ssh_window_bytes: int | None = None,
    client_cpu: float | None = None,
    server_cpu: float | None = None,
    measured_bytes_per_s: float | None = None,
    raw_tcp_bytes_per_s: float | None = None,
    window_rtt_s: float | None = None,
    server_turnaround_s: float | None = None,
    server_cores: float | None = None,
    client_turnaround_s: float | None = None,
    direction: str | None = None,
    paced: bool = False,
) -> list[Bound]:
    """Every ceiling the inputs allow, in LABELS order; absent inputs drop their bound.

    client_cpu/server_cpu are process CPU seconds / wall seconds (1.0 = one full core); the cpu bound
    scales the measured rate to one full core of the busier process (to `server_cores` on the server, its CPU
    cap where one is set), so it needs `measured_bytes_per_s`.
    `raw_tcp_bytes_per_s` is the raw TCP rate measured the same way; the lower of it and the link is the rate B a
    request serialises at. `window_rtt_s` is the RTT the window was seen under (under load), `rtt_s` the
    idle one; `server_turnaround_s` and `client_turnaround_s` each side's CPU time per request, where it was
    measured; `direction` ("upload", "download") names the side that sends the data (None: no side takes a turn)
    and `paced` says its congestion control paces each burst after a turn (requests_s).
    """
    found: list[Bound] = []
    if link_bytes_per_s and link_bytes_per_s > 0:
        found.append(Bound("link", float(link_bytes_per_s), f"link {format_bits(link_bytes_per_s)}"))
    if raw_tcp_bytes_per_s and raw_tcp_bytes_per_s > 0:
        measured = f"raw TCP {raw_tcp_bytes_per_s / 1e6:,.1f} MB/s measured"
        found.append(Bound("raw-tcp", float(raw_tcp_bytes_per_s), measured))
    path = path_rate(link_bytes_per_s, raw_tcp_bytes_per_s)
    rtt = rtt_s if rtt_s is not None and rtt_s > 0 else None  # None: no round trip to bound by
    w_rtt = window_rtt_s if window_rtt_s and window_rtt_s > 0 else rtt
    if rtt and window_bytes and window_bytes > 0 and w_rtt:
        found.append(Bound("window", window_bytes / w_rtt, f"window {format_bytes(window_bytes)} / {format_ms(w_rtt)}"))
    if rtt and request_bytes and request_bytes > 0:
        turn = RequestTurn(server_turnaround_s, client_turnaround_s, direction, paced)
        found.append(_requests_bound(request_bytes, max(1, requests_in_flight or 1), rtt, path, turn))
    if rtt and ssh_window_bytes and ssh_window_bytes > 0:
        found.append(
            Bound(
                "ssh-window",
                ssh_window_bytes / rtt,
                f"SSH window {format_bytes(ssh_window_bytes)} / {format_ms(rtt)}",
            )
        )
    cpu = _cpu_bound(client_cpu, server_cpu, measured_bytes_per_s, server_cores)
    if cpu is not None:
        found.append(cpu)
    return found


# BBR's start-up gain, 2/ln 2: the pacing rate over its estimate of the path's rate while it has not yet found the
# path full. A connection that sends one burst per round trip and then waits for an answer (a file after a turn)
# never finds it full: each round's delivery is application-limited, so it stays in start-up.
BBR_STARTUP_GAIN = 2 / math.log(2)
# Start-up's first pacing rate is the gain times ten segments (the initial window) per round trip, and start-up
# only ever raises it: a burst is never paced slower than that.
BBR_INITIAL_SEGMENTS = 10
MSS_BYTES = 1448  # a segment's payload at an MTU of 1500 with TCP timestamps


def paced_burst_s(rtt_s: float, burst_bytes: int, mss_bytes: int = MSS_BYTES) -> float:
    """The time a BBR sender takes to send a burst of `burst_bytes` when it sends one burst per round trip on a
    kept connection and waits.

    Its rate estimate is what one round delivered: a burst of B bytes over the round trip and the burst's own
    sending time T, B / (RTT + T); it paces the next burst at the start-up gain g times that, so T = B / (g × B /
    (RTT + T)), whose fixed point is T = RTT / (g − 1), about 0.53 RTT whatever B is. A small burst goes faster:
    start-up never paces below g × 10 segments per RTT, so T is at most B × RTT / (g × 10 × MSS) (0.39 RTT for
    16 KiB). On the wan lab a 64 KiB file per turn took 61 ms with BBR against 47 ms with CUBIC (21 ms paced
    against 5.6 ms at the path's goodput, about 94 Mbit/s)."""
    initial_rate_bytes_per_s = BBR_STARTUP_GAIN * BBR_INITIAL_SEGMENTS * mss_bytes / rtt_s if rtt_s > 0 else 0.0
    floor_s = burst_bytes / initial_rate_bytes_per_s if initial_rate_bytes_per_s else 0.0
    return min(rtt_s / (BBR_STARTUP_GAIN - 1), floor_s)


def sender_paces_bursts(link: Mapping[str, Any] | None, direction: str) -> bool:
    """Whether the sender of `direction` on this lab link runs BBR (the client uploads, the server downloads);
    False where the run does not say (a run outside the lab records no host's congestion control)."""
    link = link or {}
    cc = (link.get("cc_server") or link.get("cc")) if direction == "download" else link.get("cc")
    return isinstance(cc, str) and cc.split(" ", 1)[0].lower() == "bbr"


def link_goodput_bytes_per_s(link: Mapping[str, Any] | None, direction: str) -> float | None:
    """The TCP goodput (bytes/s) a lab link carries in `direction` (upload: client to server), or None.

    A link whose rates differ by direction says so per direction; older runs give one figure for both.
    """
    if not link:
        return None
    way = "up" if direction == "upload" else "down"
    return (
        link.get(f"expected_goodput_{way}_bytes_per_s")
        or link.get("expected_goodput_bytes_per_s")
        or (link.get("rate_bits_per_s") or 0) / 8
        or None
    )


def path_rate(link_bytes_per_s: float | None, raw_tcp_bytes_per_s: float | None) -> float | None:
    """Bytes/s the path carries, the rate a request or a file's bytes serialise at: the lower of the link's
    goodput and the raw TCP measured; None when neither is known."""
    return min((b for b in (link_bytes_per_s, raw_tcp_bytes_per_s) if b and b > 0), default=None)


@dataclass(frozen=True)
class RequestTurn:
    """What a request costs besides its round trip and its data's bytes: each side's CPU time per request, where
    measured; the direction of the data ("upload": the client sends it), None where no side is named; whether
    the data's sender paces each burst after a turn (BBR in start-up, ceiling.paced_burst_s)."""

    server_cpu_s: float | None = None
    client_cpu_s: float | None = None
    direction: str | None = None
    paced: bool = False


def requests_s(size: int, n: int, rtt_s: float, path_bytes_per_s: float | None, turn: RequestTurn) -> float:
    """Seconds a round of `n` outstanding requests takes by the requests model (one request's, where n is 1): its
    round trip, the sending side's CPU on a request in turn where one is outstanding, then the longest of a
    request's data's time on the path (a paced burst where the sender paces, paced_burst_s) and the other side's
    CPU on it, the rule per_file_s gives a file.

    Why: a client with one request outstanding sends the next only after the last one's answer, so the side that
    sends the data (the client of a write, the server of a read) produces it then, before its bytes can leave; the
    receiving side's CPU is taken to overlap the bytes, as it consumes them while they arrive. Measured on the
    wifi-ac lab (pysmb, 64 KiB per request, 2.8 ms RTT), downloads took 3-12 % less than all the parts in turn,
    their client's CPU partly beside the bytes; an upload's server writes a request only once it has it whole, and
    uploads took up to 19 % longer than this model, at most 3 % longer than all in turn. Charging the receiver's CPU
    beside the bytes keeps the model a ceiling where a receiver does overlap them. With more requests outstanding
    each side works on one while others wait, so no side is charged in turn and nothing is paced (one turn per
    request is what leaves BBR's start-up pacing each burst); a side that cannot keep up with n requests per round
    trip is the cpu ceiling's to say (a core's worth of its CPU), not this one's."""
    wire_s, paced_s, sender = _request_parts(size, n, rtt_s, path_bytes_per_s, turn)
    return per_file_s(1, rtt_s, max(wire_s, paced_s), turn.server_cpu_s, turn.client_cpu_s, sender)


def _request_parts(
    size: int, n: int, rtt_s: float, path_bytes_per_s: float | None, turn: RequestTurn
) -> tuple[float, float, str | None]:
    """A request's data's time on the path, its paced burst (0 where nothing is paced: see requests_s) and the
    side charged in turn (None with requests outstanding, or no direction named)."""
    wire_s = size / path_bytes_per_s if path_bytes_per_s else 0.0
    paced_s = paced_burst_s(rtt_s, size) if turn.paced and _takes_turns(n, 1) else 0.0
    sender = sending_side(turn.direction, n, 1) if turn.direction else None
    return wire_s, paced_s, sender


def _requests_bound(size: int, n: int, rtt_s: float, path_bytes_per_s: float | None, turn: RequestTurn) -> Bound:
    noun = "request" if n == 1 else "requests"
    wait = requests_s(size, n, rtt_s, path_bytes_per_s, turn)
    wire_s, paced_s, sender = _request_parts(size, n, rtt_s, path_bytes_per_s, turn)
    # the parts charged in turn, then the ones taken to overlap (longest charged, the others named beside it)
    turn_parts = [format_ms(rtt_s)]
    overlapping: list[tuple[float, str, str]] = []
    if paced_s > wire_s:
        overlapping.append((paced_s, f"{format_ms(paced_s)} paced by BBR", "its bytes"))
    elif wire_s:
        overlapping.append((wire_s, f"{format_ms(wire_s)} to send", "its bytes"))
    for side, cpu_s in (("server", turn.server_cpu_s), ("client", turn.client_cpu_s)):
        if not cpu_s:
            continue
        if side == sender:
            turn_parts.append(f"{format_ms(cpu_s)} {side} in turn")
        else:
            overlapping.append((cpu_s, f"{format_ms(cpu_s)} {side}", f"the {side}'s CPU"))
    parts = list(turn_parts)
    beside = ""
    if overlapping:
        longest = max(overlapping, key=lambda part: part[0])
        parts.append(longest[1])
        shorter = [part[1] for part in overlapping if part is not longest]
        beside = f", overlapping {' and '.join(shorter)}" if shorter else ""
    waited = parts[0] if len(parts) == 1 and not beside else f"({' + '.join(parts)}{beside})"
    return Bound(
        "requests",
        size * n / wait,
        f"{format_bytes(size)} × {n} {noun} / {waited}",
        in_turn_s=sum(p[0] for p in overlapping) - max(p[0] for p in overlapping) if len(overlapping) > 1 else None,
        overlapping=tuple(part[2] for part in overlapping),
    )


# What one wait for a delayed ACK is charged beyond its round trip: Linux's shortest delayed-ACK timeout
# (TCP_DELACK_MIN, 40 ms), the one the lab's hosts showed (40-48 ms); other systems wait longer.
DELAYED_ACK_S = 0.040


def per_file_s(
    round_trips: float,
    rtt_s: float,
    wire_s: float,
    server_s: float | None = None,
    client_s: float | None = None,
    sender: str | None = None,
) -> float:
    """Seconds one file of a set takes by the per-file model, one file at a time: its round trips, the sending
    side's CPU on it where it takes turns (`sender`, `sending_side`), then the longest of its bytes' time on the path
    (`wire_s`) and the other side's CPU on it (both sides' where `sender` is None).

    Why the sender's in turn: a client that waits for each file's answer before the next file (a turn per file)
    has its sender produce a file, opening it, reading it, framing and writing its request, after the turn came
    back and before the file's bytes can leave. Why the receiver's and the bytes' longest and not their sum: the
    receiver consumes the bytes as they arrive, through the socket buffers, and a side's CPU after its answer is
    sent (closing a file, its bookkeeping) overlaps the other side's next round trip. Added up, all three charged a
    strict ping-pong, and copies beat that ceiling (an upload whose server reads its 64 KiB as they arrive); taken
    to overlap all three, the model left a turn-taking client's sets slower than its reach in the lab (aiohttp,
    pysmb and smbclient uploads, curl downloads of 100 × 64 KiB took 1.3 to 1.5 times the ceiling's time).

    A model whose every part was measured, not a proven floor: the parts do not separate cleanly. The counted
    round trips include flights (a sender waiting for ACKs while its bytes cross), which overlap the bytes and the
    receiver's CPU, so that time can be charged twice; and a side's CPU figure may be spread over more than one
    core (the server's is its whole cgroup: sshd and sftp-server, smbd's threads; the client's includes its
    children, ssh or scp), so the side may take less wall time than it says. Where a file needs a login of its own
    (scp downloads log in once per remote file) the model errs the other way: a login is a strict turn-taking, the
    client waiting while the server computes and back, so both sides' CPU and their waits for a core add up; and
    only where no cgroup v2 group can be made (workbench.shared.childcpu) does the client's figure lack the CPU of
    children its tool does not reap (scp's ssh per remote file), so such a row is slower than its ceiling and says
    what is missing. The ceiling is therefore checked
    against each row (`holds`): a row that beats it by more than its own noise is unexplained, not bounded. A
    prediction through it is the model's time; a copy whose parts ran in turn, or that waited for a core, takes
    longer, and one whose parts overlapped more than the model counts takes less.
    """
    sides = {"server": server_s or 0.0, "client": client_s or 0.0}
    in_turn_s = sides.pop(sender) if sender in sides else 0.0
    return round_trips * rtt_s + in_turn_s + max(wire_s, *sides.values())


def paced_file_s(
    rtt_s: float, file_bytes: int, paced: bool, files_in_flight: int, round_trips_per_file: float
) -> float:
    """The least time a file's bytes take after a turn where the sender paces each burst (`paced`: BBR,
    paced_burst_s), for a client that copies one file at a time with at least a round trip per file; 0 otherwise
    (its bytes follow each other, or nothing is paced): what per_file_bound charges where it is longer than the
    bytes' time on the path."""
    if not paced or not _takes_turns(files_in_flight, round_trips_per_file):
        return 0.0
    return paced_burst_s(rtt_s, file_bytes)


def _takes_turns(files_in_flight: int, round_trips_per_file: float) -> bool:
    """Whether a client copies one file at a time with at least a round trip per file: it waits for each file's
    answer, so each file starts after a turn (what both the sender's CPU in turn and a paced burst follow from)."""
    return files_in_flight <= 1 and round_trips_per_file >= 1


def sending_side(direction: str, files_in_flight: int, round_trips_per_file: float) -> str | None:
    """The side whose CPU on a file the per-file model charges in turn (per_file_s): the client of an upload, the
    server of a download, for a client that copies one file at a time with at least a round trip per file (it
    waits for each file's answer, so the sender starts the next file only then); None where files are in flight
    or no turn separates them, and each side may work beside the other and the bytes."""
    if not _takes_turns(files_in_flight, round_trips_per_file):
        return None
    return "client" if direction == "upload" else "server"


def per_file_bound(
    set_bytes: int,
    files: int,
    round_trips_per_file: float,
    rtt_s: float,
    path_bytes_per_s: float | None,
    files_in_flight: int = 1,
    server_per_file_s: float | None = None,
    client_per_file_s: float | None = None,
    set_round_trips: float = 0.0,
    waited_per_file_s: float | None = None,
    paced: bool = False,
    delayed_ack_wait_per_file_s: float = 0.0,
    *,
    direction: str | None,
) -> Bound:
    """A set of `files` small files when each costs `per_file_s` (its round trips, the sending side's CPU on it
    where it takes turns, then the longest of its bytes at the path's rate and, where charged, the other side's
    CPU time on it), `files_in_flight` at a time, and the set `set_round_trips` once: the set's rate by that model
    (per_file_s says why it is checked against each row, not proven), explained in files/s.

    `direction` ("upload", "download") names the sending side (sending_side); None charges both sides' CPU as
    overlapping the bytes (a model with no turn to take: asked for by name, never by leaving it out).

    `waited_per_file_s` is time the client or server was measured waiting for a core (their run-queue wait),
    added on top and named for what it is. The rows' own ceilings pass none (the two sides' waits overlap each
    other and the wire, so charging them put the ceiling below what copies reached); a prediction's "with waits"
    figure passes them.

    `paced`: the sender's congestion control paces each burst (BBR), so a file's bytes after a turn take
    paced_burst_s() at this RTT, charged instead of the bytes' time on the path where it is longer, for a client
    that copies one file at a time with at least a round trip per file. The rows' own ceilings pass it where
    the sender's sockets were seen in BBR's start-up, or, where they were not seen, the run recorded that the
    sending host runs BBR (workbench.core.explain.paces_bursts), and so do the predictions checked against those
    rows (workbench.lab.exchangecount.predicted_s).

    `delayed_ack_wait_per_file_s`: time each file waits for the other side's delayed ACK beyond its round trips (a
    login per file by a client that leaves Nagle's algorithm on: workbench.lab.wirecount.delayed_ack_waits), a
    timer's time that nothing overlaps, added on top and named."""
    per_file = set_bytes / files
    wire_s = per_file / path_bytes_per_s if path_bytes_per_s else 0.0
    # the bytes' part, as named when it is the one charged and when it is named beside the one charged
    charged_as = format_bytes(int(per_file))
    named_as = f"{charged_as} on the path"
    paced_s = paced_file_s(rtt_s, int(per_file), paced, files_in_flight, round_trips_per_file)
    if paced_s > wire_s:
        wire_s = paced_s
        charged_as = named_as = f"{format_bytes(int(per_file))} paced by BBR in {format_ms(paced_s)}"
    sender = sending_side(direction, files_in_flight, round_trips_per_file) if direction else None
    file_s = per_file_s(round_trips_per_file, rtt_s, wire_s, server_per_file_s, client_per_file_s, sender)
    file_s += (waited_per_file_s or 0.0) + delayed_ack_wait_per_file_s
    set_s = set_round_trips * rtt_s + files * file_s / max(1, files_in_flight)
    files_per_s = files / set_s
    rate = set_bytes / set_s
    # the sender's CPU is charged in turn; of the file's overlapping parts the longest is charged, the others named
    parts = [f"{round_trips_per_file:g} RTT"]
    overlapping = [(wire_s, charged_as, named_as, "its bytes")]
    for side, cpu_s in (("server", server_per_file_s), ("client", client_per_file_s)):
        if not cpu_s:
            continue
        if side == sender:
            parts.append(f"{format_ms(cpu_s)} {side} in turn")
        else:
            overlapping.append((cpu_s, f"{format_ms(cpu_s)} {side}", f"{format_ms(cpu_s)} {side}", f"the {side}'s CPU"))
    longest = max(overlapping, key=lambda part: part[0])
    parts.append(longest[1])
    if waited_per_file_s:
        parts.append(f"{format_ms(waited_per_file_s)} waiting for a core")
    if delayed_ack_wait_per_file_s:
        parts.append(f"{format_ms(delayed_ack_wait_per_file_s)} waiting for delayed ACKs")
    shorter = [part[2] for part in overlapping if part is not longest]
    return Bound(
        "per-file",
        rate,
        f"≤ {files_per_s:,.0f} files/s: {' + '.join(parts)} per file"
        + (f" (overlapping {' and '.join(shorter)})" if shorter else "")
        + (f", {files_in_flight} at a time" if files_in_flight > 1 else "")
        + (f", + {set_round_trips:g} RTT per set" if set_round_trips else ""),
        in_turn_s=sum(part[0] for part in overlapping) - longest[0],
        overlapping=tuple(part[3] for part in overlapping),
    )


def noise_share(rates_bytes_per_s: Sequence[float], median_bytes_per_s: float) -> float:
    """A row's own noise: the largest distance of one copy's rate from the row's median, as a share of the
    median, and never under NOISE_FLOOR (three copies cannot show a smaller spread with any confidence)."""
    if median_bytes_per_s <= 0:
        return NOISE_FLOOR
    spread = max((abs(r - median_bytes_per_s) for r in rates_bytes_per_s), default=0.0) / median_bytes_per_s
    return max(NOISE_FLOOR, spread)


def holds(bound: Bound, measured_bytes_per_s: float, noise: float) -> bool:
    """Whether `bound` is a ceiling of a copy measured at `measured_bytes_per_s`: the copy beats it by no more
    than the row's `noise`. A CPU bound is scaled from the measured rate and always holds."""
    return bound.label == "cpu" or measured_bytes_per_s <= bound.bytes_per_s * (1 + noise)


def with_fixed_cost(bound: Bound, fixed_s: float, nbytes: int) -> Bound:
    """`bound` for a copy of `nbytes` that also pays `fixed_s` whatever its size: bytes / (fixed + bytes / C)."""
    if fixed_s <= 0 or nbytes <= 0 or bound.bytes_per_s <= 0 or bound.label in ("cpu", "crypto"):
        # A CPU bound is scaled from the measured rate, which already paid the fixed cost; a crypto bound comes from
        # a host's CPU per byte of the whole copy, the login's CPU in it, so its time is not added again.
        return bound
    rate = nbytes / (fixed_s + nbytes / bound.bytes_per_s)
    explanation = f"{bound.explanation}, + {format_ms(fixed_s)} per copy"
    return Bound(bound.label, rate, explanation, bound.saturated, bound.streaming, bound.in_turn_s, bound.overlapping)


def explaining_bound(found: Sequence[Bound], measured_bytes_per_s: float) -> tuple[Bound | None, bool]:
    """The binding bound (binding_bound) and whether it explains `measured_bytes_per_s`: within EXPLAINS of it."""
    bound = binding_bound(found)
    if bound is None or measured_bytes_per_s <= 0:
        return bound, False
    return bound, abs(bound.bytes_per_s - measured_bytes_per_s) <= EXPLAINS * measured_bytes_per_s


def bounds_from_details(
    details: ClientDetails,
    *,
    link_bytes_per_s: float | None = None,
    rtt_s: float | None = None,
    window_bytes: int | None = None,
    client_cpu: float | None = None,
    server_cpu: float | None = None,
    measured_bytes_per_s: float | None = None,
    raw_tcp_bytes_per_s: float | None = None,
    window_rtt_s: float | None = None,
    server_turnaround_s: float | None = None,
    server_cores: float | None = None,
    client_turnaround_s: float | None = None,
    direction: str | None = None,
    paced: bool = False,
) -> list[Bound]:
    """`bounds` fed with what a client reports: its request size and depth, its SSH window."""
    return bounds(
        server_cores=server_cores,
        client_turnaround_s=client_turnaround_s,
        direction=direction,
        paced=paced,
        raw_tcp_bytes_per_s=raw_tcp_bytes_per_s,
        window_rtt_s=window_rtt_s,
        server_turnaround_s=server_turnaround_s,
        link_bytes_per_s=link_bytes_per_s,
        rtt_s=rtt_s,
        window_bytes=window_bytes,
        request_bytes=details.request_bytes,
        requests_in_flight=details.requests_in_flight,
        ssh_window_bytes=details.ssh_window_bytes,
        client_cpu=client_cpu,
        server_cpu=server_cpu,
        measured_bytes_per_s=measured_bytes_per_s,
    )


def _cpu_bound(
    client_cpu: float | None,
    server_cpu: float | None,
    measured_bytes_per_s: float | None,
    server_cores: float | None = None,
) -> Bound | None:
    # Each side's share of the cores it may use: one core (a copy's server is one process on one core, as the
    # crypto ceiling counts it), or the server's CPU cap where one below a core is set.
    cap = min(server_cores, 1.0) if server_cores and server_cores > 0 else None
    sides = [
        (name, f, cores)
        for name, f, cores in (("client", client_cpu, 1.0), ("server", server_cpu, cap or 1.0))
        if f is not None and f > 0
    ]
    if not sides or not measured_bytes_per_s or measured_bytes_per_s <= 0:
        return None
    name, fraction, cores = max(sides, key=lambda side: side[1] / side[2])
    # A process already at (or past, if multi-threaded) all it may use cannot go faster: the bound is the rate seen.
    scale = min(fraction / cores, 1.0)
    capped = f" (its cap {cores:g} core)" if name == "server" and cap is not None else ""
    return Bound(
        "cpu",
        measured_bytes_per_s / scale,
        f"{name} CPU {fraction * 100:.0f} % of a core{capped}",
        saturated=fraction / cores >= CPU_SATURATED,
    )


# --- The crypto ceiling: what SMB's signing or encryption lets a host's CPU carry ---
CRYPTO_SHARE = 0.25  # crypto at least this share of a host's CPU per byte names that CPU's limit after it
# The algorithm a session uses when the client cannot say is its dialect's (workbench.protocols.smb_negotiated's
# table: 3.1.1's usual cipher is assumed, its signing algorithm stays unknown).


@dataclass(frozen=True)
class CryptoUse:
    """What an SMB row's messages pay for: "signing" or "encryption" with `algorithm`."""

    what: str
    algorithm: str
    assumed: bool = False  # the client did not say: the dialect's usual algorithm


@dataclass(frozen=True)
class CryptoSide:
    """One host's part of the crypto ceiling."""

    name: str  # "client" or "server"
    cores: float  # the cores its crypto can use
    crypto_cpu_s_per_byte: float  # the algorithm's cost there, measured at the run's start
    cpu_s_per_byte: float | None = None  # all that host's CPU per byte copied, where measured
    cpu_fraction: float | None = None  # its CPU seconds per wall second during the copies


def crypto_in_use(details: ClientDetails) -> CryptoUse | None:
    """The signing or encryption an SMB row's messages pay for; None when neither, or when it cannot be told.

    An encrypted message is not signed as well: SMB 3's transform header authenticates it with the cipher
    (CCM and GCM are authenticated encryption), so encryption costs only its cipher."""
    dialect = dialect_of(details.dialect)
    if details.encryption:
        if details.encryption_cipher:
            return CryptoUse("encryption", details.encryption_cipher)
        assumed = usual_cipher(dialect)
        return CryptoUse("encryption", assumed, True) if assumed else None
    if details.signing:
        if details.signing_algorithm:
            return CryptoUse("signing", details.signing_algorithm)
        assumed = default_signing_algorithm(dialect)
        return CryptoUse("signing", assumed, True) if assumed else None
    return None


def crypto_bound(use: CryptoUse, sides: Sequence[CryptoSide]) -> Bound | None:
    """The rate `use`'s algorithm lets the host that limits carry: its cores over its CPU per byte.

    On a host whose CPU per byte was measured for the copies and is at least CRYPTO_SHARE crypto, that is the whole
    of it (the algorithm plus the rest that host does per byte: the cpu ceiling made exact, and named for what
    weighs in it); saturated when the host used at least CPU_SATURATED of its cores. Elsewhere it is the algorithm
    alone, a looser ceiling (the host does more than crypto per byte). A copy that beats it means the algorithm
    costs less there than it did here with OpenSSL, or more cores do it than the model gives (see cryptocost)."""
    from workbench.shared.cryptocost import ns_per_byte

    name = f"{use.what} ({use.algorithm}{', assumed from the dialect' if use.assumed else ''})"
    found: list[Bound] = []
    for side in sides:
        crypto, whole = side.crypto_cpu_s_per_byte, side.cpu_s_per_byte
        if crypto <= 0 or side.cores <= 0:
            continue
        cores = f"{side.cores:g} core"
        if whole is not None and whole >= crypto >= CRYPTO_SHARE * whole:
            busy = side.cpu_fraction is not None and side.cpu_fraction >= CPU_SATURATED * side.cores
            found.append(
                Bound(
                    "crypto",
                    side.cores / whole,
                    f"{side.name} {cores} / {ns_per_byte(whole)}, {ns_per_byte(crypto)} of it {name}"
                    f" ({crypto / whole:.0%})",
                    saturated=busy,
                )
            )
        else:
            found.append(Bound("crypto", side.cores / crypto, f"{side.name} {cores} / {name} {ns_per_byte(crypto)}"))
    return min(found, key=lambda b: b.bytes_per_s) if found else None


def crypto_side(explanation: str) -> str | None:
    """The host ("client" or "server") a crypto ceiling's explanation (as crypto_bound writes it) names first."""
    first = explanation.split(" ", 1)[0]
    return first if first in ("client", "server") else None


def binding_bound(found: Sequence[Bound]) -> Bound | None:
    """The bound that explains a measured rate: a saturated CPU first, else the lowest other ceiling.

    A CPU that was not near a full core is no explanation (its extrapolated ceiling stays in the list
    for information but never binds): the copy was waiting on something else.
    """
    saturated = [b for b in found if b.saturated]
    if saturated:
        lowest_busy = min(saturated, key=lambda b: b.bytes_per_s)
        # A full CPU that is mostly crypto is named for the crypto (the same limit, seen with its cause).
        crypto = next((b for b in saturated if b.label == "crypto"), None)
        if crypto is not None and crypto.bytes_per_s <= lowest_busy.bytes_per_s * (1 + TIE):
            return crypto
        return lowest_busy
    others = [b for b in found if b.label != "cpu"]
    if not others:
        return None
    lowest = min(others, key=lambda b: b.bytes_per_s)
    # A window ceiling that agrees with the lowest within TIE is the same limit seen twice, and the cause: a
    # raw-TCP probe held by the same 64 KiB window as the copy gives a raw-tcp ceiling equal to the window's,
    # and "window" says why the path's TCP could do no better, where "raw-tcp" only says that it could not.
    # (The window is read from the copy's own connections; the requests and per-file ceilings are built on
    # the raw-TCP rate, so their agreeing with it tells nothing, and they get no such preference.)
    # Compared without a fixed cost per copy: a start-up that dwarfs the streaming brings every ceiling within TIE
    # of the others, and would name the window for what the start-up does.
    window = next((b for b in others if b.label == "window"), None)
    if window is not None and window.streaming <= lowest.streaming * (1 + TIE):
        return window
    return lowest


def format_bound(bound: Bound) -> str:
    """'window ≤ 46.8 MB/s (window 128 KiB / 2.8 ms)'."""
    return f"{bound.label} ≤ {bound.bytes_per_s / 1e6:.1f} MB/s ({bound.explanation})"


def format_bytes(n: int) -> str:
    """Binary units, exact where possible: 65536 -> '64 KiB', 1536 -> '1.5 KiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if n % scale == 0 else f"{value:.1f} {unit}"
    return f"{n} B"


def format_ms(seconds: float) -> str:
    """Two significant figures: '0.40 ms', '2.8 ms', '31 ms'."""
    ms = seconds * 1e3
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 10:
        return f"{ms:.1f} ms"
    return f"{ms:.0f} ms"


def format_bits(bytes_per_s: float) -> str:
    """A link rate given in bytes/s, shown the way links are named: '1 Gbit/s', '100 Mbit/s'."""
    bits = bytes_per_s * 8
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= scale:
            value = bits / scale
            return f"{value:.0f} {unit}" if value == int(value) or value >= 100 else f"{value:.3g} {unit}"
    return f"{bits:.0f} bit/s"
