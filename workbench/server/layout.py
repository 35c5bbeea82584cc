"""Where the far host's files may live: refuse a served root that would hand clients the servers' own state.

Every server confines clients to the served root, so whatever lies inside it is theirs to read and
(for some protocols) to write. `serve` and `servers up` therefore refuse a root of `/`, a root that
holds the state directory or the credentials file (keys, passwords, server configs), and a root
inside the state directory (a server's private folder could be served). The state directory itself
must belong to the current user and be closed to group and others.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from workbench.shared.errors import UsageError


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def check_layout(root: Path, state_dir: Path, credentials_file: Path | None = None) -> None:
    """Raise UsageError when serving `root` would expose `state_dir` or the credentials, or is `/`."""
    real_root = root.resolve()
    real_state = state_dir.resolve()
    if real_root == Path(real_root.anchor):
        raise UsageError(
            f"refusing to serve {root}: it is the whole file system",
            "pass a directory of its own, e.g. --root ~/wb-root",
        )
    if _inside(real_state, real_root):
        raise UsageError(
            f"refusing to serve {root}: it contains the state directory {state_dir} (keys and credentials)",
            "pass a --state-dir outside the served root",
        )
    if _inside(real_root, real_state):
        raise UsageError(
            f"refusing to serve {root}: it lies inside the state directory {state_dir}",
            "serve a directory outside the --state-dir",
        )
    if credentials_file is not None and _inside(credentials_file.resolve(), real_root):
        raise UsageError(
            f"refusing to serve {root}: it contains the credentials file {credentials_file}",
            "keep --credentials outside the served root",
        )


def private_state_dir(state_dir: Path) -> None:
    """Create `state_dir` 0700 when missing; refuse one owned by someone else or open to group/others."""
    with contextlib.suppress(FileExistsError):
        state_dir.mkdir(parents=True, mode=0o700)
    st = os.stat(state_dir)
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"state directory {state_dir} is not a directory", "pass another --state-dir")
    if st.st_uid != os.geteuid():
        raise UsageError(
            f"state directory {state_dir} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})",
            "pass a --state-dir of your own",
        )
    if st.st_mode & 0o077:
        raise UsageError(
            f"state directory {state_dir} is open to others (mode {stat.S_IMODE(st.st_mode):04o})",
            f"chmod 700 {state_dir}",
        )
