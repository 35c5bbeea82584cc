"""The aiohttp client when the server drops a kept-alive connection just as an upload starts on it.

HTTP lets a server close an idle connection at any moment, so a client may send its next request into a
connection that is already going away. The real `workbench serve` sits behind a loopback relay that resets
the connection the moment a PUT arrives on it, a given number of times: the timing no server can be
made to repeat on cue.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.suite import Counter
from tests.helpers import write_random
from tests.serve_fixtures import ServeRunner
from workbench.protocols.base import ClientOptions
from workbench.protocols.http import AiohttpClient
from workbench.shared.errors import NetworkError


class ResettingRelay:
    """Relays 127.0.0.1:port to the server; the first `resets` PUTs get a TCP reset instead."""

    def __init__(self, upstream_port: int, resets: int) -> None:
        self.upstream_port = upstream_port
        self.resets_left = resets
        self.resets_done = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _take_reset(self) -> bool:
        with self._lock:
            if self.resets_left <= 0:
                return False
            self.resets_left -= 1
            self.resets_done += 1
            return True

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 16):
                # a request's first bytes start a read of their own: the client waited for the last answer
                if from_client and data.startswith(b"PUT ") and self._take_reset():
                    src.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
                    break
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def relayed(served: ServeRunner) -> Iterator[tuple[ServeRunner, list[ResettingRelay]]]:
    relays: list[ResettingRelay] = []
    yield served, relays
    for relay in relays:
        relay.close()


def _client(served: ServeRunner, relay: ResettingRelay) -> AiohttpClient:
    target = served.target()
    target = dataclasses.replace(target, ports={**target.ports, "http": relay.port})
    return AiohttpClient(target, ClientOptions(stall_timeout_s=10.0))


def test_an_upload_whose_kept_alive_connection_was_reset_goes_out_again_once(
    relayed: tuple[ServeRunner, list[ResettingRelay]], tmp_path: Path
) -> None:
    served, relays = relayed
    relay = ResettingRelay(served.ctx.ports["http"], resets=1)
    relays.append(relay)
    data = write_random(tmp_path / "up.bin", 8 << 20)
    counter = Counter()
    with _client(served, relay) as client:  # connect's GET leaves the connection kept alive for the PUT
        client.upload(tmp_path / "up.bin", "incoming/reset-once.bin", counter)
    assert relay.resets_done == 1
    assert (served.ctx.root / "incoming" / "reset-once.bin").read_bytes() == data
    # the broken try's bytes crossed the wire too: counted, but never more than one file's worth
    assert len(data) <= counter.total <= 2 * len(data)


def test_an_upload_reset_every_time_fails_in_one_line(
    relayed: tuple[ServeRunner, list[ResettingRelay]], tmp_path: Path
) -> None:
    served, relays = relayed
    relay = ResettingRelay(served.ctx.ports["http"], resets=100)
    relays.append(relay)
    write_random(tmp_path / "up.bin", 8 << 20)
    with _client(served, relay) as client, pytest.raises(NetworkError) as caught:
        client.upload(tmp_path / "up.bin", "incoming/reset-always.bin", Counter())
    assert relay.resets_done == 2, "sent once more, and no more"
    line = caught.value.one_line()
    assert "\n" not in line and "Traceback" not in line
