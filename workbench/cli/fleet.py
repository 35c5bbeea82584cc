"""`workbench fleet --clients HOSTS URL...`: the same plan on every client host at once, over SSH, one run.

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
import os
import select
import shlex
import signal
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.cli.via_ssh import (
    INSTALL_HINT,
    Destination,
    _Lines,
    _ssh_failure,
    end_ssh,
    main_thread,
    remote_shell_command,
    ssh_argv,
)
from workbench.core.fleet import (
    PROTOCOL,
    Barrier,
    CopyEvent,
    MemberReport,
    explain_fleet,
    fleet_rows,
    together_baseline,
)
from workbench.core.observe import COPY_STEP, STEP_BASELINE, STEP_PREPARE, TOGETHER_STEP, Recorder, RunObserver
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.shared import hostinfo, procs
from workbench.shared.errors import ExitCode, NotFoundError, UsageError, WorkbenchError

HELLO_TIMEOUT_S = 120.0  # ssh login and the member's start (a Python import on a slow host)
END_TIMEOUT_S = 60.0  # for the members to finish their last row and remove their uploads after the end
MAX_CLIENTS = 64
PING_S = 10.0  # a line to every member this often (see fleet_member.SILENCE_S)
STDERR_KEEP = 40  # lines of a member's stderr kept to explain its failure


@dataclass
class _Member:
    """One client's SSH session and what it sent."""

    dest: Destination
    proc: subprocess.Popen[bytes]
    report: MemberReport
    lines: _Lines
    stderr: list[str] = field(default_factory=list)
    stderr_ended: bool = False
    hello: bool = False
    done: bool = False  # it said its run ended
    ended: bool = False  # its session closed
    go_wall_s: float = 0.0
    deadline: float = 0.0


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


def _close_stdin(member: _Member) -> None:
    with contextlib.suppress(OSError, ValueError):
        assert member.proc.stdin is not None
        member.proc.stdin.close()


def _read_stderr(member: _Member) -> None:
    assert member.proc.stderr is not None
    if member.stderr_ended:
        return
    with contextlib.suppress(OSError, BlockingIOError):
        chunk = os.read(member.proc.stderr.fileno(), 65536)
        if not chunk:
            member.stderr_ended = True  # select() would report it readable forever
            return
        member.stderr.extend(chunk.decode(errors="replace").splitlines())
        del member.stderr[:-STDERR_KEEP]


def _step_text(step: tuple[int, ...]) -> str:
    return {
        STEP_PREPARE: "preparing test files",
        STEP_BASELINE: "raw TCP alone",
        (TOGETHER_STEP, 0): "raw TCP up, every client at once",
        (TOGETHER_STEP, 1): "raw TCP down, every client at once",
    }.get(step, "copy")


class Controller:
    """The fleet's sessions from login to end; `run()` returns every client's report."""

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
    ) -> None:
        self.dests = list(dests)
        self.job = dict(job)
        self.remote = remote_command(remote_workbench)
        self.insecure = insecure_host_keys
        self.observer = observer
        self.on_row = on_row
        self.spawn_context = spawn_context
        self.planned = list(planned)  # (label, direction) in plan order: names for the status lines
        self.members: list[_Member] = []
        self.barrier = Barrier([d.alias for d in self.dests])

    def run(self) -> list[MemberReport]:
        """Every session started, the plan run to its end on every client; also on failure or Ctrl-C each session
        is ended and what its member sent is kept (the reports)."""
        try:
            with self.spawn_context():
                for dest in self.dests:
                    proc = _start(dest, self.remote, self.insecure)
                    assert proc.stdout is not None
                    self.members.append(
                        _Member(dest, proc, MemberReport(dest.alias), _Lines(proc.stdout.fileno()),
                                deadline=time.monotonic() + HELLO_TIMEOUT_S)
                    )  # fmt: skip
            self.observer.status(f"fleet: logging in to {len(self.members)} clients…")
            pinged = time.monotonic()
            while any(not m.ended for m in self.members):
                self._pump(1.0)
                self._check_hello_deadlines()
                self._release()
                if time.monotonic() - pinged > PING_S:
                    pinged = time.monotonic()
                    for m in self.members:
                        if m.hello and not m.ended and not m.done:
                            _send(m, "ping")  # a member waiting at a step gives up after a minute of silence
        finally:
            self._end_all()
        return [m.report for m in self.members]

    # -- the loop ------------------------------------------------------------------------------------------
    def _pump(self, timeout_s: float) -> None:
        live = [m for m in self.members if not m.ended]
        fds: dict[int, tuple[_Member, str]] = {}
        for m in live:
            assert m.proc.stdout is not None and m.proc.stderr is not None
            fds[m.proc.stdout.fileno()] = (m, "out")
            if not m.proc.stderr.closed and not m.stderr_ended:
                fds[m.proc.stderr.fileno()] = (m, "err")
        if any(m.lines.buffer and b"\n" in m.lines.buffer for m in live):
            timeout_s = 0
        ready, _, _ = select.select(list(fds), [], [], timeout_s)
        for fd in ready:
            member, which = fds[fd]
            if which == "err":
                _read_stderr(member)
        for m in live:
            while True:
                # a line already read, or one more from a readable pipe (never blocking: deadline now)
                line = m.lines.read(time.monotonic() + (0.0 if m.proc.stdout.fileno() not in ready else 0.01))  # type: ignore[union-attr]
                if line is None:
                    break
                self._event(m, line)
            if m.lines.closed and b"\n" not in m.lines.buffer:
                self._ended(m)

    def _event(self, m: _Member, line: str) -> None:
        try:
            data = json.loads(line)
        except ValueError:
            m.stderr.append(line)  # not ours: a far login script's chatter
            return
        if not isinstance(data, dict):
            return
        event = data.get("event")
        report = m.report
        if event == "hello":
            self._hello(m, data)
        elif event == "wait":
            self.barrier.wait(m.dest.alias, [int(x) for x in data["step"]])
        elif event == "copy":
            # kept at once, named by its row: a client that stops mid-row still counted in the rounds it finished
            label, direction, file_set = (str(x) for x in data["row"])
            started = m.go_wall_s + float(data["started_after_go_s"])
            step = tuple(int(x) for x in data["step"])
            sample = _sample(data["sample"])
            report.copies.append(CopyEvent(m.dest.alias, step, label, direction, file_set, started, sample))
        elif event == "row":
            row = Result.from_json(data["row"])
            report.rows.append(row)
            self.on_row(m.dest.alias, row)
        elif event == "baseline":
            report.baseline = Baseline.from_json(data["baseline"])
        elif event == "together":
            if data.get("error"):
                m.report.warnings += (f"raw TCP {data['direction']} with every client at once: {data['error']}",)
            else:
                started = m.go_wall_s + float(data["started_after_go_s"])
                report.together[str(data["direction"])] = (started, float(data["seconds"]), int(data["bytes"]))
        elif event == "begin":
            report.meta = data.get("meta")
        elif event == "finish":
            report.warnings = tuple(data.get("warnings") or ())
        elif event == "done":
            m.done = True
            _close_stdin(m)  # the member ends: its session closes after it
        elif event == "error":
            report.failure = str(data.get("message") or "failed")

    def _hello(self, m: _Member, data: Mapping[str, Any]) -> None:
        if data.get("protocol") != PROTOCOL:
            m.report.failure = (
                f"workbench on {m.dest.alias} speaks {data.get('protocol')!r}, this one {PROTOCOL}: "
                f"install the same version there ({INSTALL_HINT}=={__version__})"
            )
            m.report.failure_exit = int(ExitCode.NOT_FOUND)
            _close_stdin(m)
            return
        m.hello = m.report.started = True
        if data.get("version") != __version__:
            m.report.warnings += (f"{m.dest.alias} runs workbench {data.get('version')}, this side {__version__}",)
        _send(m, json.dumps({**self.job, "protocol": PROTOCOL, "client_host": m.dest.alias}))
        self.observer.status(f"fleet: {m.dest.alias} logged in (workbench {data.get('version')})")

    def _check_hello_deadlines(self) -> None:
        now = time.monotonic()
        for m in self.members:
            if not m.hello and not m.ended and now > m.deadline:
                m.report.failure = f"{m.dest.alias} did not start workbench within {HELLO_TIMEOUT_S:.0f} s"
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
        labels = list(dict.fromkeys(label for label, _ in self.planned))
        directions = list(dict.fromkeys(d for _, d in self.planned))
        if entry < len(labels) and direction < len(directions):
            return f"{labels[entry]} {directions[direction]}, set {file_set + 1}"
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
        _read_stderr(m)
        if m.done:
            return
        if m.report.failure is None:
            if not m.hello:
                error = _before_hello(m, code, self.remote)
                m.report.failure, m.report.failure_exit = error.one_line(), int(error.exit_code)
            else:
                last = next((ln for ln in reversed(m.stderr) if ln.strip()), f"exit status {code}")
                m.report.failure = f"the session ended mid-run: {last.strip()}"
        self.observer.status(f"fleet: {m.dest.alias} stopped: {m.report.failure}")

    def _end_all(self) -> None:
        """End every session: stdin closed (each member stops as on Ctrl-C and sends its last row), its output read
        until it exits (bounded), then ssh ended. A second Ctrl-C must not cut this short."""
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread() else None
        try:
            for m in self.members:
                _close_stdin(m)
            deadline = time.monotonic() + END_TIMEOUT_S
            while any(not m.ended for m in self.members) and time.monotonic() < deadline:
                with contextlib.suppress(OSError, ValueError):
                    self._pump(0.5)
            for m in self.members:
                if not m.ended:
                    m.report.failure = m.report.failure or "did not end within the time allowed"
                    m.ended = True
                end_ssh(m.proc, 0.1)
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)


def _before_hello(m: _Member, code: int, remote: list[str]) -> WorkbenchError:
    """Why a session ended before its member said hello: no login, no workbench, an old one."""
    text = "\n".join(m.stderr)
    if code == 2 and "No such command" in text:
        return NotFoundError(
            f"workbench on {m.dest.alias} has no fleet-member command (an older version)",
            f"install this version there ({INSTALL_HINT}=={__version__})",
        )
    return _ssh_failure(m.dest, code, text, shlex.join(remote))


def _sample(data: Mapping[str, Any]) -> Sample:
    known = {k: data.get(k) for k in Sample.__dataclass_fields__ if k in data and k != "tcp"}
    known["intervals"] = tuple(data.get("intervals") or ())
    return Sample(**known)


# ---------------------------------------------------------------- hosts
def read_inventory(path: Path) -> list[Destination]:
    """The client hosts of a HOSTS file: one SSH destination ([user@]host or a ~/.ssh/config alias) per line, or an
    Ansible-style INI inventory's host lines (its first word, `ansible_user=` as the user; `[group]` headers, the
    `:vars` and `:children` sections and comments are skipped). Each host once, in file order."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"--clients {path}: {exc.strerror or exc}", "give a file of SSH hosts, one per line") from None
    except UnicodeDecodeError:
        raise UsageError(f"--clients {path} is not a text file", "give a file of SSH hosts, one per line") from None
    dests: list[Destination] = []
    section = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].split(";", 1)[0].strip() if not raw.lstrip().startswith(("#", ";")) else ""
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
    first["owner"] = {"pid": os.getpid(), "start_ticks": procs.start_ticks(os.getpid())}
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
) -> Run:
    """Run the job on every client and store one run: aggregate and per-client rows. The run is recorded however it
    ends (Ctrl-C, SIGTERM, a client failing): what the clients sent is kept."""
    from datetime import UTC, datetime

    clients = [d.alias for d in dests]
    started = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    saved: list[tuple[str, Result]] = []
    run_id: int | None = None

    def on_row(host: str, row: Result) -> None:
        nonlocal run_id
        if run_id is None:
            run_id = recorder.begin({"started_utc": started, "fleet": {"clients": clients}}, label, link, None)
        recorder.row(run_id, len(saved), replace(row, client_host=host))
        saved.append((host, row))

    controller = Controller(
        dests, job, remote_workbench, insecure_host_keys, observer, on_row, spawn_context=spawn_context, planned=planned
    )
    reports: list[MemberReport] = []
    try:
        reports = controller.run()
    finally:
        # a second Ctrl-C must not lose the rows already here: the run is put together and recorded first
        with _sigint_ignored():
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
            meta["fleet"]["together_up_bytes_per_s"] = together.up_bytes_per_s
            meta["fleet"]["together_down_bytes_per_s"] = together.down_bytes_per_s
            if run_id is None:
                run_id = recorder.begin(meta, label, link, None)
            else:
                recorder.update_meta(run_id, meta)
            recorder.baseline(run_id, together)
            explanation = explain_fleet(rows, reports, together, link, far_host)
            warnings = [f"{host} failed: {why}" for host, why in meta["fleet"]["failed_clients"].items()]
            warnings += list(explanation.notes)  # each client's own notes and warnings among them, each once
            run = Run(run_id, meta, together, tuple(rows), link=link, warnings=tuple(warnings), explanation=explanation)
            recorder.finish(run)
    if not any(r.started for r in reports):
        # no client ran anything: one line saying why (the first client's reason), as `run` says it for one host
        first = reports[0]
        error = WorkbenchError(f"no client started; {first.failure or 'none answered'}")
        error.exit_code = ExitCode(first.failure_exit or ExitCode.NETWORK)
        raise error
    return run


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread() else None
    try:
        yield
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def planned_pairs(plan: Any) -> list[tuple[str, str]]:
    """(client label, direction) of every row the plan makes: a client that never starts fails each."""
    return [(e.label, d) for e in plan.entries for d in plan.directions]


def jsonable_settings(values: Mapping[str, Any], config: Path | None, explicit: set[str]) -> dict[str, Any]:
    """The plan's settings as the members get them: the config file's under the typed ones, nothing of this host
    (its files directory, a target or credentials file)."""
    from workbench.core.config import load_toml
    from workbench.core.fleet_member import SETTINGS_NOT_SENT

    merged = dict(values)
    if config is not None:
        for key, value in load_toml(config).items():
            if key not in explicit:
                merged[key] = value
    return {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in merged.items()
        if k not in SETTINGS_NOT_SENT and v is not None
    }


def url_job(text: str, values: Mapping[str, Any], config: Path | None, explicit: set[str]) -> tuple[dict, Any]:
    """The members' job for the server at URL `text`, and the checked plan (its clients, directions, copies).

    The login is found here, as `run URL` finds it (WORKBENCH_PASSWORD, ~/.netrc, the keyring, the prompt), and
    travels to each member on its SSH channel only. An SSH URL without a password leaves each client to log in
    with its own keys and agent.
    """
    from workbench.core import stock
    from workbench.shared import login as login_mod
    from workbench.shared import urls as urls_mod

    plan = stock.url_plan(values, config=config, explicit=explicit)
    url = urls_mod.parse(text)
    entries = stock.check_clients(url, plan.entries)
    iperf3 = values.get("iperf3")
    if iperf3 is not None:
        urls_mod.parse_host_port(str(iperf3))
    who = login_mod.resolve(url, prompt=True)
    login: dict[str, Any] = {}
    if who.password is not None:
        login["password"] = who.password
    if who.user_from not in ("the URL", "the local user", "ssh's configuration"):
        login["user"] = who.user  # $WORKBENCH_USER or ~/.netrc here: the members may have neither
    from workbench.core.config import load_toml

    # the members get the config's values as settings: they count as given (a config's --protocols is kept)
    given = explicit | (set(load_toml(config)) if config is not None else set())
    job = {
        "settings": jsonable_settings(values, config, explicit),
        "explicit": sorted(given),
        "url": text,
        "login": login,
        "iperf3": iperf3,
    }
    return job, replace(plan, entries=entries)


def served_job(settings: Mapping[str, Any], hello: Mapping[str, Any], host: str) -> dict[str, Any]:
    """The members' job for servers workbench started (`servers up`'s state, as served_hello reads it)."""
    return {
        "settings": {k: v for k, v in jsonable_settings(settings, None, set()).items()},
        "explicit": [],
        "served": {**hello, "host": host},
    }


def fleet_urls(
    clients: Path,
    texts: Sequence[str],
    values: Mapping[str, Any],
    config: Path | None,
    explicit: set[str],
    remote_workbench: str,
    present: Callable[[int, Callable[[Recorder, RunObserver], Run]], Run],
    label: str | None,
) -> list[Run]:
    """`workbench fleet`: one fleet run per URL, every input checked before the first login; `present(index, start)`
    shows and records each (the CLI's present_run)."""
    from workbench.shared import urls as urls_mod

    dests = read_inventory(clients)
    remote_command(remote_workbench)
    jobs = [url_job(text, values, config, explicit) for text in texts]
    insecure = not values.get("verify_host_keys", True)
    runs = []
    for index, (text, (job, plan)) in enumerate(zip(texts, jobs, strict=True), start=1):
        url = urls_mod.parse(text)
        name = label or f"fleet {url.display()}"

        def start(recorder: Recorder, observer: RunObserver, job: dict = job, plan: Any = plan, name: str = name,
                  host: str = url.host) -> Run:  # fmt: skip
            return run_fleet(
                dests, {**job, "label": name}, warmup=plan.warmup, planned=planned_pairs(plan),
                remote_workbench=remote_workbench, insecure_host_keys=insecure, recorder=recorder,
                observer=observer, label=name, far_host=host,
            )  # fmt: skip

        runs.append(present(index, start))
    return runs


def fleet_lab(request: Any, clients: int, recorder: Recorder, observer: RunObserver, label: str | None) -> Run:
    """`lab --clients N`: the lab's client hosts run the fleet over SSH against the lab's servers, as `fleet` runs
    against a real server: their sshds, host keys verified, the job on each session's stdin."""
    from workbench.cli.via_ssh import served_hello
    from workbench.lab.run import run_fleet_lab, validate_request

    validate_request(request)
    plan = _lab_plan(request.settings)

    def drive(lab: Any, hosts: Any, state: Path, link: dict[str, Any]) -> Run:
        job = served_job(request.settings, served_hello(state), lab.server_addr)
        name = label or f"lab {request.preset} fleet of {clients}"
        with _ssh_config(hosts.ssh_config):
            return run_fleet(
                read_inventory(hosts.hosts_file), {**job, "label": name}, warmup=plan.warmup,
                planned=planned_pairs(plan), remote_workbench=hosts.remote_workbench, insecure_host_keys=False,
                recorder=recorder, observer=observer, label=name, far_host=lab.server_addr, link=link,
                spawn_context=hosts.in_switch,
            )  # fmt: skip

    return run_fleet_lab(request, clients, drive, observer)


def _lab_plan(settings: Mapping[str, Any]) -> Any:
    """The plan's shape (clients, directions, copies) as the members will build it; its target is a placeholder."""
    from workbench.core.config import draft_plan
    from workbench.shared.credentials import Credentials
    from workbench.shared.target import Target

    _, _, complete = draft_plan({k: v for k, v in settings.items() if k not in ("host", "target", "credentials")})
    return complete(Target(host="127.0.0.1", credentials=Credentials("-", "-")))


@contextlib.contextmanager
def _ssh_config(path: Path) -> Iterator[None]:
    """Every ssh this process starts reads `path` (WORKBENCH_SSH_CONFIG), for the block."""
    old = os.environ.get("WORKBENCH_SSH_CONFIG")
    os.environ["WORKBENCH_SSH_CONFIG"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("WORKBENCH_SSH_CONFIG", None)
        else:
            os.environ["WORKBENCH_SSH_CONFIG"] = old
