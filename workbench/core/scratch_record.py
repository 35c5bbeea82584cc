"""What a run's record says about its scratch directory on a server given by URL, and what a later run did with
one that an earlier run left.

A run against a stock server (workbench.core.stock) records at its end one of:

- `scratch_removed: true`: deleted (or someone had deleted it already);
- `scratch_left_alone: "<why>"`: removal refused on purpose, because what is there could not be proven the run's
  own real directory (a link put in its place, swapped in while it was deleted, a tree too deep or too large to
  be its own). It stays for good: no later run tries it again, so nothing is ever deleted through what someone
  else put there;
- neither: pending. The server failed or was gone, the connection was lost, the server refused a deletion. The
  store keeps offering the run (Store.unfinished_runs) and the next run against the same URL removes it with the
  same link-safe removal (StockFarHost.remove_scratch_of), saying so in one line.

A run killed outright records neither, so its scratch directory is pending too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.shared.errors import WorkbenchError

REMOVED = "scratch_removed"
LEFT_ALONE = "scratch_left_alone"


class ScratchLeftAlone(WorkbenchError):
    """finish() left (part of) the scratch directory in place on purpose: it could not be proven a real directory
    of the run's own. Recorded as left alone for good (LEFT_ALONE), never tried again."""


def after_finish(problem: WorkbenchError | None) -> dict[str, Any]:
    """The keys a run's meta gets from how its own removal ended (`problem`: what finish() raised, or None)."""
    if problem is None:
        return {REMOVED: True}
    if isinstance(problem, ScratchLeftAlone):
        return {LEFT_ALONE: problem.one_line()}
    return {}  # pending: the next run against the same URL tries again


def settled(meta: Mapping[str, Any]) -> bool:
    """Whether a run's own scratch directory needs nothing more: removed, or left alone for good."""
    return bool(meta.get(REMOVED)) or bool(meta.get(LEFT_ALONE))


@dataclass(frozen=True)
class Cleanup:
    """What a run did with the scratch directory an earlier run left (StockFarHost.remove_scratch_of)."""

    path: str  # the scratch directory on the server, as the earlier run named it
    url: str  # the server's URL, as shown
    removed: bool = False  # gone now: deleted here, or someone had deleted it
    left_alone: str | None = None  # why it stays for good (not provably a real directory of the run's own)
    failed: str | None = None  # why it stays for now: the next run tries again
    deleted: bool = False  # this run deleted it (not found gone already)

    @property
    def settled(self) -> bool:
        return self.removed or self.left_alone is not None

    def meta(self) -> dict[str, Any]:
        """The keys the earlier run's meta gets (nothing while it is pending)."""
        if self.removed:
            return {REMOVED: True}
        return {LEFT_ALONE: self.left_alone} if self.left_alone is not None else {}

    def note(self, whose: str) -> str | None:
        """The one line the run says about it (`whose`: "run 3's", "fleet run 4's on client a"), or None when
        there is nothing to say (someone had deleted it already)."""
        where = f"{whose} scratch directory {self.path} on {self.url}"
        if self.deleted:
            return f"removed {where}, which that run had left"
        if self.left_alone is not None:
            return f"left {where} alone for good: {self.left_alone}"
        if self.failed is not None:
            return f"could not remove {where} yet: {self.failed} (the next run against this URL tries again)"
        return None
