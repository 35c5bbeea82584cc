"""Where workbench keeps its state on this machine (XDG-style, overridable by environment)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """Results database and run files: $WORKBENCH_HOME, else $XDG_DATA_HOME/workbench."""
    if env := os.environ.get("WORKBENCH_HOME"):
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "workbench"


def default_db() -> Path:
    return data_dir() / "runs.sqlite"


def default_state_dir() -> Path:
    """Server state (credentials, keys, private configs) for `serve` and `servers up`."""
    return data_dir() / "server"


def default_credentials() -> Path:
    return default_state_dir() / "credentials.json"
