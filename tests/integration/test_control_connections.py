"""The control API's client keeps one connection to serve between calls, and replaces it when serve closed it
(a restart, a crash), so a call after that still answers; a call that only reads is made again on a new
connection when the kept one drops it, one that changes something is not (a small HTTP server in the test plays
the far host that drops the connection)."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import pytest

from tests.serve_fixtures import ServeRunner
from workbench.protocols.control import Control
from workbench.shared.credentials import Credentials
from workbench.shared.errors import NetworkError
from workbench.shared.target import Target


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
        # a POST, which is never made twice: it goes out on a new connection because the dropped one was seen
        # closed before it was used
        control.mkdir("incoming/kept-connection-check")
        after = _our_connections(target.port("http"))
        assert len(after) == 1 and after != before, (before, after)
        control.delete("incoming/kept-connection-check")


class _DropsTheSecondRequest(http.server.BaseHTTPRequestHandler):
    """Answers the first request of each connection and keeps it open; reads the second and closes without an
    answer, as a far host that went away between two calls does. Every request is logged by method."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []

    def setup(self) -> None:
        super().setup()
        self.on_this_connection = 0

    def _handle(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(self.command)
        self.on_this_connection += 1
        if self.on_this_connection == 2:
            self.close_connection = True
            return
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _handle

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def dropping() -> Iterator[tuple[Target, list[str]]]:
    _DropsTheSecondRequest.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DropsTheSecondRequest)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        yield Target("127.0.0.1", Credentials("u", "p"), ports={"http": port}), _DropsTheSecondRequest.seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_read_whose_kept_connection_was_dropped_is_made_again_on_a_new_one(
    dropping: tuple[Target, list[str]],
) -> None:
    target, seen = dropping
    with Control(target) as control:
        control.info()
        assert control.info() == {"ok": True}
    assert seen == ["GET", "GET", "GET"]  # the second went to the dropping connection, then once more


def test_a_post_sent_on_a_dropped_connection_is_not_sent_twice(dropping: tuple[Target, list[str]]) -> None:
    target, seen = dropping
    with Control(target) as control:
        control.info()
        with pytest.raises(NetworkError, match="got no HTTP answer"):
            control.mkdir("incoming/x")  # serve may have made it: the call fails rather than doing it again
    assert seen == ["GET", "POST"]
