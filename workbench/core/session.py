"""Where a run starts: every way of starting one, as one session of one or more runs.

A session is which far host (`workbench serve` at --host/--target, one started over SSH, servers given by URL,
a lab's servers, a lab's stock daemons), which clients (this host, a fleet of client hosts over SSH, a lab's
client hosts) and how the runs go: each is shown and recorded by the command line's `Screen`, a run that cannot
start is said in one line while the others go on (where a session has several), and the exit codes combine
once: the first failure's, ROWS_FAILED when rows failed, 0 when every run's rows ran.

The commands build their settings (workbench.core.settings), pick a session (`for_run`, `for_fleet`, `for_lab`),
call `start` and render; everything between is here. The lab's own work (building its hosts and link, its stock
daemons, a story's variants) is the lab's (workbench.lab.run's LAB, a `LabSide`): the command line hands it
over, since the core sits below the lab.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workbench.core.observe import Recorder, RunObserver
from workbench.core.results import Result, Run
from workbench.core.settings import Settings
from workbench.shared.errors import ExitCode, UsageError, WorkbenchError

# One run, started inside the screen's recorder and progress display: start(recorder, observer) -> the run.
Start = Callable[[Recorder, RunObserver], Run]


@dataclass(frozen=True)
class Part:
    """One run of a session, as the screen shows it and names its files."""

    index: int = 1  # of `count`, from 1: files PATH-1.json, PATH-2.json, ... when count > 1
    count: int = 1
    name: str | None = None  # a stock server's scheme, a scenario's variant: files PATH-NAME.json instead
    title: str | None = None  # what a line about it names it by (a URL, a variant)
    banner: str | None = None  # shown before it starts
    rule: bool = False  # the banner as a rule across the screen (a story's variants)


class Screen(Protocol):
    """Where a session's runs are shown and recorded (the command line's: rich, the results database, the files
    asked for)."""

    def check_files(self, parts: Sequence[Part]) -> None:
        """Refuse, before the first run, a file of any part this process cannot write."""
        ...

    def present(self, part: Part, start: Start) -> Run:
        """Run `start` inside a recorder and a progress display; show the table, write the files, return the run."""
        ...

    def status(self) -> contextlib.AbstractContextManager[RunObserver]:
        """Status lines outside any one run (a stock lab's own)."""
        ...

    def heading(self, part: Part) -> None:
        """The part's banner, before it starts."""
        ...

    def say(self, line: str) -> None:
        """A line quoting a far host (its name, an address, a directory): shown as text."""
        ...

    def warn(self, line: str) -> None: ...

    def could_not(self, part: Part, error: WorkbenchError) -> None:
        """A run of several that could not run: the others go on."""
        ...

    def rows_failed(self, run: Run, failed: Sequence[Result]) -> None:
        """A run some of whose rows failed or did not verify."""
        ...


# A fleet lab's drive(lab, client hosts, the servers' state directory, the link document): runs the fleet.
DriveFleet = Callable[[Any, Any, Path, dict[str, Any]], Run]


class LabSide(Protocol):
    """What a lab session asks of the lab (workbench.lab.run.LAB). A request is the lab's LabRequest."""

    def request(self, settings: Settings) -> Any:
        """The lab `workbench lab`'s settings ask for."""
        ...

    def validate(self, request: Any) -> None:
        """Every input of the request checked, without root and before any namespace."""
        ...

    def run(self, request: Any, recorder: Recorder, observer: RunObserver, label: str | None) -> Run:
        """Build the lab, run the comparison with workbench's servers, tear it down."""
        ...

    def run_stock(
        self, request: Any, present: Callable[[str, Start], Run | None], observer: RunObserver, label: str | None
    ) -> list[Run]:
        """Build the lab with stock daemons, one run per daemon's URL through `present(scheme, start)`."""
        ...

    def run_fleet(self, request: Any, clients: int, drive: DriveFleet, observer: RunObserver) -> Run:
        """Build the lab with `clients` client hosts; `drive` runs the fleet over SSH."""
        ...

    def variants(self, name: str, settings: Settings, quick: bool) -> list[tuple[str, Any]]:
        """A story's variants as (name, request), the settings typed beside it kept."""
        ...


@dataclass
class Outcome:
    """What a session ran: its runs (a scenario's by variant too) and the exit code they combine to."""

    runs: list[Run] = field(default_factory=list)
    by_name: dict[str, Run] = field(default_factory=dict)
    codes: list[int] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The first failure's code once all ran (ROWS_FAILED for a run whose rows failed), else 0."""
        return self.codes[0] if self.codes else 0

    def ran(self, run: Run, screen: Screen, name: str | None = None) -> None:
        from workbench.core.runner import failed_rows

        self.runs.append(run)
        if name is not None:
            self.by_name[name] = run
        failed = failed_rows(run)
        if failed:
            screen.rows_failed(run, failed)
            self.codes.append(int(ExitCode.ROWS_FAILED))

    def could_not(self, part: Part, error: WorkbenchError, screen: Screen) -> None:
        screen.could_not(part, error)
        self.codes.append(int(error.exit_code))


# ---------------------------------------------------------------- the sessions
@dataclass(frozen=True)
class Served:
    """`run --host/--target`: a `workbench serve` already running."""


@dataclass(frozen=True)
class ViaSsh:
    """`run --via-ssh [USER@]HOST`: its servers started over SSH for this run only."""

    destination: str
    remote_workbench: str = "workbench"


@dataclass(frozen=True)
class Urls:
    """`run URL...`: servers workbench did not start, one run each."""

    urls: tuple[str, ...]


@dataclass(frozen=True)
class Fleet:
    """`fleet --clients HOSTS URL...`: every client host at once over SSH, one run per URL."""

    clients: Path
    urls: tuple[str, ...]
    remote_workbench: str = "workbench"


@dataclass(frozen=True)
class Lab:
    """`lab`: two emulated hosts and workbench's servers."""

    request: Any
    side: LabSide


@dataclass(frozen=True)
class StockLab:
    """`lab --servers stock`: the lab's server host runs stock daemons, each measured by URL, one run each."""

    request: Any
    side: LabSide


@dataclass(frozen=True)
class FleetLab:
    """`lab --clients N`: N client hosts run the fleet over SSH against the lab's servers."""

    request: Any
    clients: int
    side: LabSide


@dataclass(frozen=True)
class Scenario:
    """`lab --scenario NAME`: a published story's variants, one lab run each ("list": none, the stories listed)."""

    name: str
    quick: bool
    side: LabSide


Session = Served | ViaSsh | Urls | Fleet | Lab | StockLab | FleetLab | Scenario


def for_run(
    settings: Settings, urls: Sequence[str] = (), via_ssh: str | None = None, remote_workbench: str = "workbench"
) -> Session:
    """`workbench run`'s session: by URL, over SSH, or a `workbench serve` (each refuses the others' flags)."""
    typed = set(settings.typed)
    if via_ssh is not None:
        _check_via_ssh_flags(typed, urls)
        return ViaSsh(via_ssh, remote_workbench)
    if urls:
        _check_url_flags(typed)
        return Urls(tuple(urls))
    if "iperf3" in typed:
        raise UsageError(
            "--iperf3 is for servers given by URL", "a host running 'workbench serve' has its own iperf3, used as is"
        )
    return Served()


def for_fleet(settings: Settings, clients: Path, urls: Sequence[str], remote_workbench: str = "workbench") -> Session:
    """`workbench fleet`'s session: the URLs' servers, from every client host."""
    _check_url_flags(set(settings.typed))
    return Fleet(clients, tuple(urls), remote_workbench)


def for_lab(settings: Settings, side: LabSide) -> Session:
    """`workbench lab`'s session, from its --scenario, --clients, --servers and --quick; `side` is the lab's."""
    scenario, quick, clients = settings["scenario"], settings["quick"], settings["clients"]
    if scenario is not None:
        if clients:
            raise UsageError("--scenario replays a story of one client", "drop --clients, or --scenario")
        return Scenario(scenario, quick, side)
    if quick:
        raise UsageError("--quick is the reduced form of a --scenario", "add --scenario NAME, or drop --quick")
    request = side.request(settings)
    if clients:
        return FleetLab(request, clients, side)
    return StockLab(request, side) if settings["servers"] == "stock" else Lab(request, side)


def _check_url_flags(typed: set[str]) -> None:
    """URLs name the far host and find their own login: --host, --target and --credentials are another mode."""
    for name in ("host", "target", "credentials"):
        if name in typed:
            raise UsageError(
                f"--{name} and server URLs are two ways to name the far host: give one",
                "a URL's password comes from WORKBENCH_PASSWORD, ~/.netrc, the OS keyring or the prompt"
                if name == "credentials"
                else f"drop --{name} to run against the URLs, or the URLs to run against 'workbench serve'",
            )


def _check_via_ssh_flags(typed: set[str], urls: Sequence[str]) -> None:
    """--via-ssh names the far host and brings its own login: --host, --target, --credentials and URLs cannot
    say it too."""
    if urls:
        raise UsageError("--via-ssh and server URLs are two ways to name the far host: give one", "drop one of them")
    for name in ("host", "target", "credentials"):
        if name in typed:
            raise UsageError(
                f"--via-ssh and --{name} both name the far host: give one",
                f"drop --{name}: --via-ssh starts the far servers and takes their target and login over SSH",
            )


def start(session: Session, settings: Settings, screen: Screen, label: str | None = None) -> Outcome:
    """Run the session: every input checked before the first run, each run shown and recorded by `screen`; what
    ran and the exit code it combines to. A failure that stops a session of one run is raised."""
    outcome = Outcome()
    if isinstance(session, Served):
        _served(settings, screen, label, outcome)
    elif isinstance(session, ViaSsh):
        _via_ssh(session, settings, screen, label, outcome)
    elif isinstance(session, Urls):
        _urls(session, settings, screen, label, outcome)
    elif isinstance(session, Fleet):
        _fleet(session, settings, screen, label, outcome)
    elif isinstance(session, Lab):
        _lab(session, screen, label, outcome)
    elif isinstance(session, StockLab):
        _stock_lab(session, screen, label, outcome)
    elif isinstance(session, FleetLab):
        _fleet_lab(session, screen, label, outcome)
    else:
        _scenario(session, settings, screen, label, outcome)
    return outcome


# ---------------------------------------------------------------- one far host, this client
def _served(settings: Settings, screen: Screen, label: str | None, outcome: Outcome) -> None:
    from workbench.core import runner
    from workbench.core.config import build_plan

    plan = build_plan(settings)
    run = screen.present(Part(), lambda recorder, observer: runner.execute(plan, recorder, observer, label=label))
    outcome.ran(run, screen)


def _via_ssh(session: ViaSsh, settings: Settings, screen: Screen, label: str | None, outcome: Outcome) -> None:
    """The far servers started over SSH, the run, the far servers brought down however it ends."""
    from workbench.core import runner
    from workbench.core.config import draft_plan
    from workbench.core.far_servers import far_servers

    complete = draft_plan(settings)  # bad input: refused before login
    insecure = bool(settings["insecure_host_keys"])
    with far_servers(session.destination, session.remote_workbench, insecure, screen.say) as target:
        plan = complete(target)
        run = screen.present(Part(), lambda recorder, observer: runner.execute(plan, recorder, observer, label=label))
    outcome.ran(run, screen)


def _urls(session: Urls, settings: Settings, screen: Screen, label: str | None, outcome: Outcome) -> None:
    """One run per URL. Every URL and the settings are checked before the first run; with several, a run that
    fails (the host does not answer, the login is refused) is said in one line and the next URL runs."""
    from workbench.core import runner, stock
    from workbench.core.config import url_plan
    from workbench.shared import urls as urls_mod

    plan = url_plan(settings)
    parsed = [urls_mod.parse(text) for text in session.urls]
    for url in parsed:
        stock.check_clients(url, plan.entries)
    iperf3 = settings["iperf3"]
    if iperf3 is not None:
        urls_mod.parse_host_port(str(iperf3))
    count = len(parsed)
    parts = [
        Part(index, count, title=url.display(), banner=f"{url.display()} ({index} of {count})" if count > 1 else None)
        for index, url in enumerate(parsed, start=1)
    ]
    screen.check_files(parts)  # run.json, or run-1.json, run-2.json, ...
    for text, part in zip(session.urls, parts, strict=True):
        screen.heading(part)
        try:
            url_run_plan, far = stock.prepare(text, plan, prompt=True, iperf3=iperf3)
            done = screen.present(part, functools.partial(runner.execute, url_run_plan, far=far, label=label))
        except WorkbenchError as exc:
            if count == 1:
                raise
            outcome.could_not(part, exc, screen)
            continue
        outcome.ran(done, screen)


# ---------------------------------------------------------------- a fleet of clients
def _fleet(session: Fleet, settings: Settings, screen: Screen, label: str | None, outcome: Outcome) -> None:
    """One fleet run per URL, every input checked before the first login."""
    from workbench.core.fleet_controller import (
        INSECURE_PASSWORD,
        planned_pairs,
        planned_sets,
        read_inventory,
        remote_command,
        run_fleet,
        url_job,
    )
    from workbench.shared import urls as urls_mod

    count = len(session.urls)
    parts = [Part(index, count) for index in range(1, count + 1)]
    screen.check_files(parts)
    dests = read_inventory(session.clients)
    remote_command(session.remote_workbench)
    jobs = [url_job(text, settings) for text in session.urls]
    insecure = bool(settings["insecure_host_keys"])
    if insecure and any((job.get("login") or {}).get("password") is not None for job, _ in jobs):
        # the one thing a client's host key protects here: the server's password goes to whoever answers
        screen.warn(INSECURE_PASSWORD)
    for part, text, (job, plan) in zip(parts, session.urls, jobs, strict=True):
        url = urls_mod.parse(text)
        name = label or f"fleet {url.display()}"

        def one(recorder: Recorder, observer: RunObserver, job: dict = job, plan: Any = plan, name: str = name,
                host: str = url.host) -> Run:  # fmt: skip
            return run_fleet(
                dests, {**job, "label": name}, warmup=plan.warmup, planned=planned_pairs(plan),
                remote_workbench=session.remote_workbench, insecure_host_keys=insecure, recorder=recorder,
                observer=observer, label=name, far_host=host, sets=planned_sets(plan), rounds=plan.copies_per_row,
            )  # fmt: skip

        outcome.ran(screen.present(part, one), screen)


# ---------------------------------------------------------------- the lab
def _lab(session: Lab, screen: Screen, label: str | None, outcome: Outcome) -> None:
    request, side = session.request, session.side
    run = screen.present(Part(), lambda recorder, observer: side.run(request, recorder, observer, label))
    outcome.ran(run, screen)


def _stock_lab(session: StockLab, screen: Screen, label: str | None, outcome: Outcome) -> None:
    """One run per stock server's URL, each shown and recorded as `run URL` shows one; a server that cannot be
    measured at all is said and the others still run, the exit codes combined once as for several URLs."""

    def present(name: str, one: Start) -> Run | None:
        part = Part(name=name, title=name)
        try:
            run = screen.present(part, one)
        except WorkbenchError as exc:  # said, and its code counted: the other servers still run
            outcome.could_not(part, exc, screen)
            return None
        outcome.ran(run, screen)
        return run

    with screen.status() as observer:
        session.side.run_stock(session.request, present, observer, label)


def _fleet_lab(session: FleetLab, screen: Screen, label: str | None, outcome: Outcome) -> None:
    """The lab's client hosts run the fleet over SSH against the lab's servers, as `fleet` runs against a real
    server: their sshds, host keys verified, the job on each session's stdin."""
    from workbench.core.config import shape
    from workbench.core.fleet_controller import planned_pairs, planned_sets, read_inventory, run_fleet, served_job
    from workbench.shared.servers_hello import served_hello

    request, clients, side = session.request, session.clients, session.side
    side.validate(request)
    plan = shape(request.settings)  # the plan's shape (clients, directions, copies) as the members will build it

    def one(recorder: Recorder, observer: RunObserver) -> Run:
        def drive(lab: Any, hosts: Any, state: Path, link: dict[str, Any]) -> Run:
            job = served_job(request.settings, served_hello(state), lab.server_addr)
            name = label or f"lab {request.preset} fleet of {clients}"
            with _ssh_config(hosts.ssh_config):
                return run_fleet(
                    read_inventory(hosts.hosts_file), {**job, "label": name}, warmup=plan.warmup,
                    planned=planned_pairs(plan), remote_workbench=hosts.remote_workbench, insecure_host_keys=False,
                    recorder=recorder, observer=observer, label=name, far_host=lab.server_addr, link=link,
                    spawn_context=hosts.in_switch, sets=planned_sets(plan), rounds=plan.copies_per_row,
                )  # fmt: skip

        return side.run_fleet(request, clients, drive, observer)

    outcome.ran(screen.present(Part(), one), screen)


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


def _scenario(session: Scenario, settings: Settings, screen: Screen, label: str | None, outcome: Outcome) -> None:
    """Each variant run, shown and recorded as `lab` shows one (the runs by variant name in the outcome, for the
    story's figures beside the lab's). A variant that cannot run fails itself, not the story: the others run."""
    side = session.side
    planned = side.variants(session.name, settings, session.quick)
    for _, request in planned:
        side.validate(request)  # every variant's input, before the first lab is built
    for index, (variant, request) in enumerate(planned, start=1):
        title = f"{label or 'scenario ' + session.name}: {variant}"
        part = Part(
            index,
            len(planned),
            name=variant.replace(" ", "-").replace(",", ""),  # PATH-VARIANT.json, ...
            title=variant,
            banner=f"{session.name}: {variant}",
            rule=True,
        )
        screen.heading(part)
        try:
            done = screen.present(part, functools.partial(side.run, request, label=title))
        except UsageError:
            raise
        except WorkbenchError as exc:
            outcome.could_not(part, exc, screen)
            continue
        outcome.ran(done, screen, name=variant)
