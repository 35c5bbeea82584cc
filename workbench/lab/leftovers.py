"""What a SIGKILLed lab leaves besides its namespaces and emulator: mounts, temporary keys and its work directory.

Called by `cleanup_stale` after the namespaces are gone (that kills the servers and the FUSE daemons
inside them, so their mounts are dead by then). Only leftovers whose owner pid no longer runs go.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

from workbench.lab import netns
from workbench.protocols.mounts import stale
from workbench.shared.paths import SERVERS_FILE
from workbench.shared.procs import pid_alive

LAB_DIR_PREFIX = "workbench-lab-"  # the lab run's work directory: served root, server state (keys, credentials)


def lab_dir_owner(path: Path) -> int | None:
    """The pid that ran the lab owning work directory `path`: from its name, else from its servers' namespace."""
    owner = stale.owner_of(path)
    if owner is not None:
        return owner
    try:
        recorded = json.loads((path / "state" / SERVERS_FILE).read_text()).get("netns")
    except (OSError, ValueError, AttributeError):
        return None
    return netns.owner_of(recorded) if isinstance(recorded, str) else None


def remove_stale_lab_dirs(tmp: Path | None = None) -> list[str]:
    """Stop what a dead lab's servers.json still names (identity-checked) and remove its work directory."""
    from workbench.server.daemons import supervisor
    from workbench.shared.errors import WorkbenchError

    base = Path(tmp or tempfile.gettempdir())
    points = [p for p, _ in stale.mounts()]
    removed = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            if not entry.name.startswith(LAB_DIR_PREFIX) or entry.is_symlink() or not entry.is_dir():
                continue
            by_name = stale.owner_gone(entry.name)  # tagged with another host's name: never gone from here
            owner = lab_dir_owner(entry)
            gone = by_name if by_name is not None else owner is not None and not pid_alive(owner)
            if not gone or stale._holds_a_mount(entry, points):
                continue
            with contextlib.suppress(WorkbenchError, OSError):
                supervisor.down(entry / "state")  # normally nothing: the namespace took its servers with it
            if stale.remove_tree(entry):
                removed.append(f"lab directory {entry} (served root, keys, uploads)")
    return removed


def cleanup_leftovers(tmp: Path | None = None) -> list[str]:
    """Dead mounts first (a directory is never removed while something is mounted in it), then files."""
    # lab directories before the generic pass, so their servers.json is read (and checked) before they go
    return [*stale.unmount_stale(), *remove_stale_lab_dirs(tmp), *stale.remove_stale_temp(tmp)]
