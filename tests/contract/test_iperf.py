"""The iperf3 wrapper against a real iperf3 server on loopback, and its JSON parsing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port
from workbench.probe.iperf import (
    IperfAuth,
    iperf3_available,
    iperf3_command,
    parse_iperf3_json,
    run_iperf3,
    turned_away_between_tests,
)
from workbench.server.iperf_server import Iperf3Server, write_server_auth
from workbench.shared.errors import NetworkError, UsageError, WorkbenchError

HOST = "127.0.0.1"
needs_iperf3 = pytest.mark.skipif(iperf3_available() is not None, reason="iperf3 not installed")


USER, PASSWORD = "wb", "iperf3-test-password"


@pytest.fixture
def iperf3_server(tmp_path: Path) -> Iterator[tuple[int, IperfAuth]]:
    """An authenticated iperf3 server (the only kind workbench starts) and what a client needs for it."""
    auth = write_server_auth(tmp_path / "iperf3", USER, PASSWORD)
    port = free_port()
    with Iperf3Server(HOST, port, auth) as server:
        yield port, IperfAuth(USER, PASSWORD, auth.public_key)
        log = server.log_path.read_text()
    # Waiting for it to listen never touched it: a connection that closes at once is a failed test to iperf3
    # ("unable to receive parameters"), after which it re-opens its listener and resets whoever came next.
    assert "unable to receive parameters" not in log, log


@needs_iperf3
@pytest.mark.parametrize("direction", ["upload", "download"])
def test_run_against_a_real_server(iperf3_server: tuple[int, IperfAuth], direction: str) -> None:
    port, auth = iperf3_server
    result = run_iperf3(HOST, port, direction, 1, auth=auth)
    assert result is not None
    assert result.direction == direction
    assert result.bytes_per_s > 1e6 and result.bytes > 1e6
    assert 0.5 < result.seconds < 2
    assert result.bytes_per_s == pytest.approx(result.bytes / result.seconds, rel=0.05)


@needs_iperf3
def test_server_refuses_clients_without_the_credentials(iperf3_server: tuple[int, IperfAuth]) -> None:
    port, auth = iperf3_server
    with pytest.raises(NetworkError) as anonymous:
        run_iperf3(HOST, port, "upload", 1)
    assert "credentials" in anonymous.value.hint or "authoriz" in anonymous.value.message.lower()
    wrong = IperfAuth(USER, "not-the-password", auth.public_key)
    with pytest.raises(NetworkError):
        run_iperf3(HOST, port, "upload", 1, auth=wrong)
    assert run_iperf3(HOST, port, "upload", 1, window=256 * 1024, auth=auth) is not None


@needs_iperf3
def test_a_test_right_after_a_refused_login_is_not_turned_away(iperf3_server: tuple[int, IperfAuth]) -> None:
    # The server re-opens its listener after every test, the refused one included; a client arriving in that gap
    # used to be reset ("unable to connect to server: Connection reset by peer").
    port, auth = iperf3_server
    wrong = IperfAuth(USER, "not-the-password", auth.public_key)
    for _ in range(3):
        with pytest.raises(NetworkError, match=r"(?i)authoriz|authentic"):
            run_iperf3(HOST, port, "upload", 1, auth=wrong)
        result = run_iperf3(HOST, port, "upload", 1, auth=auth)
        assert result is not None and result.bytes > 0


def test_only_a_connection_turned_away_before_a_test_is_tried_again() -> None:
    before = json.dumps({"start": {"connected": []}, "intervals": [], "end": {}})
    began = json.dumps({"start": {}, "intervals": [{"sum": {"bytes": 1}}], "end": {}})
    reset = "iperf3 to h:1: unable to receive control message: Connection reset by peer"
    assert turned_away_between_tests("iperf3 to h:1: unable to connect to server: Connection reset by peer", before)
    assert turned_away_between_tests("iperf3 to h:1: unable to connect to server: Connection refused", before)
    assert turned_away_between_tests(reset, before)
    assert not turned_away_between_tests(reset, began)  # reset mid-test: a real failure, not the gap
    assert not turned_away_between_tests(reset, "not json")
    assert not turned_away_between_tests("iperf3 to h:1: the server is busy running a test. try again later", before)
    assert not turned_away_between_tests("iperf3 to h:1: test authorization failed", before)
    assert not turned_away_between_tests("iperf3 to h:1: control socket has closed unexpectedly", before)


@needs_iperf3
def test_stopped_server_no_longer_listens(tmp_path: Path) -> None:
    port = free_port()
    server = Iperf3Server(HOST, port, write_server_auth(tmp_path / "iperf3", USER, PASSWORD))
    server.start()
    server.stop()
    with pytest.raises(NetworkError, match="unable to connect"):
        run_iperf3(HOST, port, "upload", 1)


def test_command_rounds_duration_and_never_asks_for_forever() -> None:
    argv = iperf3_command(HOST, 5201, "download", 0.3, window=65536)
    assert argv[argv.index("-t") + 1] == "1"
    assert "-R" in argv and argv[argv.index("-w") + 1] == "65536"
    with pytest.raises(UsageError):
        iperf3_command(HOST, 5201, "upload", 0)
    with pytest.raises(UsageError):
        iperf3_command(HOST, 5201, "both", 1)


def test_parse_errors_and_busy_server() -> None:
    with pytest.raises(NetworkError, match="busy") as busy:
        parse_iperf3_json(json.dumps({"error": "the server is busy running a test. try again later"}), "upload")
    assert "one test at a time" in busy.value.hint
    with pytest.raises(WorkbenchError, match="no JSON"):
        parse_iperf3_json("iperf3: error - boom", "upload")
    with pytest.raises(WorkbenchError, match="lacks"):
        parse_iperf3_json(json.dumps({"end": {}}), "upload")
