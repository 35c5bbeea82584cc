"""What the fleet controller keeps of a member's messages is bounded by the plan: rows and copies only of planned
clients, directions, file sets and rounds, one each; one begin, one finish, one raw-TCP-at-once per direction,
one clean-up per earlier run, a capped number of warnings; a scratch directory recorded only on the job's own
server. Anything beyond is a malformed message: that member is refused, in one line."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from workbench import __version__
from workbench.core.fleet import PROTOCOL, MemberReport
from workbench.core.fleet_controller import MAX_WARNINGS, Controller, _Member
from workbench.core.fleet_lines import LineReader, Tail
from workbench.core.fleet_member import _sendable
from workbench.core.fleet_messages import MAX_ITEMS
from workbench.core.observe import COPY_STEP, QuietObserver
from workbench.core.results import Result, Sample
from workbench.core.ssh_session import Destination
from workbench.shared import urls

URL = "sftp://alice@nas.local/srv/share"
PLANNED = [("http/aiohttp", "upload"), ("http/aiohttp", "download"), ("http/curl", "upload"), ("http/curl", "download")]
SETS = ["1M", "10x4K"]
ROUNDS = 3  # one warm-up and two timed copies
ROW = Result("http", "aiohttp", "upload", "1M", 1_000_000, 1, samples=(Sample(1_000_000, 0.5),))


@pytest.fixture
def fleet() -> Iterator[tuple[Controller, _Member, dict[str, list[Any]]]]:
    seen: dict[str, list[Any]] = {"rows": [], "scratches": []}
    controller = Controller(
        [Destination("farbox1")], {"url": URL, "settings": {}}, "workbench", False, QuietObserver(),
        on_row=lambda host, row: seen["rows"].append(row),
        planned=PLANNED, sets=SETS, rounds=ROUNDS,
        on_scratch=lambda host, server, removed: seen["scratches"].append((server, removed)),
    )  # fmt: skip
    read, write = os.pipe()
    proc = SimpleNamespace(stdin=io.BytesIO(), terminate=lambda: None)
    member = _Member(Destination("farbox1"), cast(Any, proc), MemberReport("farbox1"), LineReader(read), Tail(read))
    controller.members.append(member)
    say(controller, member, "hello", protocol=PROTOCOL, version=__version__, pid=1)
    assert member.hello and not member.refused
    try:
        yield controller, member, seen
    finally:
        os.close(read)
        os.close(write)


def say(controller: Controller, member: _Member, event: str, **data: object) -> None:
    controller._line(member, json.dumps(_sendable({"event": event, **data})).encode())


def _copy(step: list[int], row: list[str]) -> dict[str, object]:
    return {"step": step, "row": row, "started_after_go_s": 0.0, "sample": {"bytes": 5, "seconds": 1.0}}


def _refused(member: _Member, why: str) -> None:
    assert member.refused, "the member was not refused"
    said = member.report.failure or ""
    assert why in said and "\n" not in said, said


def test_the_plans_rows_and_copies_are_kept(fleet: tuple[Controller, _Member, dict[str, list[Any]]]) -> None:
    controller, member, seen = fleet
    say(controller, member, "copy", **_copy([COPY_STEP, 0, 0, 0, 2], ["http/aiohttp", "upload", "1M"]))
    say(controller, member, "row", row=ROW.to_json())
    assert not member.refused and len(member.report.copies) == 1 and seen["rows"] == [ROW]


@pytest.mark.parametrize(
    ("step", "row", "why"),
    [
        ([COPY_STEP, 0, 0, 0, 0], ["http/aiohttp", "upload", "evil-set"], "a row the plan does not have"),
        ([COPY_STEP, 0, 0, 2, 0], ["http/aiohttp", "upload", "1M"], "a step the plan does not have"),
        ([COPY_STEP, 0, 0, 0, ROUNDS], ["http/aiohttp", "upload", "1M"], "a step the plan does not have"),
        ([COPY_STEP, 1, 0, 0, 0], ["http/aiohttp", "upload", "1M"], "does not match its step"),
    ],
)
def test_a_copy_the_plan_does_not_have_is_refused(
    fleet: tuple[Controller, _Member, dict[str, list[Any]]], step: list[int], row: list[str], why: str
) -> None:
    controller, member, _ = fleet
    say(controller, member, "copy", **_copy(step, row))
    _refused(member, why)
    assert member.report.copies == []


def test_rows_of_endless_new_file_sets_are_refused(fleet: tuple[Controller, _Member, dict[str, list[Any]]]) -> None:
    controller, member, seen = fleet
    doc = ROW.to_json()
    for n in range(3):
        say(controller, member, "row", row={**doc, "file_set": f"set-{n}"})
    _refused(member, "a row the plan does not have")
    assert seen["rows"] == []  # nothing stored


def test_one_copy_per_step(fleet: tuple[Controller, _Member, dict[str, list[Any]]]) -> None:
    controller, member, _ = fleet
    for _ in range(3):
        say(controller, member, "copy", **_copy([COPY_STEP, 0, 0, 0, 1], ["http/aiohttp", "upload", "1M"]))
    _refused(member, "a second copy")
    assert len(member.report.copies) == 1


@pytest.mark.parametrize("event", ["begin", "finish"])
def test_one_begin_and_one_finish(fleet: tuple[Controller, _Member, dict[str, list[Any]]], event: str) -> None:
    controller, member, _ = fleet
    for _ in range(2):
        say(controller, member, event, meta={"client": {"hostname": "farbox1"}})
    _refused(member, f"a second '{event}'")


def test_raw_tcp_at_once_is_said_once_each_way(fleet: tuple[Controller, _Member, dict[str, list[Any]]]) -> None:
    controller, member, _ = fleet
    for _ in range(2):
        say(controller, member, "together", direction="upload", error="no iperf3")
    _refused(member, "a second 'together' upload")
    assert len(member.report.warnings) == 1


def test_warnings_are_capped(fleet: tuple[Controller, _Member, dict[str, list[Any]]]) -> None:
    controller, member, _ = fleet
    say(controller, member, "finish", warnings=[f"warning {n}" for n in range(MAX_ITEMS)])
    assert not member.refused
    assert len(member.report.warnings) == MAX_WARNINGS + 1
    assert f"more than {MAX_WARNINGS} warnings" in member.report.warnings[-1]


def test_a_scratch_directory_on_another_server_is_never_recorded(
    fleet: tuple[Controller, _Member, dict[str, list[Any]]],
) -> None:
    controller, member, seen = fleet
    server = {"kind": "stock", "url": "smb://victim.example/share", "scratch": "workbench-0123456789ab"}
    say(controller, member, "begin", meta={"server": server})
    _refused(member, "not the job's")
    assert seen["scratches"] == []


def test_a_scratch_directory_on_the_jobs_server_is_recorded(
    fleet: tuple[Controller, _Member, dict[str, list[Any]]],
) -> None:
    controller, member, seen = fleet
    server = {"kind": "stock", "url": urls.parse(URL).display(), "scratch": "workbench-0123456789ab"}
    say(controller, member, "begin", meta={"server": server})
    assert not member.refused and [s for s, _ in seen["scratches"]] == [server]
