"""The target file: where a far host's services listen (no secrets; those stay in credentials.json).

`serve` and `servers up` write it next to the credentials; `run` reads it, or builds a Target from
--host and the default ports.
"""

from __future__ import annotations

import json
from pathlib import Path

from protocols.base import DEFAULT_PORTS, Target
from workbench.credentials import Credentials
from workbench.errors import NotFoundError, UsageError

TARGET_NAME = "target.json"


def write(state_dir: Path, host: str, ports: dict[str, int], remote_root: Path, share: str) -> Path:
    path = state_dir / TARGET_NAME
    state_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"host": host, "ports": ports, "remote_root": str(remote_root), "share": share}, indent=2)
    )
    return path


def read(path: Path, creds: Credentials, host: str | None = None) -> Target:
    try:
        data = json.loads(path.read_text())
        ports = {**DEFAULT_PORTS, **{k: int(v) for k, v in data.get("ports", {}).items()}}
        return Target(
            host=host or str(data["host"]),
            credentials=creds,
            ports=ports,
            remote_root=str(data.get("remote_root", "")),
            share=str(data.get("share", "workbench")),
        )
    except FileNotFoundError as exc:
        raise NotFoundError(f"target file {path} not found", "start 'workbench serve' or pass --host") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"malformed target file {path}: {exc}", "regenerate it with 'workbench serve'") from exc
