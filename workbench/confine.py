"""Map a client-supplied relative path into the served root, refusing anything that escapes it."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from workbench.errors import UsageError


def confine(root: Path, relative: str) -> Path:
    """root / relative, resolved, guaranteed to stay inside root (symlinks included)."""
    rel = PurePosixPath(relative.lstrip("/"))
    if any(part == ".." for part in rel.parts) or "\x00" in relative:
        raise UsageError(f"path {relative!r} leaves the served root", "use a path relative to the root")
    real_root = Path(os.path.realpath(root))
    candidate = Path(os.path.realpath(real_root / rel))
    if candidate != real_root and real_root not in candidate.parents:
        raise UsageError(f"path {relative!r} leaves the served root", "use a path relative to the root")
    return candidate
