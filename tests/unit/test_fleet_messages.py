"""The fleet member's lines as the controller reads them: typed messages, or one refusal saying why; the pipes
read in bounded memory; the scratch records of a fleet run."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from workbench.core import fleet_scratch
from workbench.core.fleet_lines import LineReader, Tail, TooLong
from workbench.core.fleet_member import _sendable
from workbench.core.fleet_messages import (
    MAX_LINE_BYTES,
    Begin,
    Copy,
    MalformedMessage,
    Row,
    Wait,
    nesting_depth,
    parse_message,
)
from workbench.core.results import Result, Sample
from workbench.core.scratch_record import Cleanup
from workbench.shared.triage import TcpTriage

ROW = Result(
    "http", "aiohttp", "download", "1M", 1_000_000, 1,
    samples=(Sample(1_000_000, 0.5, intervals=(200_000, 800_000), verified=True, client_cpu_s=0.01,
                    server_cpu_s=0.02, client_wait_s=0.003, server_wait_s=0.004,
                    tcp=TcpTriage("receiver", "client", 0.5, 1, 1_000_000)),),
)  # fmt: skip


def _line(event: str, **data: object) -> bytes:
    return json.dumps(_sendable({"event": event, **data}), allow_nan=False).encode()


def test_a_real_members_messages_read_back_typed() -> None:
    row = parse_message(_line("row", row=ROW.to_json()))
    assert isinstance(row, Row) and row.row.to_result() == ROW
    wait = parse_message(_line("wait", step=[3, 0, 1, 0, 2]))
    assert isinstance(wait, Wait) and wait.step == (3, 0, 1, 0, 2)
    copy = parse_message(
        _line("copy", step=[3, 0, 0, 0, 0], row=["http/aiohttp", "upload", "1M"], started_after_go_s=0.01,
              sample={"bytes": 5, "seconds": 1, "intervals": [5], "tcp": None})
    )  # fmt: skip
    assert isinstance(copy, Copy) and copy.sample.to_sample() == Sample(5, 1.0, intervals=(5,))
    meta = {"client": {"hostname": "desk", "tcp": {"tcp_rmem": "4096\t131072"}}, "server": {"kind": "stock"}, "x": 1}
    begin = parse_message(_line("begin", meta=meta))
    assert isinstance(begin, Begin) and begin.meta.model_dump(exclude_unset=True)["x"] == 1  # kept as data


def test_a_member_sends_its_words_without_controls() -> None:
    sent = _sendable({"error": "\x1b[2Jgone\u202e", "rate": float("nan"), "k\x07": ["a\tb"]})
    assert sent == {"error": "gone", "rate": None, "k": ["a b"]}


MALFORMED = [
    (b'{"event":"wait"}', "wait.step: Field required"),
    (b'{"event":"wait","step":["x"]}', "wait.step.0: Input should be a valid integer"),
    (b'{"event":"wait","step":[]}', "wait.step"),
    (b'{"event":"wait","step":[-1]}', "greater than or equal to 0"),
    (b'{"event":"wait","step":[true]}', "valid integer"),
    (b'{"event":"together","direction":"up","seconds":1}', "together.direction"),
    (b'{"event":"together","direction":"upload","seconds":1e400}', "finite number"),
    (b'{"event":"baseline","baseline":{"rtt_ms":NaN}}', "finite number"),
    (b'{"event":"baseline","baseline":{"rtt_ms":Infinity}}', "finite number"),
    (b'{"event":"begin","meta":{"x":1e400}}', "not finite"),
    (b'{"event":"begin","meta":{"x":' + b"9" * 30 + b"}}", "beyond 2^63"),
    (b'{"event":"begin","meta":{"client":{"tcp":"x"}}}', "begin.meta.client.tcp"),
    (b'{"event":"done","failed_rows":"1"}', "valid integer"),
    (b'{"event":"error","message":"\\u001b[2J"}', "control character"),
    (b'{"event":"error","message":"\\u009b31m"}', "control character"),
    (b'{"event":"error","message":"a\\nb"}', "control character"),
    (b'{"event":"begin","meta":{"\\u202ex":1}}', "control character"),
    (b'{"event":"error","message":"\\ud800"}', "Invalid JSON"),
    (b'{"event":"error","message":"' + b"x" * 9000 + b'"}', "at most 8192 characters"),
    (b'{"event":"take-over"}', "Input tag 'take-over'"),
    (b'{"please":1}', "Unable to extract tag"),
    (b"[1, 2]", "Input should be an object"),
    (b"\xff\xfe\x00\x01", "Invalid JSON"),
    (b'{"event":"wait","step":[0]}{', "Invalid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 16 levels"),
    (b'{"event":"begin","meta":{"a":' + b'{"b":' * 20 + b"1" + b"}" * 21 + b"}", "nested deeper"),
    (b'{"event":"error","message":"' + b"x" * MAX_LINE_BYTES + b'"}', "longer than 4 MiB"),
]


@pytest.mark.parametrize(("line", "why"), MALFORMED)
def test_a_malformed_line_is_refused_in_one_safe_line(line: bytes, why: str) -> None:
    with pytest.raises(MalformedMessage) as caught:
        parse_message(line)
    said = str(caught.value)
    assert why in said and "\n" not in said and "\x1b" not in said and len(said) <= 200, said


def test_a_row_with_bytes_zz_is_refused() -> None:
    doc = json.loads(_line("row", row=ROW.to_json()))
    doc["row"]["bytes"] = "zz"
    with pytest.raises(MalformedMessage, match=r"row\.row\.bytes"):
        parse_message(json.dumps(doc).encode())


def test_nesting_is_counted_without_strings() -> None:
    assert nesting_depth(b'{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert nesting_depth(b'{"a": "\\"[[["}') == 1
    assert nesting_depth(b"[" * 1_000_000, limit=16) == 17  # stops counting past the limit


HOSTILE_QUOTES = [
    b'"' + b'\\"' * (MAX_LINE_BYTES // 2),
    b'"' * MAX_LINE_BYTES,
    b'"\\' * (MAX_LINE_BYTES // 2),
    b"\\" * MAX_LINE_BYTES,
    b'["' * (MAX_LINE_BYTES // 2),
]


@pytest.mark.timeout(60)  # quadratic scanning of these lines took days; linear takes well under a second
@pytest.mark.parametrize(
    "line", HOSTILE_QUOTES, ids=["quote-escaped-quotes", "quotes", "quote-backslash", "backslashes", "bracket-quote"]
)
def test_nesting_of_a_line_of_quotes_is_counted_in_linear_time(line: bytes) -> None:
    assert nesting_depth(line) <= 17
    with pytest.raises(MalformedMessage):
        parse_message(line)


def test_an_unclosed_string_hides_the_brackets_after_it() -> None:
    assert nesting_depth(b'["' + b"[" * 100) == 1
    assert nesting_depth(b'["a\\\\"' + b"[" * 5) == 6  # an escaped backslash ends before the quote


def _pipe_with(data: bytes) -> int:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def _drain(reader: LineReader) -> list[bytes | TooLong]:
    got: list[bytes | TooLong] = []
    while not reader.closed:
        reader.feed()
        while (line := reader.next()) is not None:
            got.append(line)
    return got


def test_lines_are_bounded_while_reading() -> None:
    fd = _pipe_with(b"a\n" + b"x" * 50_000 + b"\nb\n" + b"y" * 30)
    reader = LineReader(fd, limit_bytes=1000)
    got = _drain(reader)
    os.close(fd)
    assert got[0] == b"a" and isinstance(got[1], TooLong) and got[2] == b"b" and len(got) == 3
    assert reader.unterminated  # the pipe ended inside a line
    assert len(reader._buffer) == 0


def test_stderr_keeps_only_its_end() -> None:
    read, write = os.pipe()
    tail = Tail(read, keep_bytes=100)
    for _ in range(50):
        os.write(write, b"z" * 1000)
        tail.feed()
    os.write(write, b"\nthe last words\n")
    os.close(write)
    while not tail.closed:
        tail.feed()
    os.close(read)
    assert len(tail.text()) == 100 and tail.lines()[-1] == "the last words"


def test_a_fleet_runs_scratches_are_settled_when_none_is_left() -> None:
    server = {"kind": "stock", "url": "http://nas/x", "scratch": "workbench-0123456789ab"}
    meta = fleet_scratch.record({"fleet": {}}, "a", server, False)
    meta = fleet_scratch.record(meta, "b", {**server, "scratch": "workbench-ba9876543210"}, False)
    assert set(fleet_scratch.left(meta)) == {"a", "b"} and "scratch_removed" not in meta
    meta = fleet_scratch.record(meta, "a", None, True)
    assert set(fleet_scratch.left(meta)) == {"b"}
    meta = fleet_scratch.mark_removed(meta, ["b"])
    assert fleet_scratch.left(meta) == {} and meta["scratch_removed"] is True


def test_a_live_owners_scratch_is_not_removed() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.updated: list[int] = []

        def record_cleanup(self, run_id: int, meta: dict) -> None:
            self.updated.append(run_id)

    server = {"kind": "stock", "scratch": "workbench-0123456789ab"}
    meta = fleet_scratch.record({"fleet": {}}, "a", server, False)
    from workbench.shared import procs

    mine = {"pid": os.getpid(), "start_ticks": procs.start_ticks(os.getpid())}
    removed: list[dict] = []
    recorder: Any = Recorder()
    done = Cleanup("x/workbench-0123456789ab", "ftp://nas/x", removed=True, deleted=True)
    assert fleet_scratch.remove_left(recorder, 1, {**meta, "owner": mine}, lambda s: removed.append(s) or done) == []
    assert fleet_scratch.remove_left(recorder, 1, meta, lambda s: done) == []  # no owner named: never gone
    gone = {"pid": os.getpid(), "start_ticks": -1}
    said = fleet_scratch.remove_left(recorder, 1, {**meta, "owner": gone}, lambda s: done)
    assert len(said) == 1 and "removed fleet run 1's (client a) scratch directory" in said[0], said
    assert removed == [] and recorder.updated == [1]
