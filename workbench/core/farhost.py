"""What the runner asks of the far host: its control API (files, hashes, CPU, directories) and the raw TCP
baseline. `ServedFarHost` is the real one, a `workbench serve` reached over the network; tests give a
fake one to check the runner's orchestration without servers."""

from __future__ import annotations

from typing import Any, Protocol

from workbench.core.plan import Plan
from workbench.core.results import Baseline
from workbench.protocols.control import Control


class FarHost(Protocol):
    def info(self) -> dict[str, Any]:
        """Who the far host is; the first call, so an unreachable host or a bad password stops here."""
        ...

    def make_files(self, sizes: list[int], small: list[tuple[int, int]], profile: str, seed: int) -> dict[str, Any]:
        """Generate the test files on the far host; returns its manifest as JSON."""
        ...

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]: ...

    def mkdir(self, path: str) -> None: ...

    def delete(self, path: str) -> None: ...

    def cpu_seconds(self) -> float | None:
        """CPU the far host's servers used so far (None when it cannot tell)."""
        ...

    def baseline(self, plan: Plan) -> Baseline:
        """The raw TCP limit of the path, measured before the copies; a failure is recorded, never raised."""
        ...


class ServedFarHost(Control):
    """A far host running `workbench serve`: its control API, plus the probe and iperf3 for the baseline."""

    def __init__(self, plan: Plan) -> None:
        # A control call that gets no answer for the stall timeout is as dead as a stalled copy (at most 30 s).
        super().__init__(plan.target, timeout=plan.options.timeout)

    def baseline(self, plan: Plan) -> Baseline:
        from workbench.core.baseline import measure_baseline

        return measure_baseline(plan)
