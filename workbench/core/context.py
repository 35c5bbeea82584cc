"""What the lab adds to a run: the emulated link's document, the window sweep measured before the copies,
and a watch on the link emulator read once the copies are done."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class EmulatorReport:
    """What the link emulator did during the run, and notes when that may have shaped the results."""

    cpu_fraction: float  # of one core, averaged over the run
    drops: int  # packets the emulator dropped from its queue or as loss it was asked for
    seconds: float  # wall time the figures cover
    notes: tuple[str, ...] = ()
    host_cpu: Mapping[str, Any] | None = None  # the lab hosts' CPU over the copies (lab.cpucap.HostCpuWatch)
    # offloaded super-packets a line that breaks them dropped (--link-breaks offloaded), apart from `drops`
    offloaded_drops: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu_fraction": self.cpu_fraction,
            "drops": self.drops,
            "offloaded_drops": self.offloaded_drops,
            "seconds": self.seconds,
        }


class EmulatorWatch(Protocol):
    def report(self) -> EmulatorReport:
        """What the emulator did since the watch began (read once, after the copies)."""
        ...


@dataclass(frozen=True)
class LabContext:
    link: Mapping[str, Any]  # the lab's measured link (rate_bits_per_s, rtt_ms, mtu, ...): the JSON `link` object
    window_sweep: tuple[Mapping[str, Any], ...] | None = None
    emulator: EmulatorWatch | None = None
    # called once the raw-TCP baseline is measured, before the first copy (the lab starts its stalls there)
    after_baseline: Callable[[], None] | None = None

    def link_after(self, report: EmulatorReport | None) -> dict[str, Any]:
        """The link document, with the emulator's and the hosts' CPU figures once the copies are done."""
        if report is None:
            return dict(self.link)
        host_cpu = {"host_cpu": dict(report.host_cpu)} if report.host_cpu is not None else {}
        return {**self.link, "emulator": report.to_json(), **host_cpu}
