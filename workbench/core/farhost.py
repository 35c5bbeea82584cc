"""What the runner asks of the far host: its control API (files, hashes, CPU, directories), the raw TCP
baseline, how uploads are checked, what the run leaves there and how an earlier run's leftovers go.

The runner talks to a far host only through `FarHost`. `ServedFarHost` is a `workbench serve` reached over the
network; workbench.core.stock's StockFarHost a server given by URL, with nothing of workbench on it; tests give
a fake one (built on `WorkbenchSide`) to check the runner's orchestration without servers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workbench.core.plan import Plan
from workbench.core.results import Baseline
from workbench.core.scratch_record import Cleanup
from workbench.protocols.control import Control
from workbench.shared.errors import NotFoundError, WorkbenchError
from workbench.shared.paths import INCOMING_DIR


@dataclass(frozen=True)
class LeftRemoved:
    """What became of what an earlier run left on the far host (FarHost.remove_left)."""

    note: str | None = None  # the one line the run says about it, or None when there is nothing to say
    record: Mapping[str, Any] = field(default_factory=dict)  # what the earlier run's record gets; empty: pending


class FarHost(Protocol):
    # How an upload is verified, for the row's notes ("read back", "rsync checksums"); None: the far host hashes
    # it itself, the usual case that needs no note.
    upload_check: str | None
    # The far host runs workbench's raw-TCP probe: a fleet measures raw TCP with every client at once through it.
    raw_tcp_probe: bool
    # What a run leaves there, as a note names it: "upload directory", "scratch directory".
    left_name: str

    def info(self) -> dict[str, Any]:
        """Who the far host is; the first call, so an unreachable host or a bad password stops here."""
        ...

    def given_url(self) -> str | None:
        """The URL the far host was given by, as shown (None: `workbench serve` at the plan's target)."""
        ...

    def notes(self) -> list[str]:
        """What the run says about this far host beyond its rows (its warnings from the start)."""
        ...

    def make_files(self, sizes: list[int], small: list[tuple[int, int]], profile: str, seed: int) -> dict[str, Any]:
        """Generate the test files on the far host; returns its manifest as JSON."""
        ...

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]: ...

    def upload_matches(self, local: Path, remote: str, size_bytes: int, xxh3_128: str) -> bool:
        """Whether the uploaded `remote` holds the same bytes as `local` (checked outside the timed window)."""
        ...

    def mkdir(self, path: str) -> None: ...

    def delete(self, path: str) -> None: ...

    def cpu_seconds(self) -> float | None:
        """CPU the far host's servers used so far (None when it cannot tell)."""
        ...

    def cpu_waits_ns(self) -> dict[int, int] | None:
        """Each of the far host's server threads' run-queue wait so far, in nanoseconds, as read with the last
        cpu_seconds() (None when it cannot tell)."""
        ...

    def crypto_costs(self) -> dict[str, Any] | None:
        """The far host's own CPU cost per byte of SMB's signing and encryption, measured now
        (workbench.shared.cryptocost, as JSON); None when it cannot measure them (a stock server)."""
        ...

    def describe_baseline(self, plan: Plan) -> str:
        """The status line shown before baseline(): what it will measure."""
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

    def finish_record(self, problem: WorkbenchError | None) -> dict[str, Any]:
        """What the run's record says of what it left, given how finish() ended (`problem`, or None)."""
        ...

    def left_here(self, meta: Mapping[str, Any]) -> bool:
        """Whether an earlier run (its record's meta) ran against this very far host, so what it left is this
        run's to remove once its owner is gone."""
        ...

    def remove_left(self, run_id: int, meta: Mapping[str, Any]) -> LeftRemoved:
        """Remove what that earlier run left here (killed, or its own removal failed)."""
        ...

    def remove_scratch_of(self, server: Mapping[str, Any]) -> Cleanup | None:
        """Remove a scratch directory an earlier run (a fleet member's) left, given its record's `server` object:
        what became of it, or None when it is not this far host's."""
        ...


def run_dir(run_id: int, token: str) -> str:
    """The upload directory of run `run_id` on a far host that runs workbench: no other client can pick it (its
    token is random), so two clients with their own databases never share one."""
    return f"{INCOMING_DIR}/run-{run_id}-{token}"


class WorkbenchSide:
    """What a far host that runs workbench answers beyond its control API: it hashes uploads itself, runs the
    raw-TCP probe, and a run leaves only its upload directory there (the runner removes it; an earlier run's, once
    its owner is gone). Needs `target` (the plan's) and the control calls `hash` and `delete`."""

    upload_check: str | None = None
    raw_tcp_probe = True
    left_name = "upload directory"
    target: Any

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]:
        raise NotImplementedError

    def delete(self, path: str) -> None:
        raise NotImplementedError

    def given_url(self) -> str | None:
        return None

    def notes(self) -> list[str]:
        return []

    def upload_matches(self, local: Path, remote: str, size_bytes: int, xxh3_128: str) -> bool:
        return bool(self.hash(remote, size_bytes)["xxh3_128"] == xxh3_128)

    def crypto_costs(self) -> dict[str, Any] | None:
        return None  # Control asks serve; a far host without that call cannot say

    def describe_baseline(self, plan: Plan) -> str:
        return f"measuring the raw TCP limit to {plan.target.host} ({plan.tcp_duration:g} s each way)…"

    def finish_record(self, problem: WorkbenchError | None) -> dict[str, Any]:
        return {}  # serve keeps no scratch directory: the runner deleted the upload directory itself

    def left_here(self, meta: Mapping[str, Any]) -> bool:
        # a stock run's target also names its URL, so it never equals this one
        return meta.get("target") == {"host": self.target.host, "ports": dict(self.target.ports)}

    def remove_left(self, run_id: int, meta: Mapping[str, Any]) -> LeftRemoved:
        try:
            self.delete(run_dir(run_id, str(meta.get("upload_token"))))
        except NotFoundError:
            pass  # already gone
        except WorkbenchError:
            return LeftRemoved()  # the far host is unwell: try again next run
        return LeftRemoved(record={"upload_removed": True})

    def remove_scratch_of(self, server: Mapping[str, Any]) -> Cleanup | None:
        return None  # serve has no scratch directories: a fleet's members are left to a server given by URL


class ServedFarHost(Control, WorkbenchSide):
    """A far host running `workbench serve` at a target: its control API, plus the probe and iperf3 for the
    baseline. The runner gives it the stall timeout as its call timeout: a control call that gets no answer that
    long is as dead as a stalled copy (at most 30 s)."""

    def baseline(self, plan: Plan) -> Baseline:
        from workbench.core.baseline import measure_baseline
        from workbench.core.copy_watcher import CopyWatcher

        return measure_baseline(plan, CopyWatcher(self, plan.target.host))

    def finish(self) -> None:
        """Close the control connections kept open; serve removes nothing it was not told to (the runner deletes
        its upload directory)."""
        self.close()
