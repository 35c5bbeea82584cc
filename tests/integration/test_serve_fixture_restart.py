"""The tests' session `workbench serve` (tests/serve_fixtures.py) comes back after a test killed it, even where
another process took one of its ports meanwhile: a client's ephemeral port or another worker's server may land on
a port that was free when the session chose it."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.serve_fixtures import HOST, ServeRunner


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
