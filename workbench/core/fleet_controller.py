"""A fleet's controller: the same plan on every client host at once, over SSH, one run (`workbench fleet
--clients HOSTS URL...`, `workbench lab --clients N`; workbench.core.session starts it).

This side is the controller. It logs in to each client with the system `ssh` (the user's ~/.ssh/config, agent and
known_hosts, as `run --via-ssh` does, for the same reasons), runs the hidden `workbench fleet-member` there, and
speaks JSON lines with it (workbench.core.fleet_member). No daemon and no port of our own: when the session ends,
the member ends, so nothing is left running on a client, also when this side fails, is interrupted, or dies.

Each member says where it waits; the Barrier (workbench.core.fleet) lets every copy start on all clients at
once, and the file preparation and the clients' own baselines one client at a time. The controller keeps what
each client sends as it arrives (a client that fails mid-run keeps its finished rows and fails only its own),
and stores one run: per step an aggregate row over the time all clients were copying, then each client's row.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import shlex
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.core import fleet_scratch
from workbench.core.fleet import (
    PROTOCOL,
    Barrier,
    CopyEvent,
    MemberReport,
    explain_fleet,
    fleet_rows,
    together_baseline,
)
from workbench.core.fleet_lines import LineReader, Tail, TooLong
from workbench.core.fleet_messages import (
    BaselineMessage,
    Begin,
    Cleaned,
    Copy,
    Done,
    Error,
    Finish,
    Hello,
    MalformedMessage,
    Message,
    Row,
    Together,
    Wait,
    parse_message,
    short,
)
from workbench.core.observe import COPY_STEP, STEP_BASELINE, STEP_PREPARE, TOGETHER_STEP, Recorder, RunObserver
from workbench.core.results import Baseline, Result, Run
from workbench.core.settings import Settings
from workbench.core.ssh_session import (
    INSTALL_HINT,
    Destination,
    end_ssh,
    remote_shell_command,
    ssh_argv,
    ssh_failure,
)
from workbench.shared import hostinfo, procs, signals
from workbench.shared.errors import ExitCode, NotFoundError, UsageError, WorkbenchError
from workbench.shared.safetext import cut, for_terminal

HELLO_TIMEOUT_S = 120.0  # ssh login and the member's start (a Python import on a slow host)
END_TIMEOUT_S = 60.0  # for the members to finish their last row and remove their uploads after the end
REFUSED_GRACE_S = 10.0  # a member that sent a malformed line: time to stop on its own before its session is cut
MAX_CLIENTS = 64
PING_S = 10.0  # a line to every member this often (see fleet_member.SILENCE_S)
SAID_CHARS = 300  # of a member's own words (its stderr, its error) in a one-line message


@dataclass
class _Member:
    """One client's SSH session and what it sent."""

    dest: Destination
    proc: subprocess.Popen[bytes]
    report: MemberReport
    out: LineReader
    err: Tail
    hello: bool = False
    done: bool = False  # it said its run ended
    ended: bool = False  # its session closed
    refused: bool = False  # it sent a malformed line: nothing more it says is read
    cut_at: float | None = None  # when its session is ended for it (after a malformed line)
    go_wall_s: float = 0.0
    deadline: float = 0.0
    copied: set[tuple[int, ...]] = field(default_factory=set)  # the steps whose copy it sent: one each
    said: set[str] = field(default_factory=set)  # what it may say once ("begin", "finish", "together upload"…)


def remote_command(text: str) -> list[str]:
    """--remote-workbench as words ("workbench", "/opt/wb/bin/workbench", "python3 -m workbench")."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(
            f"--remote-workbench {text!r}: {exc}", "e.g. /opt/wb/bin/workbench or 'python3 -m workbench'"
        ) from None
    if not words:
        raise UsageError("--remote-workbench is empty", "e.g. workbench or /opt/wb/bin/workbench")
    return words


def _start(dest: Destination, remote: list[str], insecure: bool) -> subprocess.Popen[bytes]:
    argv = [*ssh_argv(dest, insecure), remote_shell_command([*remote, "fleet-member"])]  # a leading ~/ expands there
    # its own session: a Ctrl-C at the terminal reaches the controller, which then ends every session in order
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )


def _send(member: _Member, line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        assert member.proc.stdin is not None
        member.proc.stdin.write(line.encode() + b"\n")
        member.proc.stdin.flush()


# A member's own warnings kept (each one line, each shown with the run): a hostile one could send a thousand per
# message; past these, one line says so.
MAX_WARNINGS = 50


def _warn(member: _Member, warnings: Sequence[str]) -> None:
    report = member.report
    for text in warnings:
        if len(report.warnings) < MAX_WARNINGS:
            report.warnings += (text,)
        elif "warnings cut" not in member.said:
            member.said.add("warnings cut")
            report.warnings += (f"{member.dest.alias} sent more than {MAX_WARNINGS} warnings: the rest were not kept",)


def _once(member: _Member, what: str) -> None:
    """Refuse what a member may say only once, said again (each would pile up or be stored again)."""
    if what in member.said:
        raise MalformedMessage(f"a second {what}")
    member.said.add(what)


def _display(url: object) -> str | None:
    """A job's URL as a member's far host names it in its metadata (None: the job has no URL)."""
    from workbench.shared import urls as urls_mod

    return urls_mod.parse(url).display() if isinstance(url, str) else None


def _close_stdin(member: _Member) -> None:
    with contextlib.suppress(OSError, ValueError):
        assert member.proc.stdin is not None
        member.proc.stdin.close()


def _drain_stderr(member: _Member, within_s: float = 1.0) -> None:
    """What is left of an ended session's stderr (bounded in time: a child of ssh may hold the pipe open)."""
    deadline = time.monotonic() + within_s
    while not member.err.closed and (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([member.err.fd], [], [], left)
        if not ready:
            return
        member.err.feed()


def _step_text(step: tuple[int, ...]) -> str:
    return {
        STEP_PREPARE: "preparing test files",
        STEP_BASELINE: "raw TCP alone",
        (TOGETHER_STEP, 0): "raw TCP up, every client at once",
        (TOGETHER_STEP, 1): "raw TCP down, every client at once",
    }.get(step, "copy")


ScratchNote = Callable[[str, Mapping[str, Any] | None, bool], None]  # host, its scratch's server doc, removed


class Controller:
    """The fleet's sessions from login to end; `run()` returns every client's report.

    What a member says is parsed into typed messages (workbench.core.fleet_messages) and checked against the
    plan; a line that is not one fails that member alone (its remaining rows), in one line naming it, and its
    session is ended; the others go on.
    """

    def __init__(
        self,
        dests: Sequence[Destination],
        job: Mapping[str, Any],
        remote_workbench: str,
        insecure_host_keys: bool,
        observer: RunObserver,
        on_row: Callable[[str, Result], None],
        spawn_context: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
        planned: Sequence[tuple[str, str]] = (),
        on_scratch: ScratchNote | None = None,
        on_cleaned: Callable[[int, Sequence[str]], None] | None = None,
        left_scratches: Sequence[Mapping[str, Any]] = (),
        sets: Sequence[str] = (),
        rounds: int = 0,
    ) -> None:
        self.dests = list(dests)
        self.job = dict(job)
        self.remote = remote_command(remote_workbench)
        self.insecure = insecure_host_keys
        self.observer = observer
        self.on_row = on_row
        self.on_scratch = on_scratch
        self.on_cleaned = on_cleaned
        self._left = list(left_scratches)  # earlier runs' scratch directories: for the first member to log in
        self._cleaner: str | None = None  # the member they went to
        self.spawn_context = spawn_context
        self.planned = list(planned)  # (label, direction) in plan order: names for the status lines
        self._labels = list(dict.fromkeys(label for label, _ in self.planned))
        self._directions = list(dict.fromkeys(d for _, d in self.planned))
        self._sets = list(sets)  # the plan's file sets in order (empty: not checked)
        self._rounds = rounds  # copies of each row: warm-ups and timed (0: not checked)
        self._url = _display(job.get("url"))  # the server every member's scratch directory must be on
        self._cleaned: set[int] = set()  # earlier runs whose clean-up was reported
        self.members: list[_Member] = []
        self.barrier = Barrier([d.alias for d in self.dests])

    def run(self) -> list[MemberReport]:
        """Every session started, the plan run to its end on every client; also on failure or Ctrl-C each session
        is ended and what its member sent is kept (the reports)."""
        try:
            with self.spawn_context():
                for dest in self.dests:
                    proc = _start(dest, self.remote, self.insecure)
                    assert proc.stdout is not None and proc.stderr is not None
                    self.members.append(
                        _Member(dest, proc, MemberReport(dest.alias), LineReader(proc.stdout.fileno()),
                                Tail(proc.stderr.fileno()), deadline=time.monotonic() + HELLO_TIMEOUT_S)
                    )  # fmt: skip
            self.observer.status(f"fleet: logging in to {len(self.members)} clients…")
            pinged = time.monotonic()
            while any(not m.ended for m in self.members):
                self._pump(1.0)
                self._check_hello_deadlines()
                self._cut_refused()
                self._release()
                if time.monotonic() - pinged > PING_S:
                    pinged = time.monotonic()
                    for m in self.members:
                        if m.hello and not m.ended and not m.done and not m.refused:
                            _send(m, "ping")  # a member waiting at a step gives up after a minute of silence
        finally:
            self._end_all()
        return [m.report for m in self.members]

    # -- the loop ------------------------------------------------------------------------------------------
    def _pump(self, timeout_s: float) -> None:
        live = [m for m in self.members if not m.ended]
        feeds: dict[int, Callable[[], None]] = {}
        for m in live:
            if not m.out.closed:
                feeds[m.out.fd] = m.out.feed
            if not m.err.closed:
                feeds[m.err.fd] = m.err.feed
        if any(m.out.pending for m in live):
            timeout_s = 0
        if feeds:
            ready, _, _ = select.select(list(feeds), [], [], timeout_s)
            for fd in ready:
                feeds[fd]()  # one read each: bounded however much a member writes
        for m in live:
            while (line := m.out.next()) is not None:
                self._line(m, line)
            if m.out.closed and not m.out.pending:
                if m.out.unterminated and not m.done and not m.refused and m.report.failure is None:
                    m.report.failure = "its session ended in the middle of a line"
                self._ended(m)

    def _line(self, m: _Member, line: bytes | TooLong) -> None:
        """One line from a member: its typed message acted on, or the member refused."""
        if m.refused or m.done:
            return  # after a malformed line, or after "done": nothing it says is read
        if isinstance(line, TooLong):
            self._refuse(m, f"a line longer than {line.limit_bytes // (1024 * 1024)} MiB")
            return
        try:
            message = parse_message(line)
        except MalformedMessage as exc:
            if not m.hello and not line.lstrip().startswith(b"{"):
                m.err.add(line + b"\n")  # before its hello: a far login script's chatter, kept with stderr
                return
            self._refuse(m, str(exc))
            return
        try:
            self._event(m, message)
        except MalformedMessage as exc:
            self._refuse(m, str(exc))

    def _refuse(self, m: _Member, why: str) -> None:
        """Fail the member for a malformed line: its remaining rows fail, the others go on without it."""
        if m.refused or m.ended:
            return
        m.refused = True
        m.report.failure = f"sent a malformed message: {short(why, SAID_CHARS)}"
        self.barrier.gone(m.dest.alias)
        _close_stdin(m)  # a member that still listens stops as on Ctrl-C (its uploads removed)
        m.cut_at = time.monotonic() + REFUSED_GRACE_S
        self.observer.status(f"fleet: {m.dest.alias} {m.report.failure}; its remaining rows fail")

    def _cut_refused(self) -> None:
        now = time.monotonic()
        for m in self.members:
            if m.refused and not m.ended and m.cut_at is not None and now > m.cut_at:
                m.cut_at = None
                with contextlib.suppress(ProcessLookupError):
                    m.proc.terminate()  # ssh ends: the member's session closes, its pipes reach their end

    def _event(self, m: _Member, message: Message) -> None:
        report, alias = m.report, m.dest.alias
        if isinstance(message, Hello):
            if m.hello:
                raise MalformedMessage("a second hello")
            self._hello(m, message)
            return
        if not m.hello:
            raise MalformedMessage(f"'{message.event}' before its hello")
        if isinstance(message, Wait):
            self._check_step(message.step)
            self.barrier.wait(alias, message.step)
        elif isinstance(message, Copy):
            # kept at once, named by its row: a client that stops mid-row still counted in the rounds it finished
            self._check_step(message.step)
            label, direction, file_set = message.row
            self._check_planned(label, direction, file_set)
            self._check_copy(m, message.step, message.row)
            started = m.go_wall_s + message.started_after_go_s
            sample = message.sample.to_sample()
            report.copies.append(CopyEvent(alias, message.step, label, direction, file_set, started, sample))
        elif isinstance(message, Row):
            row = message.row.to_result()
            self._check_planned(row.label, row.direction, row.file_set)
            if any((r.label, r.direction, r.file_set) == (row.label, row.direction, row.file_set) for r in report.rows):
                raise MalformedMessage(f"a second row for {row.label} {row.direction} {row.file_set}")
            report.rows.append(row)
            self.on_row(alias, row)
        elif isinstance(message, BaselineMessage):
            report.baseline = message.baseline.to_baseline()
        elif isinstance(message, Together):
            _once(m, f"'together' {message.direction}")
            if message.error:
                _warn(m, [f"raw TCP {message.direction} with every client at once: {message.error}"])
            else:
                started = m.go_wall_s + message.started_after_go_s
                report.together[message.direction] = (started, message.seconds, message.bytes)
        elif isinstance(message, Begin):
            _once(m, "'begin'")
            server = message.meta.server
            if server is not None and server.kind == "stock" and (self._url is None or server.url != self._url):
                raise MalformedMessage(f"a scratch directory on {short(str(server.url))}, not the job's server")
            report.meta = message.meta.model_dump(exclude_unset=True)
            if self.on_scratch is not None and server is not None and server.kind == "stock" and server.scratch:
                self.on_scratch(alias, server.model_dump(exclude_unset=True), False)  # recorded before any copy
        elif isinstance(message, Finish):
            _once(m, "'finish'")
            _warn(m, message.warnings)
            if self.on_scratch is not None and message.meta is not None and message.meta.scratch_removed:
                self.on_scratch(alias, None, True)
        elif isinstance(message, Cleaned):
            if alias != self._cleaner or self.on_cleaned is None:
                raise MalformedMessage("'cleaned' without being asked to clean")
            if message.run_id in self._cleaned:
                raise MalformedMessage(f"a second 'cleaned' for run {message.run_id}")
            self._cleaned.add(message.run_id)
            self.on_cleaned(message.run_id, message.hosts)
        elif isinstance(message, Done):
            m.done = True
            _close_stdin(m)  # the member ends: its session closes after it
        elif isinstance(message, Error):
            report.failure = message.message

    def _check_step(self, step: tuple[int, ...]) -> None:
        """A step of the plan: preparing, the baseline, raw TCP at once (up or down) or one of its copies."""
        kind = step[0]
        if step in (STEP_PREPARE, STEP_BASELINE) or (kind == TOGETHER_STEP and len(step) == 2 and step[1] < 2):
            return
        copy = kind == COPY_STEP and len(step) == 5
        planned = not self.planned or (step[1] < len(self._labels) and step[2] < len(self._directions))
        in_set = copy and (not self._sets or step[3] < len(self._sets))
        if copy and planned and in_set and (not self._rounds or step[4] < self._rounds):
            return
        raise MalformedMessage(f"a step the plan does not have: {list(step)}")

    def _check_planned(self, label: str, direction: str, file_set: str) -> None:
        if (self.planned and (label, direction) not in self.planned) or (self._sets and file_set not in self._sets):
            raise MalformedMessage(f"a row the plan does not have: {short(f'{label} {direction} {file_set}')}")

    def _check_copy(self, m: _Member, step: tuple[int, ...], row: tuple[str, str, str]) -> None:
        """One copy per step, of the row that step names in the plan."""
        if step in m.copied:
            raise MalformedMessage(f"a second copy for step {list(step)}")
        named = (self._labels[step[1]], self._directions[step[2]]) if self.planned else row[:2]
        if named != row[:2] or (self._sets and self._sets[step[3]] != row[2]):
            raise MalformedMessage(f"a copy whose row does not match its step {list(step)}")
        m.copied.add(step)

    def _hello(self, m: _Member, hello: Hello) -> None:
        if hello.protocol != PROTOCOL:
            m.report.failure = (
                f"workbench on {m.dest.alias} speaks {hello.protocol!r}, this one {PROTOCOL}: "
                f"install the same version there ({INSTALL_HINT}=={__version__})"
            )
            m.report.failure_exit = int(ExitCode.NOT_FOUND)
            m.done = True  # nothing more it says is read
            _close_stdin(m)
            return
        m.hello = m.report.started = True
        if hello.version != __version__:
            m.report.warnings += (f"{m.dest.alias} runs workbench {hello.version}, this side {__version__}",)
        job = {**self.job, "protocol": PROTOCOL, "client_host": m.dest.alias}
        if self._left and self._cleaner is None:
            job["left_scratches"], self._cleaner = self._left, m.dest.alias
        _send(m, json.dumps(job))
        self.observer.status(f"fleet: {m.dest.alias} logged in (workbench {hello.version})")

    def _check_hello_deadlines(self) -> None:
        now = time.monotonic()
        for m in self.members:
            if not m.hello and not m.ended and not m.done and now > m.deadline:
                m.report.failure = f"{m.dest.alias} did not start workbench within {HELLO_TIMEOUT_S:.0f} s"
                m.done = True  # a late hello is not read
                _close_stdin(m)
                with contextlib.suppress(ProcessLookupError):
                    m.proc.terminate()

    def _release(self) -> None:
        while (released := self.barrier.release()) is not None:
            step, going = released
            now = time.time()
            for m in self.members:
                if m.dest.alias in going:
                    m.go_wall_s = now
                    _send(m, "go")
            if step[0] == COPY_STEP:
                if step[-1] == 0 or len(going) != len(self.barrier.live):
                    self.observer.status(f"fleet: {self._copy_text(step)}: {len(going)} clients copying at once")
            else:
                self.observer.status(f"fleet: {_step_text(step)}: {', '.join(going)}")

    def _copy_text(self, step: tuple[int, ...]) -> str:
        """'http/aiohttp download, set 2' for (COPY_STEP, entry, direction, set, attempt), as the plan names them."""
        _, entry, direction, file_set, _ = step
        if entry < len(self._labels) and direction < len(self._directions):
            return f"{self._labels[entry]} {self._directions[direction]}, set {file_set + 1}"
        return f"copy {step[1:]}"

    def _ended(self, m: _Member) -> None:
        if m.ended:
            return
        m.ended = True
        self.barrier.gone(m.dest.alias)
        try:
            code = m.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            m.proc.kill()
            code = m.proc.wait()
        _drain_stderr(m)
        if m.refused or (m.done and m.report.failure is None):
            return  # said already, or finished
        if m.report.failure is None:
            if not m.hello:
                error = _before_hello(m, code, self.remote)
                m.report.failure, m.report.failure_exit = short(error.one_line(), 2 * SAID_CHARS), int(error.exit_code)
            else:
                last = next((ln for ln in reversed(m.err.lines()) if ln.strip()), f"exit status {code}")
                m.report.failure = f"the session ended mid-run: {short(last.strip(), SAID_CHARS)}"
        elif m.out.unterminated:
            last = next((ln for ln in reversed(m.err.lines()) if ln.strip()), f"exit status {code}")
            m.report.failure += f" ({short(last.strip(), SAID_CHARS)})"
        self.observer.status(f"fleet: {m.dest.alias} stopped: {for_terminal(m.report.failure)}")

    def _end_all(self) -> None:
        """End every session: stdin closed (each member stops as on Ctrl-C and sends its last row), its output read
        until it exits (bounded), then ssh ended. A second Ctrl-C must not cut this short."""
        with signals.held():
            for m in self.members:
                _close_stdin(m)
            deadline = time.monotonic() + END_TIMEOUT_S
            while any(not m.ended for m in self.members) and time.monotonic() < deadline:
                with contextlib.suppress(OSError, ValueError):
                    self._pump(0.5)
                    self._cut_refused()
            for m in self.members:
                if not m.ended:
                    m.report.failure = m.report.failure or "did not end within the time allowed"
                    m.ended = True
                end_ssh(m.proc, 0.1)


def _before_hello(m: _Member, code: int, remote: list[str]) -> WorkbenchError:
    """Why a session ended before its member said hello: no login, no workbench, an old one."""
    text = m.err.text()
    if code == 2 and "No such command" in text:
        return NotFoundError(
            f"workbench on {m.dest.alias} has no fleet-member command (an older version)",
            f"install this version there ({INSTALL_HINT}=={__version__})",
        )
    return ssh_failure(m.dest, code, text, shlex.join(remote))


# ---------------------------------------------------------------- hosts
# C0 but tab (a separator between words, never inside one), DEL and C1: nothing a host, user or option holds,
# and each would reach ssh's argv, and from there the terminal (ESC sequences) or ssh's own parsing.
_INVENTORY_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def read_inventory(path: Path) -> list[Destination]:
    """The client hosts of a HOSTS file: one SSH destination ([user@]host or a ~/.ssh/config alias) per line, or an
    Ansible-style INI inventory's host lines (its first word, `ansible_user=` as the user; `[group]` headers, the
    `:vars` and `:children` sections and comments are skipped). Each host once, in file order."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        # exit 5, as a missing --config or --credentials file (docs/exit-codes.md)
        raise NotFoundError(f"--clients {path} does not exist", "give a file of SSH hosts, one per line") from None
    except OSError as exc:
        raise UsageError(f"--clients {path}: {exc.strerror or exc}", "give a file of SSH hosts, one per line") from None
    except UnicodeDecodeError:
        raise UsageError(f"--clients {path} is not a text file", "give a file of SSH hosts, one per line") from None
    dests: list[Destination] = []
    section = ""
    # Split on newlines only (read_text made CRLF and CR line ends "\n"): str.splitlines also breaks at \v, \f,
    # \x1c-\x1e and \x85, which would cut a line holding one into two host lines instead of refusing it.
    for number, raw in enumerate(text.split("\n"), start=1):
        content = raw.split("#", 1)[0].split(";", 1)[0] if not raw.lstrip().startswith(("#", ";")) else ""
        if _INVENTORY_CONTROL.search(content):
            # Checked on the whole line, before it is stripped or split into words: str.strip() and str.split()
            # take \x1c-\x1f and \x85 for spaces, so they would drop or hide them. Shown as repr: the file's text.
            shown = cut(repr(content.strip(" \t")), 120)
            raise UsageError(
                f"--clients {path} line {number}: {shown} has a control character",
                "host names, users and options are plain text",
            )
        line = content.strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section.endswith((":vars", ":children")):
            continue
        words = line.split()
        host, options = words[0], dict(w.split("=", 1) for w in words[1:] if "=" in w)
        if "[" in host and ":" in host:
            raise UsageError(
                f"--clients {path} line {number}: host ranges like {host!r} are not expanded", "list each host"
            )
        for key in ("ansible_host", "ansible_port"):
            if key in options:
                raise UsageError(
                    f"--clients {path} line {number}: {key}= is not read",
                    "name the host as ssh reaches it, or give its HostName and Port in ~/.ssh/config",
                )
        user = options.get("ansible_user")
        try:
            dest = Destination.parse(f"{user}@{host}" if user and "@" not in host else host)
        except UsageError:
            raise UsageError(
                f"--clients {path} line {number}: {host!r} is not [user@]host", "one host per line"
            ) from None
        if all(d.alias != dest.alias for d in dests):
            dests.append(dest)
    if not dests:
        raise UsageError(f"--clients {path} names no host", "one SSH destination per line, e.g. alice@desk1")
    if len(dests) > MAX_CLIENTS:
        raise UsageError(f"--clients {path} names {len(dests)} hosts", f"at most {MAX_CLIENTS}")
    return dests


# ---------------------------------------------------------------- the run
def fleet_meta(
    reports: Sequence[MemberReport], clients: Sequence[str], at_once: Mapping[str, Baseline]
) -> dict[str, Any]:
    """The run's meta: the first member's (server, target, plan), this controller as the owner, every client's
    host and baseline under `fleet`. No upload token: each member removed its own uploads."""
    first = next((dict(r.meta) for r in reports if r.meta), {})
    first.pop("upload_token", None)
    first.pop("upload_dir", None)
    first["owner"] = procs.owner_record()
    first["controller"] = hostinfo.describe(None)
    first["fleet"] = {
        "clients": list(clients),
        "client_info": {r.host: (r.meta or {}).get("client") for r in reports},
        "baselines": {r.host: r.baseline.to_json() if r.baseline else None for r in reports},
        "together": {r.host: at_once[r.host].to_json() if r.host in at_once else None for r in reports},
        "failed_clients": {r.host: r.failure for r in reports if r.failure},
    }
    return first


def run_fleet(
    dests: Sequence[Destination],
    job: Mapping[str, Any],
    *,
    warmup: int,
    planned: Sequence[tuple[str, str]],
    remote_workbench: str,
    insecure_host_keys: bool,
    recorder: Recorder,
    observer: RunObserver,
    label: str,
    far_host: str,
    link: Mapping[str, Any] | None = None,
    spawn_context: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    sets: Sequence[str] = (),
    rounds: int = 0,
) -> Run:
    """Run the job on every client and store one run: aggregate and per-client rows. The run is recorded however it
    ends (Ctrl-C, SIGTERM, a client failing or sending garbage): what the clients sent is kept.

    The run is in the database from the first scratch directory or row a member reports: each member's scratch
    directory on the server is recorded before its first copy (workbench.core.fleet_scratch), so a later run
    removes what a member could not. The scratch directories earlier fleet runs left go to the first member to
    log in, to remove."""
    from datetime import UTC, datetime

    clients = [d.alias for d in dests]
    started = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    owner = procs.owner_record()
    running: dict[str, Any] = {"started_utc": started, "owner": owner, "fleet": {"clients": clients}}
    saved: list[tuple[str, Result]] = []
    run_id: int | None = None
    left = {item["run_id"]: item for item in fleet_scratch.left_for_members(recorder)}
    left_meta = {rid: meta for rid, meta in recorder.unfinished_runs() if rid in left}

    def begun() -> int:
        nonlocal run_id
        if run_id is None:
            run_id = recorder.begin(running, label, link, None)
        return run_id

    def on_row(host: str, row: Result) -> None:
        recorder.row(begun(), len(saved), replace(row, client_host=host))
        saved.append((host, row))

    def on_scratch(host: str, server: Mapping[str, Any] | None, removed: bool) -> None:
        nonlocal running
        running = fleet_scratch.record(running, host, server, removed)
        recorder.update_meta(begun(), running)

    def on_cleaned(earlier: int, hosts: Sequence[str]) -> None:
        if earlier not in left or not set(hosts) <= set(left[earlier]["scratches"]):
            raise MalformedMessage(f"'cleaned' names scratch directories it was not given (run {earlier})")
        left_meta[earlier] = fleet_scratch.mark_removed(left_meta[earlier], hosts)
        recorder.record_cleanup(earlier, fleet_scratch.cleanup_keys(left_meta[earlier]))

    password_sent = insecure_host_keys and (job.get("login") or {}).get("password") is not None
    controller = Controller(
        dests, job, remote_workbench, insecure_host_keys, observer, on_row, spawn_context=spawn_context,
        planned=planned, on_scratch=on_scratch, on_cleaned=on_cleaned, left_scratches=list(left.values()),
        sets=sets, rounds=rounds,
    )  # fmt: skip
    reports: list[MemberReport] = []
    try:
        reports = controller.run()
    finally:
        # a second Ctrl-C must not lose the rows already here: the run is put together and recorded first
        with signals.held():
            if not reports:
                reports = [m.report for m in controller.members] or [
                    MemberReport(c, failure="never started") for c in clients
                ]
            together, at_once = together_baseline(reports)
            rtts = [r.baseline.rtt_ms for r in reports if r.baseline is not None and r.baseline.rtt_ms]
            together = replace(together, rtt_ms=statistics.median(rtts) if rtts else None)  # each client's, alone
            rows = fleet_rows(reports, warmup, planned)
            meta = {"started_utc": started, **fleet_meta(reports, clients, at_once)}
            meta["started_utc"] = started
            meta["finished_utc"] = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            meta["owner"] = owner
            meta["fleet"]["together_up_bytes_per_s"] = together.up_bytes_per_s
            meta["fleet"]["together_down_bytes_per_s"] = together.down_bytes_per_s
            meta["fleet"]["scratches"] = running["fleet"].get("scratches", {})
            meta = fleet_scratch.settled(meta)
            run_id = begun()
            recorder.update_meta(run_id, meta)
            recorder.baseline(run_id, together)
            warnings = [f"{host} failed: {why}" for host, why in meta["fleet"]["failed_clients"].items()]
            if password_sent:
                warnings.append(INSECURE_PASSWORD)
            explanation = _explained(rows, reports, together, link, far_host, warnings)
            run = Run(run_id, meta, together, tuple(rows), link=link, warnings=tuple(warnings), explanation=explanation)
            recorder.finish(run)
    if not any(r.started for r in reports):
        # no client ran anything: one line saying why (the first client's reason), as `run` says it for one host
        first = reports[0]
        error = WorkbenchError(f"no client started; {for_terminal(first.failure or 'none answered')}")
        error.exit_code = ExitCode(first.failure_exit or ExitCode.NETWORK)
        raise error
    return run


INSECURE_PASSWORD = (
    "the server's password went to every client without checking its host key (--insecure-host-keys): "
    "whoever answered as a client has it"
)


def _explained(
    rows: Sequence[Result],
    reports: Sequence[MemberReport],
    together: Baseline,
    link: Mapping[str, Any] | None,
    far_host: str,
    warnings: list[str],
) -> Any:
    """The fleet's explanation, its notes added to `warnings`; None, said in a warning, if it cannot be made:
    the rows the clients sent are recorded either way."""
    try:
        explanation = explain_fleet(rows, reports, together, link, far_host)
    except (ArithmeticError, ValueError, TypeError, KeyError) as exc:
        warnings.append(f"the rows could not be explained: {short(str(exc))}")
        return None
    warnings += list(explanation.notes)  # each client's own notes and warnings among them, each once
    return explanation


def planned_pairs(plan: Any) -> list[tuple[str, str]]:
    """(client label, direction) of every row the plan makes: a client that never starts fails each."""
    return [(e.label, d) for e in plan.entries for d in plan.directions]


def planned_sets(plan: Any) -> list[str]:
    """The names of the plan's file sets, in the order a member copies them (its manifest's: sizes, then small)."""
    from workbench.shared.sizes import format_size

    return [format_size(size) for size in plan.sizes] + [small.name for small in plan.small_sets]


def url_job(text: str, settings: Settings) -> tuple[dict, Any]:
    """The members' job for the server at URL `text`, and the checked plan (its clients, directions, copies).

    The login is found here, as `run URL` finds it (WORKBENCH_PASSWORD, ~/.netrc, the keyring, the prompt), and
    travels to each member on its SSH channel only. An SSH URL without a password leaves each client to log in
    with its own keys and agent.
    """
    from workbench.core import stock
    from workbench.core.config import url_plan
    from workbench.shared import login as login_mod
    from workbench.shared import urls as urls_mod

    plan = url_plan(settings)
    url = urls_mod.parse(text)
    entries = stock.check_clients(url, plan.entries)
    iperf3 = settings["iperf3"]
    if iperf3 is not None:
        urls_mod.parse_host_port(str(iperf3))
    who = login_mod.resolve(url, prompt=True)
    login: dict[str, Any] = {}
    if who.password is not None:
        login["password"] = who.password
    if who.user_from not in ("the URL", "the local user", "ssh's configuration"):
        login["user"] = who.user  # $WORKBENCH_USER or ~/.netrc here: the members may have neither
    # the members get the config's values as settings: they count as given (a config's --protocols is kept)
    job = {
        "settings": _jsonable(settings.for_members()),
        "explicit": sorted(settings.given),
        "url": text,
        "login": login,
        "iperf3": iperf3,
    }
    return job, replace(plan, entries=entries)


def _jsonable(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in settings.items()}


def served_job(settings: Settings, hello: Mapping[str, Any], host: str) -> dict[str, Any]:
    """The members' job for servers workbench started (`servers up`'s state, as served_hello reads it)."""
    return {
        "settings": _jsonable(settings.for_members()),
        "explicit": [],
        "served": {**hello, "host": host},
    }
