"""What the far side of `run --via-ssh` (`workbench servers over-ssh`) and a fleet's lab job say about servers
`servers up` started: the protocol of its lines, and the hello that reaches them (ports, paths, login, keys),
read back by workbench.shared.target.target_from_hello. Secret: it goes only down an SSH channel, never to a
file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROTOCOL = "workbench-via-ssh/1"


def served_hello(state_dir: Path) -> dict[str, Any]:
    """What reaches servers `servers up` started with this private state: ports, paths, login and the key
    material (read back by target_from_hello)."""
    from workbench.shared.paths import CREDENTIALS_FILE, TARGET_FILE

    creds = json.loads((state_dir / CREDENTIALS_FILE).read_text())
    target = json.loads((state_dir / TARGET_FILE).read_text())
    host_keys = []
    if creds.get("known_hosts"):
        host_keys = [" ".join(ln.split()[1:3]) for ln in Path(creds["known_hosts"]).read_text().splitlines() if ln]
    return {
        "ports": target["ports"],
        "remote_root": target["remote_root"],
        "share": target["share"],
        "credentials": {"user": creds["user"], "password": creds["password"]},
        "ssh_key": Path(creds["ssh_key"]).read_text() if creds.get("ssh_key") else None,
        "host_keys": host_keys,
    }
