"""The scratch directories a fleet's members make on a server given by URL: recorded by the controller, and
removed by a later run when a member could not remove its own (it was killed, cut off or refused).

Each member makes its own scratch directory beneath the URL's path (stock.StockFarHost.info) and removes it at
its end. The controller records each one in its run's meta as soon as the member names it, before any copy:
`fleet.scratches` = {host: {"server": the member's server object, "removed": bool}}, marked removed when the
member's finish says so; the run's `scratch_removed` is set once none is left. A scratch left when the run
ended (the member was killed, its server failed or went away) is removed as a killed run's is, once the
controller that owned the run is gone:

- by `run URL` against the same URL from this database (the runner's leftovers pass calls remove_left);
- by a later `fleet` against it: the controller checks the owners here, and its first member, told which in
  its job, removes them with its own login and says so ("cleaned"); the controller then marks them.

StockFarHost.remove_scratch_of removes only a name of its own making (workbench-<hex>) under the same URL,
so a member that names another directory cannot have it removed. One it finds not provably a real directory
(a link in its place) is left alone for good (workbench.core.scratch_record): its entry gets `left_alone`
(why) and is never tried again; a member that met it says so to its controller as settled ("cleaned"), and the
controller's record then counts it as done.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from workbench.core import scratch_record
from workbench.core.observe import Recorder
from workbench.core.scratch_record import Cleanup
from workbench.shared import procs

MAX_LEFT_RUNS = 32  # earlier runs' leftovers sent in one job: the oldest first, the rest next time
OWNER_CHECKED = "owner_gone"  # set only in a member's copy of a run whose owner its controller found gone


def owner_gone(owner: Any) -> bool:
    """Whether the process that owned a run is gone from this host (a run naming no owner, or owned by another
    host sharing the data directory, is never taken for gone: its files might be another's)."""
    return procs.owner_state(owner) == procs.OWNER_DEAD


def is_fleet(meta: Mapping[str, Any]) -> bool:
    return isinstance(meta.get("fleet"), Mapping)


def left(meta: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """host -> server object of each member's scratch the run recorded and nobody removed yet."""
    fleet = meta.get("fleet")
    scratches = fleet.get("scratches") if isinstance(fleet, Mapping) else None
    if not isinstance(scratches, Mapping):
        return {}
    return {
        str(host): entry["server"]
        for host, entry in scratches.items()
        if isinstance(entry, Mapping)
        and not entry.get("removed")
        and not entry.get("left_alone")
        and isinstance(entry.get("server"), Mapping)
    }


def record(meta: Mapping[str, Any], host: str, server: Mapping[str, Any] | None, removed: bool) -> dict[str, Any]:
    """`meta` with host's scratch recorded (its server object) or marked removed; `scratch_removed` says
    whether none is left."""
    doc = copy.deepcopy(dict(meta))
    fleet = doc.setdefault("fleet", {})
    entry = fleet.setdefault("scratches", {}).setdefault(host, {"server": None, "removed": False})
    if server is not None:
        entry["server"] = dict(server)
    if removed:
        entry["removed"] = True
    return settled(doc)


def mark_removed(
    meta: Mapping[str, Any], hosts: Sequence[str], left_alone: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`meta` with `hosts`' scratch directories marked removed, and those of `left_alone` (host -> why) marked
    left alone for good."""
    doc = copy.deepcopy(dict(meta))
    scratches = (doc.get("fleet") or {}).get("scratches") or {}
    for host in hosts:
        if isinstance(scratches.get(host), dict):
            scratches[host]["removed"] = True
    for host, why in (left_alone or {}).items():
        if isinstance(scratches.get(host), dict):
            scratches[host]["left_alone"] = why
    return settled(doc)


def settled(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` (changed) with `scratch_removed` set when no member's scratch is left (`scratch_left_alone` when some
    are left alone for good), neither otherwise."""
    doc.pop(scratch_record.LEFT_ALONE, None)
    if left(doc):
        doc.pop(scratch_record.REMOVED, None)  # the store lists the run for a later run to clean
        return doc
    scratches = (doc.get("fleet") or {}).get("scratches") or {}
    alone = [str(e["left_alone"]) for e in scratches.values() if isinstance(e, Mapping) and e.get("left_alone")]
    if alone:
        doc.pop(scratch_record.REMOVED, None)
        doc[scratch_record.LEFT_ALONE] = alone[0] if len(alone) == 1 else f"{alone[0]} (and {len(alone) - 1} more)"
    else:
        doc[scratch_record.REMOVED] = True
    return doc


def remove_left(
    recorder: Recorder, run_id: int, meta: Mapping[str, Any], remove: Callable[[Mapping[str, Any]], Cleanup | None]
) -> list[str]:
    """Remove what an earlier fleet run's members left (`remove` is the far host's remove_scratch_of), once its
    owner is gone; what became of each is recorded, and said in one line each (returned)."""
    if meta.get(OWNER_CHECKED) is not True and not owner_gone(meta.get("owner")):
        return []  # still running, or not a run that says who owns it
    removed: list[str] = []
    left_alone: dict[str, str] = {}
    notes: list[str] = []
    for host, server in left(meta).items():
        done = remove(server)
        if done is None:
            continue  # another URL's
        if (note := done.note(f"fleet run {run_id}'s (client {host})")) is not None:
            notes.append(note)
        if done.removed:
            removed.append(host)
        elif done.left_alone is not None:
            left_alone[host] = done.left_alone
    if removed or left_alone:
        recorder.record_cleanup(run_id, cleanup_keys(mark_removed(meta, removed, left_alone)))
    return notes


def cleanup_keys(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What a later run records of an earlier fleet run's scratch directories (Recorder.record_cleanup), from that
    run's meta as mark_removed left it: its scratches and whether any is left (a None: the key is not set)."""
    fleet = doc.get("fleet")
    return {
        "fleet": copy.deepcopy(dict(fleet)) if isinstance(fleet, Mapping) else None,
        scratch_record.REMOVED: doc.get(scratch_record.REMOVED),
        scratch_record.LEFT_ALONE: doc.get(scratch_record.LEFT_ALONE),
    }


def left_for_members(recorder: Recorder) -> list[dict[str, Any]]:
    """The earlier fleet runs of this database whose owner is gone and whose members left scratch directories,
    as a fleet job carries them: [{"run_id", "scratches": {host: server}}]."""
    found = []
    for run_id, meta in recorder.unfinished_runs():
        scratches = left(meta) if is_fleet(meta) else {}
        if scratches and owner_gone(meta.get("owner")):
            found.append({"run_id": run_id, "scratches": scratches})
    return found[:MAX_LEFT_RUNS]


def as_runs(job_left: Any) -> list[tuple[int, dict[str, Any]]]:
    """A member's view of the job's leftovers: (run id, meta) as the runner's leftovers pass reads them."""
    runs: list[tuple[int, dict[str, Any]]] = []
    for item in job_left if isinstance(job_left, list) else ():
        if not isinstance(item, Mapping) or not isinstance(item.get("run_id"), int):
            continue
        scratches = item.get("scratches")
        if isinstance(scratches, Mapping):
            entries = {str(h): {"server": s, "removed": False} for h, s in scratches.items() if isinstance(s, Mapping)}
            runs.append((item["run_id"], {"fleet": {"scratches": entries}, OWNER_CHECKED: True}))
    return runs
