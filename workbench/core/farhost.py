"""What the runner asks of the far host: its control API (files, hashes, CPU, directories) and the raw TCP
baseline. `ServedFarHost` is a `workbench serve` reached over the network; workbench.core.stock's
StockFarHost a server given by URL, with nothing of workbench on it; tests give a fake one to check the
runner's orchestration without servers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from workbench.core.plan import Plan
from workbench.core.results import Baseline
from workbench.core.scratch_record import Cleanup
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

    def tcp_watch_start(self, role: str) -> str | None:
        """Start sampling the far host's own sockets to this client as `role` ("sender"/"receiver"); a watch id,
        or None when the far host cannot (then this host's side is watched)."""
        ...

    def tcp_watch_stop(self, watch_id: str) -> dict[str, Any] | None:
        """Stop that watch: its TCP triage as JSON (workbench.shared.triage.TcpTriage), or None."""
        ...

    def finish(self) -> None:
        """Undo what the run left on the far host (a stock server's scratch directory). Called once, last, also
        after a failure, Ctrl-C or SIGTERM; raises WorkbenchError when it could not (the run then says so)."""
        ...


@runtime_checkable
class StockHost(FarHost, Protocol):
    """A far host workbench did not start (a server given by URL): no hash API, so uploads are checked here,
    and the run works in a scratch directory that a killed run may have left behind."""

    upload_check: str  # how an upload is verified, for the row's notes: "read back", "rsync checksums"

    def describe_baseline(self, plan: Plan) -> str:
        """The status line shown before baseline(): what it will measure (iperf3, or only the RTT)."""
        ...

    def upload_matches(self, local: Path, remote: str, size_bytes: int, xxh3_128: str) -> bool:
        """Whether the uploaded `remote` holds the same bytes as `local` (checked outside the timed window)."""
        ...

    def remove_scratch_of(self, server: Mapping[str, Any]) -> Cleanup | None:
        """Remove the scratch directory an earlier run left, killed or its removal failed (its meta `server`
        object, as info() gave it): what became of it (removed, left alone for good, or failed: try again next
        run), or None when it is not this server's."""
        ...


class ServedFarHost(Control):
    """A far host running `workbench serve`: its control API, plus the probe and iperf3 for the baseline."""

    def __init__(self, plan: Plan) -> None:
        # A control call that gets no answer for the stall timeout is as dead as a stalled copy (at most 30 s).
        super().__init__(plan.target, timeout=plan.options.timeout)

    def baseline(self, plan: Plan) -> Baseline:
        from workbench.core.baseline import measure_baseline
        from workbench.core.watching import CopyWatcher

        return measure_baseline(plan, CopyWatcher(self, plan.target.host))

    def finish(self) -> None:
        """Nothing: serve removes nothing it was not told to (the runner deletes its upload directory)."""
