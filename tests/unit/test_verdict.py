"""The verdict: sentences computed from the rows (raw TCP, who reaches it, shortfalls with their measured
cause, advice on the setting that bounds a window- or buffer-limited row, fixed costs, stalls)."""

from __future__ import annotations

import dataclasses
import textwrap

from workbench.core.explain import explain
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.protocols.details import ClientDetails
from workbench.shared.triage import TcpTriage, classified

MIB = 1 << 20


def _triage(host: str, app: float, rwnd: float, window: int = 8 << 20) -> TcpTriage:
    """A sender's triage of one 16 MiB copy over 1 s, idle `app` of it and window-limited `rwnd` of it."""
    totals = TcpTriage(
        side="sender",
        host=host,
        elapsed_s=1.0,
        connections=1,
        bytes_seen=16 * MIB,
        busy_s=1.0 - app,
        rwnd_limited_s=rwnd,
        sndbuf_limited_s=0.0,
        app_limited_busy_s=0.0,
        rtt_ms=3.0,
        min_rtt_ms=2.8,
        bytes_sent=16 * MIB,
        bytes_retrans=0,
        max_window_bytes=window,
        max_sndbuf_bytes=4 << 20,
    )
    return classified(totals, 1.0, 16 * MIB)


def _row(label: str, direction: str, rate: float, triage: TcpTriage, **details: int) -> Result:
    protocol, client = label.split("/")
    seconds = 16 * MIB / rate
    sample = Sample(bytes=16 * MIB, seconds=seconds, verified=True, tcp=triage)
    return Result(protocol, client, direction, "16M", 16 * MIB, 1, samples=(sample,), details=ClientDetails(**details))


def _run(server_rmem: str) -> Run:
    rows = (
        _row("http/aiohttp", "download", 61e6, _triage("server", 0.02, 0.0)),
        _row("smb/pysmb", "upload", 16e6, _triage("client", 0.97, 0.0), request_bytes=65536, requests_in_flight=1),
        _row("ftp/ftplib", "upload", 30e6, _triage("client", 0.05, 0.9, window=96 * 1024)),
    )
    meta = {
        "client": {"hostname": "laptop", "tcp": {"tcp_rmem": "4096 131072 6291456", "tcp_wmem": "4096 16384 4194304"}},
        "server": {"hostname": "nas", "tcp": {"tcp_rmem": server_rmem, "tcp_wmem": "4096 16384 4194304"}},
    }
    return Run(
        id=1, meta=meta, baseline=Baseline(up_bytes_per_s=62.5e6, down_bytes_per_s=62.5e6, rtt_ms=2.8), results=rows
    )


def test_the_verdict_says_the_limit_who_reaches_it_and_why_the_rest_fall_short() -> None:
    verdict = explain(_run("4096 87380 6291456"), "10.77.0.2").verdict
    assert 3 <= len(verdict) <= 6
    assert verdict[0] == "Raw TCP reached 500 Mbit/s up and 500 Mbit/s down at 2.80 ms RTT."
    assert verdict[1] == "Copies reach 26–98 % of it (median 48 %); 1 of 3 rows reach 90 % or more (http/aiohttp)."
    worst = next(s for s in verdict if s.startswith("Worst: smb/pysmb"))
    assert "26 % of raw TCP" in worst and "requests ceiling" in worst and "not the network" in worst
    assert verdict[3].startswith("Biggest fixable cause: ftp/ftplib upload is receive-window-limited")


def test_the_verdict_prints_in_three_to_six_lines_and_the_rest_goes_to_the_notes() -> None:
    explained = explain(_run("4096 87380 6291456"), "10.77.0.2")
    lines = textwrap.wrap("verdict: " + " ".join(explained.verdict), 120)
    assert 3 <= len(lines) <= 6, lines
    notes = " ".join(explained.notes)
    # what the verdict leaves out is in the notes: each shortfall with the kernel's view, the full advice
    assert "the client's sender idle or app-limited 97 % of the time" in notes
    assert "ftp/ftplib upload 16M reaches 48 % of raw TCP: window ceiling" in notes


def test_a_window_limited_row_names_the_receivers_setting_and_the_paths_need() -> None:
    # 62.5 MB/s × 2.8 ms = 171 KiB; the server's tcp_rmem allows 6 MiB: the application there fixed its buffer
    said = explain(_run("4096 87380 6291456"), "10.77.0.2")
    roomy = " ".join(said.verdict + said.notes)
    assert "ftp/ftplib upload is receive-window-limited (a window of 96 KiB)" in roomy
    assert "net.ipv4.tcp_rmem on the server allows 6 MiB" in roomy
    assert "sets its own socket buffer (capped by net.core.rmem_max)" in roomy
    assert "the path needs about 170.9 KiB (its bandwidth-delay product)" in roomy
    # a maximum below twice the bandwidth-delay product: raise it, on the server (the receiver of an upload)
    tight = " ".join(explain(_run("4096 65536 131072"), "10.77.0.2").notes)
    assert "raise the maximum of net.ipv4.tcp_rmem on the server (now 128 KiB" in " ".join(
        explain(_run("4096 65536 131072"), "10.77.0.2").verdict
    )
    assert "raise the maximum of net.ipv4.tcp_rmem on the server (its maximum is 128 KiB)" in tight
    # a probe that was itself window-limited says nothing of what the path needs: no figure is made up
    limited = _run("4096 65536 131072")
    probe = dict(_triage("client", 0.0, 0.95).to_json())
    limited = dataclasses.replace(limited, baseline=dataclasses.replace(limited.baseline, tcp={"upload": probe}))
    text = " ".join(explain(limited, "10.77.0.2").notes)
    assert "raise the maximum of net.ipv4.tcp_rmem on the server" in text and "bandwidth-delay" not in text


def test_a_run_without_rows_or_baseline_says_so() -> None:
    empty = Run(id=1, meta={}, baseline=Baseline(), results=())
    assert explain(empty, "10.77.0.2").verdict == ("No row was measured, so there is nothing to explain.",)
    run = _run("4096 87380 6291456")
    bare = Run(id=1, meta={}, baseline=Baseline(rtt_ms=2.8), results=run.results)
    assert explain(bare, "10.77.0.2").verdict[0].startswith("There is no raw-TCP baseline")


def test_a_window_the_labs_link_clamps_is_named_as_the_runs_own_setting() -> None:
    # --client-window 64K: the link rewrites the client's window; no host setting or application is to blame
    row = _row("afp/python", "download", 21e6, _triage("server", 0.0, 0.97, window=64 * 1024))
    base = _run("4096 87380 6291456")
    clamped = dataclasses.replace(base, results=(row,), link={"client_window_bytes": 65536})
    said = explain(clamped, "10.77.0.2")
    text = " ".join(said.verdict + said.notes)
    assert "afp/python download is receive-window-limited (a window of 64 KiB): the lab's link holds" in text
    assert "to 64 KiB (--client-window)" in text and "sets its own" not in text
    # without the clamp the same row blames the client's buffer
    free = " ".join(explain(dataclasses.replace(clamped, link=None), "10.77.0.2").notes)
    assert "afp/python download is receive-window-limited" in free and "lab's link" not in free


def test_the_labs_clamp_is_named_only_for_windows_it_could_have_made() -> None:
    base = _run("4096 87380 6291456")
    # a 4 MiB window on a link that clamps to 64 KiB: the clamp lowers windows, it cannot have made this one
    wide = _row("http/curl", "download", 60e6, _triage("server", 0.0, 0.97, window=4 << 20))
    said = explain(dataclasses.replace(base, results=(wide,), link={"client_window_bytes": 65536}), "10.77.0.2")
    text = " ".join(said.verdict + said.notes)
    assert "http/curl download is receive-window-limited" in text and "lab's link holds" not in text
    # --client-window 100000 reaches the wire rounded down to the window scale's step: still the clamp's doing
    near = _row("afp/python", "download", 21e6, _triage("server", 0.0, 0.97, window=99968))
    said = explain(dataclasses.replace(base, results=(near,), link={"client_window_bytes": 100000}), "10.77.0.2")
    assert "lab's link holds" in " ".join(said.verdict + said.notes)
    # a clamped row does not hide the advice a second, unclamped row of the same host needs
    both = dataclasses.replace(base, results=(near, wide), link={"client_window_bytes": 100000})
    said = explain(both, "10.77.0.2")
    text = " ".join(said.verdict + said.notes)
    assert "lab's link holds" in text and "http/curl download is receive-window-limited" in text


def test_a_request_bound_row_whose_sender_reads_network_is_said_held_by_its_requests() -> None:
    """smbd sending 64 KiB per request is busy with its bytes in flight for most of each turn, and its counters may
    say network; the rate is the turn's, which its requests ceiling explains: the verdict says that, the row's notes
    both."""
    pysmb = _row("smb/pysmb", "download", 16e6, _triage("server", 0.0, 0.0), request_bytes=65536, requests_in_flight=1)
    run = dataclasses.replace(_run("4096 87380 6291456"), results=(_run("").results[0], pysmb))
    explained = explain(run, "10.77.0.2")
    assert explained.rows[1].bound == "requests" and pysmb.tcp is not None and pysmb.tcp.limit == "network"
    worst = next(s for s in explained.verdict if s.startswith("Worst: smb/pysmb"))
    assert worst.endswith("— round trips per request, a client limit."), worst
    assert "the network path" not in worst
    # the notes' line for the same row says it in the same words
    (note,) = [n for n in explained.notes if n.startswith("smb/pysmb download 16M reaches")]
    assert note.endswith("— round trips per request, a client limit."), note
    assert (
        explained.rows[1].triage_note
        == "the sender's TCP counters say network (net 100 %); the model's ceiling is requests"
    )
