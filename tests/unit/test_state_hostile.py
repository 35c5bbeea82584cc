"""A servers.json that is not what `servers up` writes: every structural fault is the one-line 'is corrupt' usage
error (exit 2) from `servers status` and `servers down`, never an internal error; a valid file still reads."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from workbench.cli import app as cli
from workbench.server.daemons import supervisor
from workbench.shared.errors import ExitCode, UsageError
from workbench.shared.paths import SERVERS_FILE

HINT = "remove it and stop servers by hand"
# A pid that is never a live process here: past the kernel's pid_max (at most 2**22), inside a pid_t.
NO_SUCH_PID = 2**30


def _record(**changes: Any) -> dict[str, Any]:
    """A server's record as up() writes it, with `changes` (a value of ... removes that key)."""
    record: dict[str, Any] = {
        "name": "serve",
        "pid": NO_SUCH_PID,
        "pgid": NO_SUCH_PID,
        "start_ticks": 12345,
        "cmdline": ["workbench", "serve"],
        "exe": "/usr/bin/python3",
        "ports": {"http": 8080, "tcp": 5201},
    }
    record.update(changes)
    return {k: v for k, v in record.items() if v is not ...}


def _doc(servers: Any = None, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"bind": "127.0.0.1", "root": "/srv/files", "netns": None}
    doc["servers"] = [_record()] if servers is None else servers
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not ...}


def _write(state: Path, doc: object) -> Path:
    state.mkdir(mode=0o700, exist_ok=True)
    path = state / SERVERS_FILE
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


CORRUPT = [
    pytest.param(_doc([_record(pid="abc")]), "servers[0].pid is 'abc', not a whole number", id="pid-string"),
    pytest.param(_doc([_record(pid=...)]), "servers[0] has neither a pid nor an unavailable reason", id="no-pid"),
    pytest.param(_doc([_record(pid=0)]), "servers[0].pid is 0, not a whole number from 2", id="pid-zero"),
    pytest.param(_doc([_record(pid=-1)]), "servers[0].pid is -1, not a whole number from 2", id="pid-negative"),
    pytest.param(_doc([_record(pid=1)]), "servers[0].pid is 1, not a whole number from 2", id="pid-init"),
    pytest.param(_doc([_record(pgid=1)]), "servers[0].pgid is 1, not a whole number from 2", id="pgid-init"),
    pytest.param(_doc([_record(pid=True)]), "servers[0].pid is True, not a whole number", id="pid-bool"),
    pytest.param(_doc([_record(pid=1.5)]), "servers[0].pid is 1.5, not a whole number", id="pid-float"),
    pytest.param(_doc([_record(pid=2**40)]), "servers[0].pid is 1099511627776, not a whole number", id="pid-huge"),
    pytest.param(_doc([_record(pgid="x")]), "servers[0].pgid is 'x', not a whole number", id="pgid-string"),
    pytest.param(_doc([_record(start_ticks=[])]), "servers[0].start_ticks is [], not a whole number", id="ticks"),
    pytest.param(_doc([_record(cmdline="serve")]), "servers[0].cmdline is 'serve', not a list of strings", id="argv"),
    pytest.param(_doc([_record(exe=3)]), "servers[0].exe is 3, not a string", id="exe"),
    pytest.param(_doc([_record(ports=[80])]), "servers[0].ports is [80], not an object", id="ports-list"),
    pytest.param(_doc([_record(ports={"http": "80"})]), "servers[0].ports['http'] is '80', not a whole", id="port"),
    pytest.param(_doc([_record(ports={"http": 70000})]), "servers[0].ports['http'] is 70000", id="port-range"),
    pytest.param(_doc([1]), "servers[0] is 1, not an object", id="servers-int-item"),
    pytest.param(_doc("abc"), "servers is 'abc', not a list", id="servers-string"),
    pytest.param(_doc({"a": 1}), "servers is {'a': 1}, not a list", id="servers-object"),
    pytest.param(_doc([_record(name=...)]), "servers[0] has no name", id="no-name"),
    pytest.param(_doc([_record(name=7)]), "servers[0].name is 7, not a name", id="name-int"),
    pytest.param(_doc([_record(name="")]), "servers[0].name is '', not a name", id="name-empty"),
    pytest.param(
        _doc([_record(name="\x1b[31mserve")]), r"servers[0].name is '\x1b[31mserve', not a name", id="name-esc"
    ),
    pytest.param(_doc([_record(name="serve\n")]), r"servers[0].name is 'serve\n', not a name", id="name-newline"),
    pytest.param(_doc([_record(name="ser\x7fve")]), r"servers[0].name is 'ser\x7fve', not a name", id="name-del"),
    pytest.param(_doc([_record(name="ser\x9bve")]), r"servers[0].name is 'ser\x9bve', not a name", id="name-c1"),
    pytest.param(_doc([{"name": "afpd", "unavailable": 7}]), "unavailable is 7, not a string", id="reason-7"),
    pytest.param(
        _doc([{"name": "afpd", "unavailable": "gone", "pid": 5}]), "has both a pid and an unavailable", id="both"
    ),
    pytest.param(_doc([_record(ports={"h\x1bttp": 80})]), r"servers[0].ports key is 'h\x1bttp'", id="service-esc"),
    pytest.param(_doc(bind="1.2.3.4\x1b[2J"), r"bind is '1.2.3.4\x1b[2J', not a name", id="bind-esc"),
    pytest.param(_doc(bind=4), "bind is 4, not a name", id="bind-int"),
    pytest.param(_doc(bind=...), "it has no 'bind'", id="no-bind"),
    pytest.param(_doc(root=...), "it has no 'root'", id="no-root"),
    pytest.param(_doc(root=["/"]), "root is ['/'], not a string", id="root-list"),
    pytest.param(_doc(netns="ns\x00"), r"netns is 'ns\x00', not a name", id="netns-nul"),
    pytest.param(_doc(extra=1), "unexpected keyword argument 'extra'", id="unknown-top-key"),
    pytest.param([1, 2], "the document is [1, 2], not an object", id="document-list"),
    pytest.param("null", "the document is None, not an object", id="document-null"),
    pytest.param("{", "Expecting property name", id="not-json"),
    pytest.param("[" * 100_000, "", id="nested-past-recursion"),
]


@pytest.mark.parametrize(("doc", "detail"), CORRUPT)
def test_a_corrupt_state_file_is_one_usage_error_naming_what_is_wrong(tmp_path: Path, doc: object, detail: str) -> None:
    path = _write(tmp_path / "state", doc)
    with pytest.raises(UsageError) as info:
        supervisor.read_state(tmp_path / "state")
    assert info.value.message.startswith(f"{path} is corrupt: ")
    assert detail in info.value.message
    assert info.value.hint == HINT
    shown = info.value.one_line()
    assert "\n" not in shown and "\x1b" not in shown and "\x00" not in shown


@pytest.mark.parametrize("command", ["status", "down"])
@pytest.mark.parametrize(
    ("doc", "detail"),
    [
        (_doc([_record(pid="abc")]), "pid is 'abc'"),
        (_doc([1]), "servers[0] is 1"),
        (_doc("abc"), "servers is 'abc'"),
        (_doc([_record(pid=...)]), "neither a pid"),
        (_doc([_record(name="\x1b[31mevil")]), r"name is '\x1b[31mevil'"),
    ],
)
def test_status_and_down_say_corrupt_in_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, doc: object, detail: str
) -> None:
    state = tmp_path / "state"
    path = _write(state, doc)
    code, out, err = _run_main(["servers", command, "--state-dir", str(state)], capsys)
    assert code == ExitCode.USAGE, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "is corrupt" in lines[0] and detail in lines[0], err
    assert "\x1b" not in out + err and "Traceback" not in err
    assert path.exists()  # down stopped nothing and kept the record for the user to look at


def test_a_valid_state_file_still_reads_and_shows(tmp_path: Path) -> None:
    doc = _doc(
        [
            _record(),
            _record(name="sshd", pgid=None, start_ticks=None, cmdline=None, exe=None, ports={}),  # an older file
            {"name": "afpd", "unavailable": "afpd is not installed (apt-get install netatalk)"},
        ],
        netns="wb-lab-1",
    )
    _write(tmp_path / "state", doc)
    state = supervisor.read_state(tmp_path / "state")
    assert state is not None
    assert [s["name"] for s in state.servers] == ["serve", "sshd", "afpd"]
    assert state.bind == "127.0.0.1" and state.netns == "wb-lab-1"
    lines = supervisor.status(tmp_path / "state")  # reads /proc only: the pids here name no process
    assert lines[0].split()[:2] == ["serve", "DEAD"] and "http 8080, tcp 5201" in lines[0]
    assert "no recorded start time" in lines[1]
    assert lines[2].startswith("afpd") and "unavailable" in lines[2]


def test_a_state_file_without_servers_or_netns_reads_as_none_started(tmp_path: Path) -> None:
    _write(tmp_path / "state", {"bind": "127.0.0.1", "root": "/srv"})
    state = supervisor.read_state(tmp_path / "state")
    assert state is not None and state.servers == [] and state.netns is None


def test_no_state_file_is_none(tmp_path: Path) -> None:
    assert supervisor.read_state(tmp_path) is None


def test_the_state_up_writes_reads_back(tmp_path: Path) -> None:
    # what _write_state writes (the record of a live process: this one) passes its own reader
    from workbench.shared import procs

    ident = procs.identity(os.getpid()) or {}
    record = {"name": "serve", "pid": os.getpid(), "pgid": os.getpgid(0), **ident, "ports": {"http": 1}}
    state = supervisor.ServersState(bind="127.0.0.1", root=str(tmp_path), servers=[record])
    (tmp_path / "state").mkdir()
    supervisor._write_state(tmp_path / "state", state)
    assert supervisor.read_state(tmp_path / "state") == state


def _run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The CLI as the console script runs it; main() installs signal handlers, restored here."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as info:
            cli.main(args)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_a_reason_with_control_characters_does_not_stop_down_from_reading_the_servers_beside_it(
    tmp_path: Path,
) -> None:
    # a reason is outside words (a path from the environment): the file stays readable, so that down() can stop
    # the servers recorded beside it; what shows it escapes it (the CLI prints status lines through for_markup)
    _write(tmp_path / "state", _doc([_record(), {"name": "afpd", "unavailable": "no \x1b]52;c;eA==\x07 here"}]))
    state = supervisor.read_state(tmp_path / "state")
    assert state is not None and [s["name"] for s in state.servers] == ["serve", "afpd"]
