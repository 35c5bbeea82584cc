"""The verdict's offload sentence: retransmissions on a path that was otherwise idle name the sender's offloads,
and retransmissions a full queue or a short copy's slow start explain by themselves do not."""

from __future__ import annotations

from typing import Any

from workbench.core.explain import explain
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.core.verdict import verdict
from workbench.shared.triage import TcpTriage

MIB = 1 << 20
ON = {"interface": "eth0", "offloads": {"tso": "on", "gso": "on"}}
OFF = {"interface": "eth0", "offloads": {"tso": "off", "gso": "off"}}


def _sender(host: str, resent_share: float) -> TcpTriage:
    sent = 16 * MIB
    return TcpTriage(
        side="sender",
        host=host,
        elapsed_s=1.0,
        connections=1,
        bytes_seen=sent,
        busy_s=1.0,
        bytes_sent=sent,
        bytes_retrans=int(sent * resent_share),
        retrans_fraction=resent_share,
    )


def _run(row_share: float, probe_share: float | None, link: dict[str, Any] | None, offloads: dict) -> Run:
    sample = Sample(bytes=16 * MIB, seconds=2.0, verified=True, tcp=_sender("server", row_share))
    row = Result("http", "aiohttp", "download", "16M", 16 * MIB, 1, samples=(sample,))
    probes = {} if probe_share is None else {"down": _sender("server", probe_share).to_json()}
    baseline = Baseline(up_bytes_per_s=60e6, down_bytes_per_s=60e6, rtt_ms=1.0, tcp=probes)
    meta = {"client": {"hostname": "laptop"}, "server": {"hostname": "nas", "offloads": offloads}}
    return Run(id=1, meta=meta, baseline=baseline, results=(row,), link=link)


def _says_offloads(run: Run) -> bool:
    lines = verdict(run, explain(run, "nas").rows)
    return any("TSO/GSO off" in line for line in lines)


def test_resent_bytes_on_an_idle_lab_link_name_the_senders_offloads() -> None:
    link = {"loss": 0, "emulator": {"drops": 0, "offloaded_drops": 0}}
    assert _says_offloads(_run(0.3, None, link, ON))


def test_a_lab_link_that_dropped_offloaded_packets_names_them_even_with_queue_drops() -> None:
    link = {"loss": 0, "emulator": {"drops": 40, "offloaded_drops": 900}}
    assert _says_offloads(_run(0.3, None, link, ON))


def test_a_full_queue_explains_resent_bytes_by_itself() -> None:
    link = {"loss": 0, "emulator": {"drops": 932, "offloaded_drops": 0}}
    assert not _says_offloads(_run(0.3, None, link, ON))


def test_a_sender_with_tso_and_gso_off_is_not_blamed() -> None:
    assert not _says_offloads(_run(0.3, 0.3, None, OFF))


def test_off_the_lab_a_clean_raw_tcp_probe_outweighs_a_short_copys_resends() -> None:
    # a short copy's slow start lost a tenth of its bytes, the long raw-TCP flow almost none: congestion, no path fault
    assert not _says_offloads(_run(0.16, 0.01, None, ON))
    assert _says_offloads(_run(0.16, 0.3, None, ON))


class _Forwarder:
    """The lab's forwarder counters before and after the copies (the shape Lab.forwarder_stats returns)."""

    def __init__(self) -> None:
        self.reads = [
            {"wall_seconds": 10.0, "cpu_seconds": 1.0, "drops": 2, "offloaded_drops": 0},
            {"wall_seconds": 20.0, "cpu_seconds": 2.0, "drops": 7, "offloaded_drops": 300},
        ]

    def forwarder_stats(self) -> dict:
        return self.reads.pop(0)


def test_the_link_document_carries_the_offloaded_packets_the_line_dropped_to_the_verdict() -> None:
    from workbench.core.context import LabContext
    from workbench.lab.run import _EmulatorWatch

    report = _EmulatorWatch(_Forwarder()).report()  # type: ignore[arg-type]
    link = LabContext(link={"loss": 0}).link_after(report)
    assert link["emulator"]["drops"] == 5 and link["emulator"]["offloaded_drops"] == 300
    assert _says_offloads(_run(0.3, None, link, ON))
