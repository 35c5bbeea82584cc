"""What the lab link really does: its idle RTT (calibrated once against the delay line) and its goodput.

The lab reports these measured figures, not the ones it was asked for. Both run plain sockets from the
client namespace to the server namespace; what falls short of the request goes into the lab's notes.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import threading
import time
from dataclasses import dataclass

from workbench.lab.emulator import LinkDriver
from workbench.lab.lifecycle import Hosts
from workbench.lab.linkemu import expected_goodput_bits_per_s
from workbench.shared.errors import WorkbenchError
from workbench.shared.tcpinfo import read_tcp_info


def connect_times(hosts: Hosts, emulator: LinkDriver, count: int) -> list[float]:
    """`count` TCP connect times from client to server, in seconds, one connection at a time."""
    with hosts.in_server():
        listener = socket.socket()
    with listener:
        listener.bind((hosts.server_addr, 0))
        listener.listen(count + 1)
        port = listener.getsockname()[1]
        samples = []
        with hosts.in_client():
            socks = [socket.socket() for _ in range(count)]
        try:
            for sock in socks:
                sock.settimeout(5)
                t0 = time.perf_counter()
                sock.connect((hosts.server_addr, port))
                samples.append(time.perf_counter() - t0)
                sock.close()
                listener.accept()[0].close()
                time.sleep(0.002)  # let the FIN exchange pass so it never queues ahead of the next SYN
        except OSError as exc:
            raise WorkbenchError(f"the lab link does not carry TCP: {exc}", emulator.log_tail()) from exc
        finally:
            for sock in socks:
                sock.close()
    return samples


def idle_rtt_ms(hosts: Hosts, emulator: LinkDriver, count: int = 20) -> float:
    """Median TCP connect time (one SYN/SYN-ACK round trip) from client to server, in ms."""
    return 1000 * statistics.median(connect_times(hosts, emulator, count))


def _path_overhead_ms(hosts: Hosts, emulator: LinkDriver, line_rtt: float) -> float:
    """What the TUN path and wake-ups add to a delay line of `line_rtt` ms per round trip.

    CPU contention only ever adds to a sample, so the quietest of three rounds is taken: trimming the
    line by one noisy round made the link faster than asked (1.2 ms for 2.8 under a neighbour's load).
    """
    rounds = [1000 * statistics.median(connect_times(hosts, emulator, 10)) for _ in range(3)]
    return max(0.0, min(rounds) - line_rtt)


def calibrate(hosts: Hosts, emulator: LinkDriver, rtt_ms: float, loss: float, notes: list[str]) -> float:
    """Measure the idle RTT and trim the delay line by the forwarder's own latency, once; returns it in ms."""
    target = rtt_ms
    if loss:
        emulator.ask("loss 0")  # a lost SYN costs a 1 s retransmission: calibrate on a clean line
    idle_rtt_ms(hosts, emulator, 3)  # warm up caches and the forwarder's first wake-ups
    overhead = _path_overhead_ms(hosts, emulator, target)
    line_rtt = max(0.0, target - overhead)  # what the delay line adds per round trip (both ways)
    if line_rtt != target:
        emulator.ask(f"delay {line_rtt / 2000:.7f}")
    measured = idle_rtt_ms(hosts, emulator)
    if measured < target - 0.05 and line_rtt < target:
        # trimmed too far after all (the machine got quieter): give the difference back, never more
        line_rtt = min(target, line_rtt + target - measured)
        emulator.ask(f"delay {line_rtt / 2000:.7f}")
        measured = idle_rtt_ms(hosts, emulator)
    if loss:
        emulator.ask(f"loss {loss}")
    if line_rtt == 0 and measured > target + 0.03:
        notes.append(
            f"idle RTT {measured:.2f} ms, not {target} ms: the TUN path and forwarder alone take that long here"
        )
    elif abs(measured - target) > 0.3:
        notes.append(f"idle RTT {measured:.2f} ms is off the {target} ms asked for (CPU contention?)")
    return measured


GOODPUT_AGREES = 0.98  # a goodput within 2 % of the expected one needs no second look
# A round's warm-up and measured seconds together never load the link longer than this: the meter runs before
# every lab run, two rounds at most. --goodput-duration (workbench.core.settings) stops at what fits after the
# lab's 1 s warm-up, so what a run asks for is what it gets.
GOODPUT_LOAD_MAX_S = 10.0
GOODPUT_ROUNDS = 2  # CPU contention only ever lowers a round: the better of two is the link's


def goodput_bits_per_s(
    hosts: Hosts,
    emulator: LinkDriver,
    rate_bits_per_s: int,
    mtu: int,
    cc: str | None,
    notes: list[str],
    seconds: float = 3.0,
    warmup: float = 1.0,
) -> float:
    """TCP goodput client→server in bit/s over `seconds` after a `warmup`, with one plain socket stream.

    A round more than 2 % below the expected goodput (and not stalled by the line, as asked) is measured once
    more and the better one kept: the meter shares the host's cores with the emulator and the rest of the
    machine, and contention only ever lowers a round (a single round read 483 Mbit/s of an expected 502 while
    raw TCP reached 498 and 500 in the same lab). What still falls short goes into the notes with its evidence.
    """
    expected = expected_goodput_bits_per_s(rate_bits_per_s, mtu)
    rounds: list[_Round] = []
    for _ in range(GOODPUT_ROUNDS):
        rounds.append(_one_round(hosts, emulator, cc, seconds, warmup))
        # a line that stalled as asked reads low by design: another round would only meet more stalls
        if rounds[-1].bits_per_s >= GOODPUT_AGREES * expected or rounds[-1].stalled_s > 0:
            break
    best = max(rounds, key=lambda r: r.bits_per_s)
    if best.bits_per_s < GOODPUT_AGREES * expected:
        notes.append(_shortfall_note(best, expected, [r.bits_per_s for r in rounds]))
    return best.bits_per_s


@dataclass(frozen=True)
class _Round:
    bits_per_s: float
    emulator_cpu: float  # share of one core
    stalled_s: float  # the line's own pauses meanwhile (asked for with --stall)
    retrans_share: float | None  # retransmitted bytes / bytes sent, from the sender's TCP_INFO


def _shortfall_note(best: _Round, expected: float, all_bits_per_s: list[float]) -> str:
    if best.stalled_s > 0:
        why = f"the line stalled for {best.stalled_s:.1f} s meanwhile, as asked"
    elif best.emulator_cpu > 0.8:
        why = "the emulator was near a full core"
    elif best.retrans_share is not None and best.retrans_share > 0.01:
        why = f"{best.retrans_share:.1%} of the bytes were sent again (queue drops)"
    else:
        why = "CPU contention on this host (the meter, the emulator and the machine's other work share its cores)"
    rounds = " and ".join(f"{b / 1e6:.0f}" for b in all_bits_per_s)
    return (
        f"goodput {best.bits_per_s / 1e6:.0f} Mbit/s is below the {expected / 1e6:.0f} Mbit/s expected "
        f"(rounds: {rounds} Mbit/s): {why} (emulator used {best.emulator_cpu:.0%} of a core)"
    )


def _one_round(hosts: Hosts, emulator: LinkDriver, cc: str | None, seconds: float, warmup: float) -> _Round:
    total = min(seconds + warmup, GOODPUT_LOAD_MAX_S)  # bounded time, whatever a caller asks
    before = emulator.stats()
    with hosts.in_server():
        listener = socket.socket()
    marks: list[tuple[float, int]] = []
    errors: list[BaseException] = []
    info = None

    def receive() -> None:
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                buf = bytearray(1 << 20)
                got = 0
                while True:
                    n = conn.recv_into(buf)
                    if not n:
                        break
                    got += n
                    marks.append((time.monotonic(), got))
        except OSError as exc:
            errors.append(exc)

    with listener:
        listener.bind((hosts.server_addr, 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        thread = threading.Thread(target=receive, daemon=True)
        thread.start()
        with hosts.in_client():
            sender = socket.socket()
        with sender:
            sender.settimeout(5)
            if cc:
                with contextlib.suppress(OSError):
                    sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
            sender.connect((hosts.server_addr, port))
            block = memoryview(bytes(1 << 20))
            end = time.monotonic() + total
            try:
                while time.monotonic() < end:
                    sender.sendall(block)
            except OSError as exc:
                errors.append(exc)
            info = read_tcp_info(sender)
        thread.join(10)
    if errors or len(marks) < 2:
        raise WorkbenchError(f"goodput stream over the lab link failed: {errors[0] if errors else 'no data'}")
    bits_per_s = _rate_after_warmup_bits_per_s(marks, warmup)
    after = emulator.stats()
    wall = max(1e-9, after["wall_seconds"] - before["wall_seconds"])
    stalled_s = sum(
        after.get(way, {}).get("stalled_s", 0) - before.get(way, {}).get("stalled_s", 0)
        for way in ("client_to_server", "server_to_client")
    )
    retrans = None
    if info is not None and info.bytes_sent and info.bytes_retrans is not None:
        retrans = info.bytes_retrans / info.bytes_sent
    return _Round(
        bits_per_s=bits_per_s,
        emulator_cpu=(after["cpu_seconds"] - before["cpu_seconds"]) / wall,
        stalled_s=stalled_s,
        retrans_share=retrans,
    )


def _rate_after_warmup_bits_per_s(marks: list[tuple[float, int]], warmup: float) -> float:
    """The receiver's rate in bit/s from its first mark (time, bytes so far) at or after `warmup` to its last
    (from its first mark if none came that late). No time between them (a single mark after the warm-up, as a
    very short measured time or a stalled line gives) measures nothing: refused, not divided by."""
    start_t = marks[0][0] + warmup
    first = next(((t, b) for t, b in marks if t >= start_t), marks[0])
    last = marks[-1]
    span_s = last[0] - first[0]
    if span_s <= 0:
        raise WorkbenchError(
            f"goodput stream over the lab link: no time left to measure after its {warmup:g} s warm-up "
            f"({len(marks)} reads, the last {last[0] - marks[0][0]:.2f} s after the first)"
        )
    return 8 * (last[1] - first[1]) / span_s
