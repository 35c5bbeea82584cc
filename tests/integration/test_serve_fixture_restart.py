"""The tests' session `workbench serve` (tests/serve_fixtures.py) comes back after a test killed it, even where
another process took one of its ports meanwhile: a client's ephemeral port or another worker's server may land on
a port that was free when the session chose it. A server refuses a port another process already listens on, which
its readiness check would otherwise take for its own."""

from __future__ import annotations

import os
import socket
import threading
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
    # and names who: this test's process holds the socket
    assert f"{HOST}:{taken} (ftp): another process does, pid {os.getpid()} (" in refused.value.one_line()
    assert runner.server.proc is None


def test_a_server_waits_for_a_port_being_let_go_of_as_after_a_restart(tmp_path: Path) -> None:
    """A port whose holder lets go of it within PORT_RELEASE_WAIT_S (a server killed just before its restart) is
    taken, not refused."""
    runner = ServeRunner(tmp_path)
    taken = runner.ctx.ports["ftp"]
    held = socket.create_server((HOST, taken))
    threading.Timer(0.3, held.close).start()
    try:
        runner.server.start()
        with socket.create_connection((HOST, taken), timeout=5):
            pass  # the server's FTP answers on the port it waited for
    finally:
        held.close()
        runner.stop()
