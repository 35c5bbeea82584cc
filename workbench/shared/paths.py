"""Where workbench keeps its state on this machine (XDG-style, overridable by environment), and the names
of the files and folders both hosts agree on."""

from __future__ import annotations

import os
from pathlib import Path

# The served root's layout, the same on every far host: test files to download, uploads beneath incoming/.
FILES_DIR = "files"
INCOMING_DIR = "incoming"
# The state directory's files: `serve` and `servers up` write them; `run` and the lab read them.
CREDENTIALS_FILE = "credentials.json"  # 0600: the only file with secrets
TARGET_FILE = "target.json"  # where the services listen; no secrets
SERVERS_FILE = "servers.json"  # `servers up`: the daemons' process groups, for status, down and /ctl/cpu


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
    return default_state_dir() / CREDENTIALS_FILE
