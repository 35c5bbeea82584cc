"""`workbench lab --offload`: the server host's link device has TSO and GSO off as read back from its kernel, the
run's metadata says so for both hosts, and this host's own devices are untouched afterwards."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from tests.schema_check import assert_valid_run_document
from workbench.lab import netns
from workbench.lab.lifecycle import CLIENT_DEV, SERVER_DEV
from workbench.shared import offloads

REPO = Path(__file__).resolve().parents[2]


def _host_devices() -> dict[str, dict[str, object]]:
    return {name: offloads.read_offloads(name).to_json() for _, name in socket.if_nameindex()}


@pytest.mark.lab
@pytest.mark.skipif(lab_unavailable() is not None, reason=f"lab unavailable: {lab_unavailable()}")
def test_lab_offload_switch_is_read_back_and_recorded(tmp_path: Path) -> None:
    before = _host_devices()
    doc_path = tmp_path / "lab.json"
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    argv = [
        sys.executable, "-m", "workbench", "lab", "--link", "wifi-ac", "--protocols", "http/aiohttp",
        "--sizes", "1M", "--small", "none", "--repeat", "1", "--warmup", "0", "--tcp-duration", "0.5", "--skip-iperf3",
        "--goodput-duration", "0",
        "--offload", "server:tso=off,gso=off", "--json", str(doc_path),
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)

    link = doc["link"]
    assert link["offloads_asked"] == {"server": {"tso": False, "gso": False}}
    server_dev, client_dev = link["offloads"]["server"], link["offloads"]["client"]
    assert server_dev["interface"] == SERVER_DEV and client_dev["interface"] == CLIENT_DEV
    assert (server_dev["offloads"]["tso"], server_dev["offloads"]["gso"]) == ("off", "off"), server_dev
    assert server_dev["kernel_features"]["tx-tcp-segmentation"] == "off"
    assert client_dev["offloads"]["tso"] == "on", client_dev  # only the host asked for was switched
    assert server_dev["mtu_bytes"] == link["mtu"]

    # the run's own metadata: each host's interface toward the other, read by the process running there
    # (the client in the client namespace, `workbench serve` in the server's), says the same
    server_path = doc["run"]["server"]["offloads"]
    client_path = doc["run"]["client"]["offloads"]
    assert server_path["interface"] == SERVER_DEV and server_path["offloads"]["tso"] == "off", server_path
    assert client_path["interface"] == CLIENT_DEV and client_path["offloads"]["tso"] == "on", client_path
    assert server_path["source"] == "ethtool ioctl + rtnetlink"

    # nothing of the lab is left, and this host's own devices kept every offload they had
    assert not [n for n in netns.lab_namespaces() if netns.owner_of(n) == proc.pid]
    assert _host_devices() == before
