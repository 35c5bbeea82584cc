"""The control API's client keeps one connection to serve between calls, and replaces it when serve closed it
(a restart, a crash), so a call after that still answers."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

from tests.serve_fixtures import ServeRunner
from workbench.protocols.control import Control


def _our_connections(port: int) -> list[str]:
    """The local ends of the established TCP connections to serve's HTTP port on loopback (this worker's serve
    has a port of its own)."""
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( dport = :{port} )"], capture_output=True, text=True, check=True
    ).stdout
    return sorted(line.split()[2] for line in out.splitlines() if line.strip())


def test_calls_share_one_connection(served: ServeRunner) -> None:
    target = served.target()
    port = target.port("http")
    with Control(target) as control:
        control.info()
        first = _our_connections(port)
        assert len(first) == 1, first
        for _ in range(4):
            assert control.cpu_seconds() is not None
        assert _our_connections(port) == first  # the same local port: the same connection
    assert _our_connections(port) == []  # closed with the block


def test_calls_at_once_each_take_a_connection_and_keep_it(served: ServeRunner) -> None:
    target = served.target()
    with Control(target) as control, ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: control.info(), range(16)))
        assert all(isinstance(a, dict) for a in answers)
        kept = _our_connections(target.port("http"))
        assert 1 <= len(kept) <= 4, kept  # no more than the calls at once, and kept for the next


def test_a_call_after_serve_restarted_opens_a_new_connection(served: ServeRunner) -> None:
    target = served.target()
    with Control(target) as control:
        control.info()
        before = _our_connections(target.port("http"))
        served.kill()  # the kept connection's far end is gone without an answer
        served.ensure()
        assert isinstance(control.info(), dict)
        after = _our_connections(target.port("http"))
        assert len(after) == 1 and after != before, (before, after)
