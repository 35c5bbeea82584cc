"""Counting a client's exchanges from packets: turns of the conversation, not packets or connections."""

from __future__ import annotations

import dataclasses
import importlib.util
import socket
import struct
import sys
from pathlib import Path

import pytest

from workbench.core.results import Baseline, Result, Run, Sample
from workbench.lab.exchangecount import ClientCount
from workbench.lab.wirecount import (
    Counted,
    Packet,
    control_connections,
    count_round_trips,
    parse_ipv4_tcp,
    within,
)

CLIENT, SERVER = "10.77.0.1", "10.77.0.2"
CONN = (CLIENT, 40000, SERVER, 8181)
DATA = (CLIENT, 40002, SERVER, 30000)


def _c(t_ms: float, payload: int = 100, syn: bool = False, conn: tuple[str, int, str, int] = CONN) -> Packet:
    return Packet(t_ms / 1e3, True, conn, payload, syn)


def _s(t_ms: float, payload: int = 100, syn: bool = False, conn: tuple[str, int, str, int] = CONN) -> Packet:
    return Packet(t_ms / 1e3, False, conn, payload, syn)


def test_each_wait_for_the_server_is_one_exchange_and_acks_or_streaming_are_none() -> None:
    # a request, its answer in three segments, the client's pure ACKs, then the next request after a round trip
    packets = [_c(0), _s(2.8, 1448), _s(2.9, 1448), _c(2.95, 0), _s(3.0, 500), _c(3.1), _s(5.9)]
    assert count_round_trips(packets, 0.0014).turns == 2
    # an upload streaming on while the server sends a window update mid-way waited for nothing
    streaming = [_c(0, 1448), _c(0.1, 1448), _s(0.15, 40), _c(0.2, 1448), _c(0.3, 1448), _s(3.1)]
    assert count_round_trips(streaming, 0.0014).turns == 1
    # pipelined requests sent before any answer are one exchange
    assert count_round_trips([_c(0), _c(0.05), _s(2.8), _s(2.9)], 0.0014).turns == 1


def test_a_sender_held_by_its_congestion_window_waits_a_round_trip_per_flight() -> None:
    # a fresh connection's answer in three flights, each after the client's ACKs of the last came back
    packets = [_c(0), _s(2.8, 14480), _c(2.9, 0), _s(5.8, 28960), _c(5.9, 0), _s(8.8, 22096), _c(8.9, 0)]
    assert count_round_trips(packets, 0.0014) == Counted(turns=1, flights=2)
    # an upload the same way: the client's data resumes after ACKs, the server's answer ends it
    upload = [_c(0, 14480), _s(2.8, 0), _c(2.9, 28960), _s(5.7, 0), _c(5.8, 22096), _s(8.7, 0), _s(8.8, 120)]
    assert count_round_trips(upload, 0.0014) == Counted(turns=1, flights=2)


def test_a_new_connection_is_a_round_trip_on_any_connection() -> None:
    # FTP: PASV answered, the data connection's SYN/SYN-ACK, then RETR on the control connection
    packets = [
        _c(0),
        _s(2.8),
        _c(3.0, 0, syn=True, conn=DATA),
        _s(5.8, 0, syn=True, conn=DATA),
        _c(5.9),
        _s(8.7),
        _s(8.7, 1448, conn=DATA),
    ]
    assert count_round_trips(packets, 0.0014).turns == 3


def test_control_api_connections_are_left_out() -> None:
    ctl = (CLIENT, 40010, SERVER, 8181)
    packets = [Packet(0.0, True, ctl, 90, False, b"GET /ctl/cpu HTTP/1.1\r\n"), _s(2.8, conn=ctl), _c(10.0)]
    skip = control_connections(packets)
    assert skip == {ctl}
    assert count_round_trips(within(packets, 0.0, 1.0, skip), 0.0014).turns == 1


def test_a_connection_that_asks_the_control_api_then_copies_is_counted() -> None:
    """An HTTP client asking the control API on its own kept connection before it copies there (aiohttp's
    /ctl/info at login, /ctl/mkdir) is copying: its copies count; a connection of control requests alone does not."""
    ctl = (CLIENT, 40010, SERVER, 8181)
    packets = [
        Packet(0.0, True, CONN, 90, False, b"GET /ctl/info HTTP/1.1\r\n"),
        _s(2.8),
        Packet(0.004, True, ctl, 90, False, b"GET /ctl/cpu HTTP/1.1\r\n"),
        _s(6.8, conn=ctl),
        Packet(0.010, True, CONN, 1448, False, b"PUT /f/incoming/a HTTP/1"),
        Packet(0.0101, True, CONN, 1448, False, bytes(range(200, 224))),  # the file's bytes: no request
        _s(12.8),
        Packet(0.015, True, ctl, 90, False, b"POST /ctl/tcpwatch HTTP/1"),
        _s(17.8, conn=ctl),
    ]
    assert control_connections(packets) == {ctl}
    assert count_round_trips(within(packets, 0.009, 0.02, control_connections(packets)), 0.0014).turns == 1


def test_an_ftp_connection_whose_commands_look_like_requests_is_counted() -> None:
    ftp = (CLIENT, 40020, SERVER, 2121)
    packets = [
        Packet(0.0, True, ftp, 20, False, b"CWD /ctl-like/dir\r\n"),
        Packet(0.003, True, ftp, 20, False, b"STOR /x\r\n"),
    ]
    assert control_connections(packets) == set()


def _ipv4_tcp(src: str, dst: str, flags: int, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", 40000, 8181, 1, 0, 5 << 4, flags, 65535, 0, 0) + payload
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, socket.inet_aton(src), socket.inet_aton(dst)
    )
    return ip + tcp


def test_packets_parse_from_ipv4_headers() -> None:
    packet = parse_ipv4_tcp(_ipv4_tcp(CLIENT, SERVER, 0x18, b"PUT /f/x HTTP/1.1"), 1.5, CLIENT)
    assert packet is not None and packet.from_client and packet.payload_bytes == 17 and not packet.syn
    assert packet.conn == CONN and packet.head.startswith(b"PUT /f/x")
    answer = parse_ipv4_tcp(_ipv4_tcp(SERVER, CLIENT, 0x12, b""), 1.6, CLIENT)
    assert answer is not None and not answer.from_client and answer.syn and answer.payload_bytes == 0
    assert parse_ipv4_tcp(_ipv4_tcp("10.0.0.9", SERVER, 0x10, b""), 1.0, CLIENT) is None


def _copy(start_s: float, files: int, trips_per_file: int, login_trips: int, rtt_s: float) -> list[Packet]:
    """A copy that waits `login_trips` round trips once, then `trips_per_file` per file, one RTT each."""
    packets = []
    t = start_s
    for _ in range(login_trips + files * trips_per_file):
        packets += [Packet(t, True, CONN, 100, False), Packet(t + rtt_s, False, CONN, 100, False)]
        t += rtt_s + 0.0005
    return packets


def _ftplib_uploads(seconds_by_files: dict[int, float]) -> Run:
    """A wifi-ac run (2.8 ms, 62.5 MB/s) of ftplib uploading sets of 64 KiB files: files -> the copy's seconds."""
    rows = tuple(
        Result(
            "ftp", "ftplib", "upload", f"{n}x64K", n * 65536, n,
            samples=(Sample(bytes=n * 65536, seconds=seconds, files=n, verified=True),),
        )
        for n, seconds in seconds_by_files.items()
    )  # fmt: skip
    link = {"rtt_ms": 2.8, "expected_goodput_bytes_per_s": 62.5e6}
    return Run(id=1, meta={}, baseline=Baseline(rtt_ms=2.8), results=rows, link=link)


def test_a_runs_copies_give_round_trips_per_file_per_set_and_the_turnaround() -> None:
    from workbench.lab.exchangecount import count_clients, predicted_s

    rtt_s = 0.0028
    packets = [*_copy(10.0, 4, 3, 5, rtt_s), *_copy(20.0, 12, 3, 5, rtt_s)]
    ctl = (CLIENT, 40010, SERVER, 8181)
    packets += [Packet(10.5, True, ctl, 90, False, b"POST /ctl/hash HTTP/1.1"), Packet(10.6, False, ctl, 90, False)]
    marks = [
        (9.0, "ftp/ftplib upload 4x64K warm-up"),
        (10.0, "ftp/ftplib upload 4x64K 1/1"),
        (15.0, None),
        (20.0, "ftp/ftplib upload 12x64K 1/1"),
        (25.0, None),
    ]

    (count,) = count_clients(_ftplib_uploads({4: 0.1, 12: 0.26}), packets, marks)
    assert (count.label, count.direction, count.files) == ("ftp/ftplib", "upload", (4, 12))
    assert count.per_file == 3 and count.per_set == 5  # the control API's exchange is left out
    # 20 ms per file in all, of which 3 RTT and 64 KiB at 62.5 MB/s: the rest is turnaround
    assert count.turnaround_per_file_s == pytest.approx(0.02 - 3 * rtt_s - 65536 / 62.5e6)
    assert count.turnaround_per_set_s == pytest.approx(0.1 - 4 * 0.02 - 5 * rtt_s)
    # on the same link the counts give back the copies' own times
    assert predicted_s(count, 12, 65536, rtt_s, 62.5e6) == pytest.approx(0.26)
    # a link with no path rate known charges no bytes' time rather than failing
    no_path = predicted_s(count, 12, 65536, rtt_s, 0.0)
    assert no_path == pytest.approx(0.26 - 12 * 65536 / 62.5e6)


def test_a_smaller_set_that_waited_less_than_its_files_share_counts_no_round_trip_per_set() -> None:
    """4 files at 3 round trips each (12), 12 files at 4 (48; more of a longer set waits): the line through them,
    4.5 per file, would give the set -6 round trips; a set never pays fewer than none."""
    from workbench.lab.exchangecount import count_clients

    rtt_s = 0.0028
    packets = [*_copy(10.0, 4, 3, 0, rtt_s), *_copy(20.0, 8, 6, 0, rtt_s)]
    marks = [(10.0, "ftp/ftplib upload 4x64K 1/1"), (15.0, None), (20.0, "ftp/ftplib upload 12x64K 1/1"), (25.0, None)]

    (count,) = count_clients(_ftplib_uploads({4: 0.05, 12: 0.2}), packets, marks)
    assert count.per_file == 4.5 and count.per_set == 0


def test_a_count_with_cpu_figures_predicts_by_the_per_file_ceilings_rule() -> None:
    from workbench.lab.exchangecount import predicted_s, with_setups

    rtt_s, path = 0.0028, 62.5e6
    wire_s = 65536 / path
    # 3 round trips per file, the sending client's 3 ms of CPU in turn, then the bytes' 1.05 ms, which the server's
    # 1 ms of CPU overlaps: 3 RTT + 3 ms + 1.05 ms = 12.45 ms per file; the sets of 4 and 12 files took 0.2 s beyond
    # that, 5 RTT of it the set's round trips
    per_file_s = 3 * rtt_s + 0.003 + wire_s
    count = _three_round_trips("sftp/openssh")

    def row(files: int) -> Result:
        sample = Sample(bytes=files * 65536, seconds=0.2 + files * per_file_s, files=files, verified=True)
        return Result("sftp", "openssh", "upload", f"{files}x64K", files * 65536, files, samples=(sample,))

    link = {"rtt_ms": 2.8, "expected_goodput_bytes_per_s": path}
    run = Run(id=1, meta={}, baseline=Baseline(rtt_ms=2.8), results=(row(4), row(12)), link=link)
    (counted,) = with_setups(run, [count])
    assert counted.setup_s == pytest.approx(0.2 - 5 * rtt_s)
    # on the same link it gives the sets back; on a link of 0.3 ms and 1 Gbit/s the round trips shrink, the CPU
    # stays, and the server's 1 ms now outlasts the bytes' 0.52 ms
    assert predicted_s(counted, 12, 65536, rtt_s, path) == pytest.approx(0.2 + 12 * per_file_s)
    fast = predicted_s(counted, 30, 65536, 0.0003, 125e6)
    assert fast == pytest.approx(0.2 - 5 * rtt_s + 5 * 0.0003 + 30 * (3 * 0.0003 + 0.003 + 0.001))
    # the sender's CPU is in turn however short; the receiver's under the bytes' time costs nothing
    light = dataclasses.replace(counted, client_cpu_per_file_s=0.0005, server_cpu_per_file_s=0.0002)
    assert predicted_s(light, 12, 65536, rtt_s, path) == pytest.approx(
        counted.setup_s + 5 * rtt_s + 12 * (3 * rtt_s + 0.0005 + wire_s)
    )


def test_a_counts_setup_is_the_measured_intercept_not_what_the_model_leaves() -> None:
    from workbench.lab.exchangecount import predicted_s, with_setups

    rtt_s, path = 0.0028, 62.5e6
    # the model charges 3 RTT + 3 ms of client CPU + the bytes' 1.05 ms per file, but the copies took 2 ms more per
    # file (they waited for a core) beyond a setup of 0.2 s
    model_s = 3 * rtt_s + 0.003 + 65536 / path
    count = _three_round_trips("sftp/openssh")

    def row(files: int) -> Result:
        sample = Sample(bytes=files * 65536, seconds=0.2 + files * (model_s + 0.002), files=files, verified=True)
        return Result("sftp", "openssh", "upload", f"{files}x64K", files * 65536, files, samples=(sample,))

    link = {"rtt_ms": 2.8, "expected_goodput_bytes_per_s": path}
    run = Run(id=1, meta={}, baseline=Baseline(rtt_ms=2.8), results=(row(4), row(12)), link=link)
    (counted,) = with_setups(run, [count])
    # the sets less the model's files would leave 4 × 2 ms and 12 × 2 ms in the setup (16 ms more, their median):
    # the intercept leaves the model's shortfall per file
    assert counted.setup_s == pytest.approx(0.2 - 5 * rtt_s)
    # so a set smaller than the counted ones is not overshot: its prediction is the model's time, under the copy's
    one = predicted_s(counted, 1, 65536, rtt_s, path)
    assert one == pytest.approx(0.2 + model_s)
    assert one < 0.2 + model_s + 0.002
    # a setup the sets' line puts below zero is none
    early = Run(id=1, meta={}, baseline=Baseline(rtt_ms=2.8), results=(row(4), row(40)), link=link)
    (none,) = with_setups(early, [dataclasses.replace(count, files=(4, 40), per_set=200)])
    assert none.setup_s == 0.0


def test_waits_for_a_core_are_no_part_of_a_count_and_added_only_when_asked() -> None:
    from workbench.lab.exchangecount import Waits, predicted_s, waits_of, with_setups

    rtt_s, path = 0.0028, 62.5e6
    wire_s = 65536 / path
    per_file_s = 3 * rtt_s + 0.003 + wire_s  # as above: 3 RTT, 3 ms of client CPU, the bytes over the server's 1 ms
    count = _three_round_trips("sftp/paramiko")

    def row(files: int, client_wait_s: float, server_wait_s: float) -> Result:
        sample = Sample(
            bytes=files * 65536,
            seconds=0.2 + files * per_file_s,
            files=files,
            verified=True,
            client_wait_s=client_wait_s,
            server_wait_s=server_wait_s,
        )
        return Result("sftp", "paramiko", "upload", f"{files}x64K", files * 65536, files, samples=(sample,))

    link = {"rtt_ms": 2.8, "expected_goodput_bytes_per_s": path}
    loaded = (row(4, 0.02, 0.01), row(12, 0.06, 0.03))
    run = Run(id=1, meta={}, baseline=Baseline(rtt_ms=2.8), results=loaded, link=link)
    (counted,) = with_setups(run, [count])
    assert counted.setup_s == pytest.approx(0.2 - 5 * rtt_s)  # the waits overlap the rest: none taken off
    assert waits_of(loaded[1]) == Waits(0.06, 0.03)
    quiet = predicted_s(counted, 12, 65536, rtt_s, path)
    assert quiet == pytest.approx(0.2 + 12 * per_file_s)
    # asked, the prediction adds the measured waits by the model's own rule: each side's wait per file joins its
    # CPU. The sending client's 5 ms per file adds whole (its CPU is in turn); the server's 2.5 ms makes its 1 ms
    # 3.5, which outlasts the bytes' 1.05 ms by 2.45 ms: 7.45 ms more per file, not both waits (7.5 ms)
    waited = predicted_s(counted, 12, 65536, rtt_s, path, waits_of(loaded[1]))
    assert waited == pytest.approx(quiet + 12 * (0.005 + 0.0035 - wire_s))
    # a server's wait that leaves it shorter than the bytes' time adds nothing (1 ms + 0.04 ms < 1.05 ms)
    assert predicted_s(counted, 12, 65536, rtt_s, path, Waits(None, 0.00048)) == pytest.approx(quiet)
    # one that makes it the longest of the overlapping parts adds what it outlasts the bytes by (1 ms + 4 ms)
    longer = predicted_s(counted, 12, 65536, rtt_s, path, Waits(None, 0.048))
    assert longer == pytest.approx(quiet + 12 * (0.005 - wire_s))
    # a client with files in flight may overlap its waits with anything: none to add
    in_flight = dataclasses.replace(loaded[1], details=dataclasses.replace(loaded[1].details, files_in_flight=4))
    assert waits_of(in_flight) == Waits()


def test_a_client_that_keeps_files_in_flight_is_charged_no_round_trip_per_file_on_another_link() -> None:
    from workbench.lab.exchangecount import IN_FLIGHT_TURNS, predicted_s, waited_round_trips

    # counted on a 2.8 ms link at half a round trip per file: 0.4 turns (its own pace left half-RTT gaps) and 0.1
    # flights, 1 round trip per set, 1.8 ms of client and 0.5 ms of server CPU per file, no setup
    pipelined = ClientCount(
        "smb/smbprotocol", "upload", 0.5, 1, 0.4, 0.1, 0.0, 0.0, (4, 12),
        client_cpu_per_file_s=0.0018, server_cpu_per_file_s=0.0005, setup_s=0.0,
    )  # fmt: skip
    assert pipelined.turns_per_file < IN_FLIGHT_TURNS and waited_round_trips(pipelined) == 0
    rtt_s, path = 0.040, 11.7e6
    wire_s = 65536 / path  # 5.6 ms: longer than either side's CPU
    # on a 40 ms link 8 files cost one round trip for the set and their bytes, not 8 × 0.5 × 40 ms more
    assert predicted_s(pipelined, 8, 65536, rtt_s, path) == pytest.approx(rtt_s + 8 * wire_s)
    # one turn per file is a wait per file, on any link, and the sending client's CPU is then in turn
    one_turn = dataclasses.replace(pipelined, per_file=1.0, turns_per_file=1.0, flights_per_file=0.0)
    assert waited_round_trips(one_turn) == 1.0
    assert predicted_s(one_turn, 8, 65536, rtt_s, path) == pytest.approx(rtt_s + 8 * (rtt_s + 0.0018 + wire_s))


def test_a_client_waits_its_counted_round_trips_per_file_at_least_one_and_none_with_files_in_flight() -> None:
    from workbench.lab.exchangecount import IN_FLIGHT_TURNS, waited_round_trips
    from workbench.protocols.exchanges import waited_per_file

    assert waited_per_file(4.0, files_in_flight=False) == 4.0  # one file at a time: each file's round trips
    assert waited_per_file(0.4, files_in_flight=False) == 1.0  # at least its request and the reply
    assert waited_per_file(0.4, files_in_flight=True) == 0.0  # the next file's requests go before the reply
    assert waited_per_file(6.0, files_in_flight=True) == 0.0
    # the predictions read "in flight" from the counted turns per file, through the same rule
    count = ClientCount("ftp/ftplib", "upload", 0.5, 1, IN_FLIGHT_TURNS, 0.0, 0.0, 0.0, (4, 12))
    assert waited_round_trips(count) == 1.0
    assert waited_round_trips(dataclasses.replace(count, turns_per_file=IN_FLIGHT_TURNS - 0.01)) == 0.0


def _three_round_trips(label: str) -> ClientCount:
    """An upload count of 3 round trips per file and 5 per set, 3 ms of client and 1 ms of server CPU per file,
    taken from sets of 4 and 12 files."""
    return ClientCount(
        label, "upload", 3, 5, 3, 0, 0.0, 0.0, (4, 12), client_cpu_per_file_s=0.003, server_cpu_per_file_s=0.001
    )


def test_a_rewritten_table_keeps_the_figures_several_countings_agreed_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.lab.exchangecount import write_table
    from workbench.protocols import exchanges

    table = tmp_path / "exchanges.py"
    table.write_text(Path(exchanges.__file__).read_text())
    # one counting that sees afp downloads at 2.4 round trips per file, and ftplib uploads at 7
    counts = [
        ClientCount("afp/python", "download", 2.4, 0.3, 2.4, 0, 0.0, 0.0, (4, 12)),
        ClientCount("ftp/ftplib", "upload", 7.0, 0.1, 6.0, 1.0, 0.0, 0.0, (4, 12)),
    ]
    write_table(table, counts)
    spec = importlib.util.spec_from_file_location("rewritten_exchanges", table)
    assert spec is not None and spec.loader is not None
    rewritten = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, rewritten)  # its dataclass looks its module up
    spec.loader.exec_module(rewritten)
    counted = rewritten.COUNTED
    assert counted[("ftp/ftplib", "upload")] == rewritten.Exchanges(per_file=7, per_set=0.1)
    # the figures six countings agreed on are declared after the generated table: the rewrite keeps them
    assert counted[("afp/python", "download")] == rewritten.Exchanges(per_file=2, per_set=0)
    assert set(rewritten.AGREED_BY_SIX_COUNTINGS) == set(exchanges.AGREED_BY_SIX_COUNTINGS)
    assert ("afp/python", "download") in exchanges.AGREED_BY_SIX_COUNTINGS


def test_a_wait_for_a_delayed_ack_is_counted_in_the_timers_seconds_on_either_side() -> None:
    from workbench.lab.wirecount import delayed_ack_waits

    rtt_ms = 0.2
    # the client sends 16 bytes and holds its next segment (Nagle) until the server's ACK, which the server delays
    # 42 ms: it arrives 42 ms + a round trip later and the client speaks at once
    client_waits = [_c(0, 16), _s(42.0 + rtt_ms, 0), _c(42.25, 52)]
    # the server sends 296 bytes and holds its next until the client's ACK, delayed 41 ms: the server's next
    # packet arrives a round trip after that ACK left
    server_waits = [_s(100.0, 296), _c(141.0, 0), _s(141.0 + rtt_ms + 0.05, 356)]
    waits = delayed_ack_waits([*server_waits, *client_waits], rtt_ms / 1e3)
    assert waits == [pytest.approx(0.042), pytest.approx(0.041)]
    # the same ACKs on a 40 ms link: the round trip is no part of the wait
    wan = delayed_ack_waits([_c(0, 16), _s(42.0 + 40.0, 0), _c(82.3, 52)], 0.040)
    assert wan == [pytest.approx(0.042)]


def test_a_late_answer_a_slow_resume_or_another_connection_is_no_delayed_ack_wait() -> None:
    from workbench.lab.wirecount import delayed_ack_waits

    rtt_s = 0.0002
    answered = [_c(0, 16), _s(45.0, 300), _c(45.1, 52)]  # the server thought 45 ms and answered: a turn
    slow = [_c(0, 16), _s(42.2, 0), _c(60.0, 52)]  # the client resumed 18 ms after the ACK: it was busy, not held
    quick = [_c(0, 16), _s(5.0, 0), _c(5.1, 52)]  # an ACK 5 ms late is no delayed-ACK timer's
    crossed = [_c(0, 16), _s(42.2, 0, conn=DATA), _c(42.3, 52)]  # the ACK is another connection's
    for packets in (answered, slow, quick, crossed):
        assert delayed_ack_waits(packets, rtt_s) == [], packets
    # on a 40 ms link: a server flight that arrives 1 ms after the client's ACK left was sent before that ACK
    # reached the server (its round trip is as long as the timer), and one 5 ms after it as well: no wait
    for early_ms in (41.0, 47.0):
        assert delayed_ack_waits([_s(0, 1448), _c(40.0, 0), _s(early_ms, 1448)], 0.040) == []
    # the same flight a round trip after the ACK did wait for it
    assert delayed_ack_waits([_s(0, 1448), _c(40.0, 0), _s(80.3, 1448)], 0.040) == [pytest.approx(0.040)]


def test_delayed_ack_waits_are_counted_per_file_and_per_set_and_predicted_on_any_link() -> None:
    """Two waits per file (a login per file), the copies' time the same either way: the count keeps them apart
    from the round trips, and a prediction charges their seconds whatever the link's RTT."""
    from workbench.lab.exchangecount import count_clients, predicted_s

    rtt_s = 0.0028

    def copy(start_s: float, files: int) -> list[Packet]:
        packets = []
        t_ms = start_s * 1e3
        for n in range(files):
            conn = (CLIENT, 41000 + n + int(start_s), SERVER, 22)
            packets += [_c(t_ms, 16, conn=conn), _s(t_ms + 42.0 + 2.8, 0, conn=conn), _c(t_ms + 44.9, 52, conn=conn)]
            packets += [_s(t_ms + 48.0, 296, conn=conn), _c(t_ms + 89.0, 0, conn=conn)]
            packets += [_s(t_ms + 92.0, 356, conn=conn)]
            t_ms += 100.0
        return packets

    packets = [*copy(10.0, 4), *copy(20.0, 12)]
    marks = [(10.0, "ftp/ftplib upload 4x64K 1/1"), (15.0, None), (20.0, "ftp/ftplib upload 12x64K 1/1"), (25.0, None)]
    (count,) = count_clients(_ftplib_uploads({4: 0.4, 12: 1.2}), packets, marks)
    assert count.delayed_acks_per_file == 2 and count.delayed_acks_per_set == 0
    assert count.delayed_ack_wait_per_file_s == pytest.approx(0.042 + 0.041, abs=1e-4)
    # no CPU figures: the prediction is the turnaround's, which holds the waits already on the counting link
    assert predicted_s(count, 12, 65536, rtt_s, 62.5e6) == pytest.approx(1.2)
    with_cpu = dataclasses.replace(count, client_cpu_per_file_s=0.001, server_cpu_per_file_s=0.001, setup_s=0.0)
    near = predicted_s(with_cpu, 10, 65536, 0.0002, 125e6)
    without = predicted_s(dataclasses.replace(with_cpu, delayed_ack_wait_per_file_s=0.0), 10, 65536, 0.0002, 125e6)
    assert near - without == pytest.approx(10 * count.delayed_ack_wait_per_file_s)
    per_set = dataclasses.replace(with_cpu, delayed_ack_wait_per_file_s=0.0, delayed_ack_wait_per_set_s=0.085)
    assert predicted_s(per_set, 10, 65536, 0.040, 125e6) - predicted_s(
        dataclasses.replace(per_set, delayed_ack_wait_per_set_s=0.0), 10, 65536, 0.040, 125e6
    ) == pytest.approx(0.085)


def test_a_rewritten_table_keeps_the_delayed_ack_waits_counted() -> None:
    from workbench.lab.exchangecount import table_source

    counts = [
        dataclasses.replace(
            ClientCount("scp/openssh", "download", 21, 0, 17, 4, 0.0, 0.0, (4, 12)), delayed_acks_per_file=2.0
        ),
        dataclasses.replace(
            ClientCount("sftp/openssh", "upload", 4, 17, 4, 0, 0.0, 0.0, (4, 12)), delayed_acks_per_set=2.04
        ),
        ClientCount("ftp/ftplib", "upload", 7, 0, 7, 0, 0.0, 0.0, (4, 12)),
    ]
    source = table_source(counts)
    assert '("scp/openssh", "download"): Exchanges(per_file=21, per_set=0, delayed_acks_per_file=2),' in source
    assert '("sftp/openssh", "upload"): Exchanges(per_file=4, per_set=17, delayed_acks_per_set=2),' in source
    assert '("ftp/ftplib", "upload"): Exchanges(per_file=7, per_set=0),' in source


def test_a_sets_delayed_ack_waits_leave_its_setup_and_come_back_once() -> None:
    """A set's waits for delayed ACKs are measured inside its fixed part: the setup is what is left of it, and the
    prediction on the counting link gives the sets back; waits counted longer than the whole fixed part are cut to
    it, never charged twice nor beyond what was measured."""
    from workbench.lab.exchangecount import predicted_s, with_setups

    rtt_s, path = 0.0028, 62.5e6
    per_file_s = 3 * rtt_s + 0.003 + 65536 / path  # the client's CPU in turn, then the bytes over the server's
    count = dataclasses.replace(_three_round_trips("sftp/openssh"), delayed_ack_wait_per_set_s=0.085)

    def run(fixed_s: float) -> Run:
        def row(files: int) -> Result:
            sample = Sample(bytes=files * 65536, seconds=fixed_s + files * per_file_s, files=files, verified=True)
            return Result("sftp", "openssh", "upload", f"{files}x64K", files * 65536, files, samples=(sample,))

        link = {"rtt_ms": 2.8, "expected_goodput_bytes_per_s": path}
        return Run(id=1, meta={}, baseline=Baseline(rtt_ms=2.8), results=(row(4), row(12)), link=link)

    (counted,) = with_setups(run(0.2), [count])
    assert counted.setup_s == pytest.approx(0.2 - 5 * rtt_s - 0.085)
    assert counted.delayed_ack_wait_per_set_s == pytest.approx(0.085)
    assert predicted_s(counted, 12, 65536, rtt_s, path) == pytest.approx(0.2 + 12 * per_file_s)
    (short,) = with_setups(run(5 * rtt_s + 0.05), [count])  # 50 ms beyond the set's round trips, 85 counted
    assert short.setup_s == 0 and short.delayed_ack_wait_per_set_s == pytest.approx(0.05)
    assert predicted_s(short, 12, 65536, rtt_s, path) == pytest.approx(5 * rtt_s + 0.05 + 12 * per_file_s)


def _cpu_rows(label: str, direction: str, cpu_by_files: dict[int, tuple[float, float | None]]) -> tuple[Result, ...]:
    """Sets of 64 KiB files, one copy each: files -> (client CPU s, server CPU s) of each copy."""
    protocol, client = label.split("/")
    return tuple(
        Result(
            protocol, client, direction, f"{n}x64K", n * 65536, n,
            samples=(
                Sample(bytes=n * 65536, seconds=0.1 * n, files=n, verified=True, client_cpu_s=c, server_cpu_s=s),
            ),
        )
        for n, (c, s) in cpu_by_files.items()
    )  # fmt: skip


def test_a_links_own_cpu_per_file_is_its_two_sets_slope() -> None:
    from workbench.lab.exchangecount import cpu_per_file_s

    rows = (
        *_cpu_rows("http/aiohttp", "upload", {10: (0.020, 0.031), 30: (0.040, 0.061)}),
        # a server CPU that read lower in the larger set is none per file, never below
        *_cpu_rows("http/aiohttp", "download", {10: (0.030, 0.020), 30: (0.050, 0.010)}),
        # no server CPU read: none; one set size only: no slope
        *_cpu_rows("smb/pysmb", "upload", {10: (0.010, None), 30: (0.030, None)}),
        *_cpu_rows("afp/python", "upload", {30: (0.030, 0.030)}),
    )
    # a set that failed gives no CPU figure: with its client's other set alone there is no slope
    good, failed = _cpu_rows("sftp/paramiko", "upload", {10: (0.01, 0.01), 30: (0.03, 0.03)})
    failed = dataclasses.replace(failed, error="refused")
    run = Run(id=1, meta={}, baseline=Baseline(rtt_ms=0.2), results=(*rows, good, failed))
    cpu = cpu_per_file_s(run)
    assert cpu[("http/aiohttp", "upload")] == pytest.approx((0.001, 0.0015))
    assert cpu[("http/aiohttp", "download")] == pytest.approx((0.001, 0.0))
    assert cpu[("smb/pysmb", "upload")] == (pytest.approx(0.001), None)
    assert ("afp/python", "upload") not in cpu and ("sftp/paramiko", "upload") not in cpu


@pytest.mark.parametrize("direction", ["upload", "download"])
def test_an_expected_set_charges_a_links_own_cpu_by_the_ceilings_model_both_sides_for_a_client_taking_turns(
    direction: str,
) -> None:
    from workbench.lab.exchangecount import expected_s, predicted_s

    rtt_s, path = 0.0002, 125e6
    wire_s = 65536 / path  # 0.52 ms, under both sides' CPU
    turns = dataclasses.replace(_three_round_trips("sftp/paramiko"), direction=direction, setup_s=0.01)
    # 3 round trips per file, then the client's 1 ms and the server's 0.8 ms, one after the other whichever sends
    # (the receiver's outlasts the bytes); the set's setup and its 5 round trips once
    expected = expected_s(turns, 30, 65536, rtt_s, path, 0.001, 0.0008)
    assert expected == pytest.approx(0.01 + 5 * rtt_s + 30 * (3 * rtt_s + 0.0018))
    # the link's own CPU, not the count's (3 ms and 1 ms): the prediction with that CPU is the expectation
    counted_cpu = dataclasses.replace(turns, client_cpu_per_file_s=0.001, server_cpu_per_file_s=0.0008)
    assert expected == pytest.approx(predicted_s(counted_cpu, 30, 65536, rtt_s, path))
    assert predicted_s(turns, 30, 65536, rtt_s, path) == pytest.approx(0.01 + 5 * rtt_s + 30 * (3 * rtt_s + 0.004))
    # a receiver's CPU under the bytes' time is not added: the sender's in turn, then the bytes
    light = expected_s(turns, 30, 65536, rtt_s, path, 0.0003, 0.0003)
    assert light == pytest.approx(0.01 + 5 * rtt_s + 30 * (3 * rtt_s + 0.0003 + wire_s))
    # a client with files in flight (under IN_FLIGHT_TURNS turns per file) waits no round trip per file and its
    # sides overlap: the longer side, and the bytes where they take longer
    in_flight = dataclasses.replace(turns, per_file=0.5, turns_per_file=0.3, flights_per_file=0.2)
    assert expected_s(in_flight, 30, 65536, rtt_s, path, 0.001, 0.0008) == pytest.approx(0.01 + 5 * rtt_s + 30 * 0.001)
    assert expected_s(in_flight, 30, 65536, rtt_s, path, 0.0001, 0.0002) == pytest.approx(
        0.01 + 5 * rtt_s + 30 * wire_s
    )


def test_a_predictions_waits_join_each_sides_cpu_the_senders_whole_and_the_receivers_beyond_the_bytes_it_overlaps() -> (
    None
):
    from workbench.core.ceiling import paced_burst_s
    from workbench.lab.exchangecount import Waits, predicted_s

    rtt_s, path = 0.0028, 62.5e6
    # a download: the server sends (1 ms of CPU, in turn), the client receives (3 ms, over the bytes' 1.05 ms)
    down = dataclasses.replace(_three_round_trips("sftp/paramiko"), direction="download", setup_s=0.0)
    quiet = predicted_s(down, 12, 65536, rtt_s, path)
    assert quiet == pytest.approx(5 * rtt_s + 12 * (3 * rtt_s + 0.001 + 0.003))
    # the sending server's 0.1 ms of wait per file adds whole, however short
    assert predicted_s(down, 12, 65536, rtt_s, path, Waits(None, 0.0012)) == pytest.approx(quiet + 12 * 0.0001)
    # on a 40 ms link whose sender paces each file's burst (BBR), the bytes take the paced burst (21 ms, not the
    # 5.6 ms at the path's rate): an upload's receiving server at 1 ms + 9 ms of wait stays under it, adding nothing
    wan_s, wan_path = 0.04, 11.7e6
    up = dataclasses.replace(_three_round_trips("sftp/paramiko"), setup_s=0.0)
    assert paced_burst_s(wan_s, 65536) > 0.010 > 65536 / wan_path
    paced = predicted_s(up, 8, 65536, wan_s, wan_path, paced=True)
    assert predicted_s(up, 8, 65536, wan_s, wan_path, Waits(None, 0.072), paced=True) == pytest.approx(paced)
    # unpaced, the same wait outlasts the bytes and adds what it outlasts them by
    plain = predicted_s(up, 8, 65536, wan_s, wan_path)
    waited = predicted_s(up, 8, 65536, wan_s, wan_path, Waits(None, 0.072))
    assert waited == pytest.approx(plain + 8 * (0.010 - 65536 / wan_path))
