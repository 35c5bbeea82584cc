"""The tests' session `workbench serve` (tests/serve_fixtures.py) comes back after a test killed it, even where
another process took one of its ports meanwhile: a client's ephemeral port or another worker's server may land on
a port that was free when the session chose it. A server refuses a port another process already listens on, which
its readiness check would otherwise take for its own."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.serve_fixtures import HOST, ServeRunner
from workbench.shared.errors import NetworkError


def test_a_killed_serve_whose_port_was_taken_starts_again_on_ports_free_now(tmp_path: Path) -> None:
    runner = ServeRunner(tmp_path)
    try:
        runner.ensure()
        taken = runner.ctx.ports["tcp"]
        runner.kill()
        with socket.create_server((HOST, taken)):  # the raw-TCP probe's port, now someone else's
            runner.ensure()
            assert runner.ctx.ports["tcp"] != taken
            assert runner.target().ports == runner.ctx.ports
            with socket.create_connection((HOST, runner.ctx.ports["http"]), timeout=5):
                pass  # the restarted serve answers on its new ports
    finally:
        runner.stop()


def test_a_server_refuses_a_port_another_process_listens_on_before_it_starts(tmp_path: Path) -> None:
    """Its readiness is read as its ports accepting: another process listening on one would pass for it while the
    server died on its bind. So the port is refused first, in one line, and nothing is started."""
    runner = ServeRunner(tmp_path)
    taken = runner.ctx.ports["ftp"]
    with socket.create_server((HOST, taken)), pytest.raises(NetworkError) as refused:
        runner.server.start()
    assert f"{HOST}:{taken} (ftp): another process does" in refused.value.one_line()
    assert runner.server.proc is None
