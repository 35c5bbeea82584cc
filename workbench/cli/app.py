"""The command line: thin commands that parse, build a config, call the core and render (HTTPie-style).

All error handling lives in main(): a WorkbenchError becomes one line on stderr and its exit code;
--debug re-raises to show the traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from workbench.cli.options import GIVEN_PATH, path_given, with_settings
from workbench.core.settings import BY_NAME, Settings
from workbench.shared import paths, signals
from workbench.shared.errors import ExitCode, NotFoundError, Terminated, UsageError, WorkbenchError, from_os_error
from workbench.shared.ports import DEFAULT_PORTS

# messages quote user input such as '[ports]' and servers' words: print them, never parse them, no control codes
from workbench.shared.safetext import for_markup as escape

if TYPE_CHECKING:
    from workbench.cli.exports import Outputs
    from workbench.core.session import Outcome, Session

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Do real file copies reach iperf speeds, and if not, why?",
)
files_app = typer.Typer(no_args_is_help=True, help="Test files: make them, with a manifest of hashes.")
servers_app = typer.Typer(
    no_args_is_help=True, help="Start, stop and list the local servers (sshd, smbd, rsyncd, serve)."
)
app.add_typer(files_app, name="files")
app.add_typer(servers_app, name="servers")

# Piped into a file or `tee`, rich would fold the summary table into 80 columns, a word per line; a log
# reads better wide. A terminal, or COLUMNS set by the user, keeps its own width.
PIPED_WIDTH = 200


def _console(stderr: bool) -> Console:
    # the stream is looked up at each write (not bound here), so a test runner's capture still sees it
    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty() and "COLUMNS" not in os.environ
    # no emoji codes: a server's ":warning:" is text, as its "[bold]" is
    return Console(stderr=stderr, highlight=False, emoji=False, width=PIPED_WIDTH if piped else None)


err = _console(stderr=True)
out = _console(stderr=False)

_DEBUG = {"on": False}

DbOpt = Annotated[
    Path | None, typer.Option("--db", help="Results database (default: the user's data dir).", **GIVEN_PATH)
]
MarkdownOpt = Annotated[
    Path | None,
    typer.Option(
        "--markdown",
        help="Write the summary table as Markdown here (to paste into an issue or a post).",
        **GIVEN_PATH,
    ),
]
CsvOpt = Annotated[
    Path | None, typer.Option("--csv", help="Write the summary table as CSV here: one line per row.", **GIVEN_PATH)
]
# the options of every command that starts runs (run, fleet, lab), beside DbOpt, MarkdownOpt, CsvOpt, WideOpt
JsonOpt = Annotated[
    Path | None, typer.Option("--json", help="Write the versioned JSON document here.", **GIVEN_PATH)
]
LabelOpt = Annotated[str | None, typer.Option(help="A name for this run in the history.")]
CredOpt = Annotated[
    Path | None,
    typer.Option("--credentials", help=BY_NAME["credentials"].help, **GIVEN_PATH),
]
WideOpt = Annotated[
    bool,
    typer.Option(
        "--wide",
        help="Show every column of the summary table and its notes inline (default: 120 columns, the "
        "notes numbered under the table).",
    ),
]


@app.callback()
def _root(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False) -> None:
    _DEBUG["on"] = debug


# ---------------------------------------------------------------- files
@files_app.command("make")
def files_make(
    directory: Annotated[Path, typer.Argument(help="Where to write the files and manifest.json.", parser=path_given)],
    sizes: Annotated[str, typer.Option(help="Comma-separated sizes, binary suffixes.")] = "1M,16M,256M,1G",
    small: Annotated[
        list[str] | None, typer.Option(help="Many-small-files sets, COUNTxSIZE, comma-separated or the flag repeated.")
    ] = None,
    profile: Annotated[str, typer.Option(help="random (incompressible), zero or text (~3:1).")] = "random",
    seed: Annotated[int, typer.Option(help="Same seed, same bytes, on every host.")] = 1,
) -> None:
    """Write test files of several sizes (and small-file sets) with a manifest of xxh3-128 hashes."""
    from workbench.core.config import check_profile
    from workbench.core.settings import check
    from workbench.fixtures.generate import make
    from workbench.shared.sizes import parse_sizes, parse_small_set, small_set_words
    from workbench.shared.validate import check_budget, check_free_space, named

    check("seed", seed)
    named("--profile", check_profile, profile)
    size_list = named("--sizes", parse_sizes, sizes)
    sets = [named("--small", parse_small_set, s) for s in named("--small", small_set_words, small)] if small else []
    check_free_space(directory, check_budget(size_list, sets), "DIRECTORY")
    report = make(directory, size_list, sets, profile, seed, on_file=None)
    rate = f", {report.write_bytes_per_s / 1e6:.0f} MB/s" if report.written_bytes else ""
    out.print(
        f"{escape(str(directory))}: wrote {report.written_bytes / 1e6:.1f} MB{rate}, kept "
        f"{report.kept_bytes / 1e6:.1f} MB valid; manifest: {escape(str(directory / 'manifest.json'))}"
    )


# ---------------------------------------------------------------- serve
@app.command()
def serve(
    root: Annotated[
        Path, typer.Option(help="The served directory (files/ and incoming/ live here).", **GIVEN_PATH)
    ],
    bind: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    state_dir: Annotated[
        Path | None, typer.Option(help="Private state: credentials, target file.", **GIVEN_PATH)
    ] = None,
    credentials: CredOpt = None,
    http_port: Annotated[int, typer.Option(help="HTTP port (0: any free).")] = DEFAULT_PORTS["http"],
    ftp_port: Annotated[int, typer.Option(help="FTP port (0: any free).")] = DEFAULT_PORTS["ftp"],
    tcp_port: Annotated[int, typer.Option(help="Raw-TCP probe port (0: any free).")] = DEFAULT_PORTS["tcp"],
    iperf3_port: Annotated[
        int, typer.Option(help="iperf3 server port, when iperf3 is installed (0: any free).")
    ] = DEFAULT_PORTS["iperf3"],
    no_iperf3: Annotated[bool, typer.Option("--no-iperf3", help="Do not start an iperf3 server.")] = False,
    no_target_file: Annotated[
        bool, typer.Option("--no-target-file", hidden=True, help="Leave target.json to 'servers up'.")
    ] = False,
) -> None:
    """Serve ROOT over HTTP, FTP and the raw-TCP probe (authenticated, confined to ROOT) until Ctrl-C."""
    from workbench.server.serve import ServeConfig
    from workbench.server.serve import serve as run_serve
    from workbench.shared.validate import check_host, check_port

    bind = check_host(bind, source="--bind")
    if not root.is_dir():
        raise NotFoundError(f"root directory {root} does not exist", "create it or pass another --root")
    for name, number, usual in (
        ("http_port", http_port, DEFAULT_PORTS["http"]),
        ("ftp_port", ftp_port, DEFAULT_PORTS["ftp"]),
        ("tcp_port", tcp_port, DEFAULT_PORTS["tcp"]),
        ("iperf3_port", iperf3_port, DEFAULT_PORTS["iperf3"]),
    ):
        check_port(name, number, allow_zero=True, example=usual)
    state = _state_dir(state_dir)
    cfg = ServeConfig(
        root=root,
        bind=bind,
        state_dir=state,
        ports={"http": http_port, "ftp": ftp_port, "tcp": tcp_port, "iperf3": iperf3_port},
        credentials_file=credentials,
        iperf3=not no_iperf3,
        write_target=not no_target_file,
    )

    def ready(ports: dict[str, int]) -> None:
        listed = ", ".join(f"{k} {v}" for k, v in ports.items())
        out.print(f"serving {escape(str(root))} on {escape(bind)}: {listed}", soft_wrap=True)
        if os.environ.get("WORKBENCH_PASSWORD"):
            out.print("credentials: from $WORKBENCH_USER / $WORKBENCH_PASSWORD")
        else:
            where = escape(str(credentials or state / "credentials.json"))
            out.print(f"credentials: {where} (mode 0600; copy it to the client)")
        sys.stdout.flush()

    run_serve(cfg, ready)


# ---------------------------------------------------------------- tcp
@app.command()
def tcp(
    host: Annotated[str, typer.Argument(help="The host running 'workbench serve'.")],
    port: Annotated[int, typer.Option(help="Its raw-TCP probe port.")] = DEFAULT_PORTS["tcp"],
    duration: Annotated[float, typer.Option(help="Seconds per direction (max 60).")] = 5.0,
    reverse: Annotated[bool, typer.Option("--reverse", help="Only the download direction (server sends).")] = False,
    window: Annotated[str | None, typer.Option(help="Clamp the advertised receive window, e.g. 64K.")] = None,
    window_sweep: Annotated[str | None, typer.Option(help="Measure each window, e.g. 32K,64K,128K,256K.")] = None,
    iperf3_port: Annotated[int, typer.Option(help="iperf3 server port for the cross-check.")] = DEFAULT_PORTS["iperf3"],
    http_port: Annotated[
        int, typer.Option(help="serve's HTTP port (its authenticated iperf3's public key).")
    ] = DEFAULT_PORTS["http"],
    credentials: CredOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """The raw TCP limit of the path: memory-to-memory throughput both ways, RTT, iperf3 cross-check."""
    from workbench.cli.report import render_tcp
    from workbench.core.baseline import measure_tcp
    from workbench.shared import credentials as creds_mod
    from workbench.shared.target import Target
    from workbench.shared.validate import check_host, check_port, check_range, check_windows

    host = check_host(host, source="HOST")
    for name, number, usual in (
        ("port", port, DEFAULT_PORTS["tcp"]),
        ("iperf3_port", iperf3_port, DEFAULT_PORTS["iperf3"]),
        ("http_port", http_port, DEFAULT_PORTS["http"]),
    ):
        check_port(name, number, allow_zero=False, example=usual)
    check_range("duration", duration)
    window_bytes, sweep = check_windows(window, window_sweep, duration)
    creds = creds_mod.resolve(credentials, paths.default_credentials())
    target = Target(host, creds, ports={**DEFAULT_PORTS, "tcp": port, "iperf3": iperf3_port, "http": http_port})
    doc = measure_tcp(
        target,
        directions=("download",) if reverse else ("upload", "download"),
        duration=duration,
        window=window_bytes,
        sweep=sweep,
    )
    if as_json:
        out.print_json(json.dumps(doc))
    else:
        render_tcp(out, doc)


# ---------------------------------------------------------------- run / report
@app.command()
@with_settings("run")
def run(
    ctx: typer.Context,
    settings: Settings,
    urls: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="URL",
            help="Servers workbench did not start, e.g. smb://alice@nas/share/dir, sftp://nas/~/dir (or ssh://), "
            "ftp://nas/dir, ftps://, rsync://nas/module/dir, https://nas/dav (WebDAV), afp://mac/volume. "
            "One run each, instead of --host/--target.",
            show_default=False,
        ),
    ] = None,
    db: DbOpt = None,
    json_out: JsonOpt = None,
    markdown_out: MarkdownOpt = None,
    csv_out: CsvOpt = None,
    label: LabelOpt = None,
    wide: WideOpt = False,
    via_ssh: Annotated[
        str | None,
        typer.Option(
            "--via-ssh",
            metavar="[USER@]HOST",
            help="Log in to HOST with ssh (your ~/.ssh/config, agent and known_hosts), start its servers for this "
            "run only, and stop them afterwards, also on failure or Ctrl-C. Instead of --host/--target.",
        ),
    ] = None,
    remote_workbench: Annotated[
        str,
        typer.Option(
            "--remote-workbench",
            help="The workbench command on the --via-ssh host, when its login PATH does not find it.",
        ),
    ] = "workbench",
) -> None:
    """Copy test files over each protocol, both ways, several times; compare with the raw TCP limit.

    The far host is `workbench serve` (--host/--target), one started over SSH (--via-ssh), or one or more
    servers given by URL.
    """
    from workbench.core import session

    outputs = _run_outputs(label, json_out, markdown_out, csv_out)
    chosen = session.for_run(settings, urls or (), via_ssh, remote_workbench)
    _exit_with(_start(chosen, settings, db, outputs, label, wide))


def _run_outputs(label: str | None, json_out: Path | None, markdown_out: Path | None, csv_out: Path | None) -> Outputs:
    """A run's own options checked (its label, the files asked for), before anything else."""
    from workbench.cli.exports import Outputs
    from workbench.shared.validate import check_label

    check_label(label)
    outputs = Outputs(json_out, markdown_out, csv_out)
    outputs.check()
    return outputs


def _start(
    chosen: Session, settings: Settings, db: Path | None, outputs: Outputs, label: str | None, wide: bool
) -> Outcome:
    """Start the session, its runs shown on the terminal and recorded in the database; what ran."""
    from workbench.cli.screen import TerminalScreen
    from workbench.core import session

    if settings["insecure_host_keys"]:
        err.print("[yellow]warning:[/] SSH host keys and TLS certificates will not be verified (--insecure-host-keys)")
    return session.start(chosen, settings, TerminalScreen(out, err, db, outputs, wide), label)


def _exit_with(outcome: Outcome) -> None:
    """The code the session's runs combine to: the first failure's, ROWS_FAILED when rows failed."""
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


@app.command()
def report(
    run_id: Annotated[int | None, typer.Argument(help="Run id (default: the latest).")] = None,
    db: DbOpt = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the run's JSON document.", **GIVEN_PATH)
    ] = None,
    markdown_out: MarkdownOpt = None,
    csv_out: CsvOpt = None,
    html_out: Annotated[
        Path | None,
        typer.Option(
            "--html", help="Also write one self-contained HTML page: table, plots, verdict.", **GIVEN_PATH
        ),
    ] = None,
    wide: WideOpt = False,
) -> None:
    """Re-render a past run's summary table from the results database."""
    from workbench.cli.exports import Outputs
    from workbench.cli.report import render_run
    from workbench.cli.screen import results_db
    from workbench.core.store import Store
    from workbench.shared.validate import check_run_id

    if run_id is not None:
        check_run_id(run_id)
    outputs = Outputs(json_out, markdown_out, csv_out, html_out)
    outputs.check()
    with Store(results_db(db), read_only=True) as store:
        past = store.load(run_id)
    render_run(out, past, wide)
    outputs.write(past)
    for line in outputs.lines():
        out.print(escape(line), soft_wrap=True)


@app.command()
def history(db: DbOpt = None, limit: Annotated[int, typer.Option(help="How many runs.")] = 30) -> None:
    """List past runs."""
    from workbench.cli.report import render_history
    from workbench.cli.screen import results_db
    from workbench.core.store import Store
    from workbench.shared.validate import check_range

    check_range("limit", limit)
    path = results_db(db)
    try:
        store = Store(path, read_only=True)
    except NotFoundError:
        # nothing recorded yet (no file, or the empty one a first run stopped early leaves: Store says which) is an
        # empty history, not an error (report RUN is one)
        out.print(f"no runs yet: no results database at {escape(str(path))}", soft_wrap=True)
        return
    with store:
        render_history(out, store.history(limit))


@app.command()
def compare(
    before: Annotated[int, typer.Argument(help="Run id of the 'before' run.")],
    after: Annotated[int, typer.Argument(help="Run id of the 'after' run.")],
    db: DbOpt = None,
    markdown: Annotated[
        Path | None,
        typer.Option("--markdown", help="Also write the comparison as Markdown to this file.", **GIVEN_PATH),
    ] = None,
) -> None:
    """Compare two runs row by row (e.g. before and after tuning a host): each change with its 95 % interval,
    faster/slower/within noise, and warnings when the network or the hosts changed between them. Exits 0
    whenever it compared, whatever it found: it is a report, not a check."""
    from workbench.cli.compare import compare_markdown, render_compare
    from workbench.cli.screen import results_db
    from workbench.core.comparison import compare_runs
    from workbench.core.store import Store
    from workbench.shared.validate import check_output_file, check_run_id

    check_run_id(before, name="BEFORE")
    check_run_id(after, name="AFTER")
    check_output_file(markdown, "--markdown")
    with Store(results_db(db), read_only=True) as store:
        comparison = compare_runs(store.load(before), store.load(after))
    render_compare(out, comparison)
    if markdown:
        try:
            markdown.write_text(compare_markdown(comparison))
        except OSError as exc:
            raise from_os_error(exc, f"writing {markdown}") from exc


# ---------------------------------------------------------------- servers / doctor
def _state_dir(given: Path | None) -> Path:
    """--state-dir (or the default), refused up front when it names something that is not a directory."""
    state = given or paths.default_state_dir()
    if state.exists() and not state.is_dir():
        raise UsageError(f"--state-dir {state} is not a directory", "give a directory, e.g. --state-dir ~/wb-state")
    return state


@servers_app.command("up")
def servers_up(
    root: Annotated[Path, typer.Option(help="The served directory.", **GIVEN_PATH)],
    bind: Annotated[str, typer.Option(help="Address every server binds to.")] = "127.0.0.1",
    state_dir: Annotated[
        Path | None, typer.Option(help="Private state (configs, keys, credentials).", **GIVEN_PATH)
    ] = None,
    only: Annotated[str | None, typer.Option(help="Start only these: serve,sshd,smbd,rsyncd,afpd.")] = None,
) -> None:
    """Start sshd, smbd, the rsync daemon, afpd and 'serve' with private configs; returns once all listen."""
    from workbench.server.daemons.supervisor import up
    from workbench.shared.validate import check_host

    bind = check_host(bind, source="--bind")
    if not root.is_dir():
        raise NotFoundError(f"--root {root} does not exist as a directory", "create it first or pass another --root")
    state = up(root, bind, _state_dir(state_dir), only=only.split(",") if only else None)
    for line in state.lines():
        out.print(escape(line), soft_wrap=True)


@servers_app.command("down")
def servers_down(
    state_dir: Annotated[
        Path | None, typer.Option(help="Private state of the servers to stop.", **GIVEN_PATH)
    ] = None,
) -> None:
    """Stop every server 'servers up' started; leaves nothing running."""
    from workbench.server.daemons.supervisor import down

    for line in down(_state_dir(state_dir)):
        out.print(escape(line), soft_wrap=True)


@servers_app.command("status")
def servers_status(
    state_dir: Annotated[Path | None, typer.Option(help="Private state of the servers.", **GIVEN_PATH)] = None,
) -> None:
    """Show which servers are running, where, and their pids."""
    from workbench.server.daemons.supervisor import status

    for line in status(_state_dir(state_dir)):
        out.print(escape(line), soft_wrap=True)


@servers_app.command("over-ssh", hidden=True)
def servers_over_ssh(
    bind: Annotated[str | None, typer.Option(help="Address to bind (default: where the SSH login arrived).")] = None,
    only: Annotated[str | None, typer.Option(help="Start only these: serve,sshd,smbd,rsyncd,afpd.")] = None,
) -> None:
    """The far side of 'run --via-ssh': servers up in a private temp dir, their target and login as one JSON line
    on stdout, everything down once stdin ends."""
    from workbench.server.over_ssh import serve_over_ssh
    from workbench.shared.validate import check_host

    serve_over_ssh(check_host(bind, source="--bind") if bind else None, only.split(",") if only else None)


@app.command()
@with_settings("fleet")
def fleet(
    ctx: typer.Context,
    settings: Settings,
    urls: Annotated[
        list[str],
        typer.Argument(
            metavar="URL",
            help="The server, by URL as 'run' takes it (smb://, sftp://, ftp://, rsync://, https://); one run each.",
            show_default=False,
        ),
    ],
    clients: Annotated[
        Path,
        typer.Option(
            "--clients",
            metavar="HOSTS",
            help="A file of client hosts, one SSH destination per line (~/.ssh/config aliases, user@host; an "
            "Ansible INI inventory's host lines work too). Each needs workbench installed.",
            parser=path_given,
        ),
    ],
    db: DbOpt = None,
    json_out: JsonOpt = None,
    markdown_out: MarkdownOpt = None,
    csv_out: CsvOpt = None,
    label: LabelOpt = None,
    wide: WideOpt = False,
    remote_workbench: Annotated[
        str,
        typer.Option("--remote-workbench", help="The workbench command on the clients, when their PATH lacks it."),
    ] = "workbench",
) -> None:
    """Many clients, one server: the same plan on every client at once over SSH, one run with an aggregate row
    per step (counted while all clients were copying, with Jain's fairness) and each client's rows."""
    from workbench.core import session

    outputs = _run_outputs(label, json_out, markdown_out, csv_out)
    chosen = session.for_fleet(settings, clients, urls, remote_workbench)
    _exit_with(_start(chosen, settings, db, outputs, label, wide))


@app.command("fleet-member", hidden=True)
def fleet_member() -> None:
    """A fleet's client side, started by 'workbench fleet' over SSH: JSON lines on stdin and stdout."""
    from workbench.core.fleet_member import serve_member

    raise typer.Exit(serve_member())


@app.command()
def doctor(
    url: Annotated[
        str | None,
        typer.Argument(
            metavar="URL",
            help="A server given by URL: check it answers, the login, and which clients would run (copies nothing).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Which protocol clients and servers can run here (and why not), and the TCP settings that bound throughput.

    With a URL: does that server answer, does the login work, which of its clients would run here; copies nothing.
    """
    from workbench.cli.doctor import render_doctor, render_url_check

    if url is None:
        render_doctor(out)
        return
    from workbench.core.url_check import check

    found = check(url, prompt=True)
    render_url_check(out, found)
    if found.exit_code:
        raise typer.Exit(found.exit_code)


# ---------------------------------------------------------------- lab
@app.command()
@with_settings("lab")
def lab(
    ctx: typer.Context,
    settings: Settings,
    db: DbOpt = None,
    json_out: JsonOpt = None,
    markdown_out: MarkdownOpt = None,
    csv_out: CsvOpt = None,
    label: LabelOpt = None,
    wide: WideOpt = False,
) -> None:
    """Two emulated hosts joined by a real link (rate, delay, MTU) with real servers; runs the comparison."""
    from workbench.core import session
    from workbench.lab import scenarios
    from workbench.lab.lab_side import LAB

    outputs = _run_outputs(label, json_out, markdown_out, csv_out)
    chosen = session.for_lab(settings, LAB)
    if isinstance(chosen, session.Scenario) and chosen.name == "list":
        for story_name, line in scenarios.listing():
            out.print(f"{story_name:12} {line}", highlight=False)
        return
    outcome = _start(chosen, settings, db, outputs, label, wide)
    if isinstance(chosen, session.Scenario):  # the story's published figures beside the lab's
        from workbench.cli.report import render_story

        render_story(out, scenarios.find(chosen.name), outcome.by_name, chosen.quick)
    _exit_with(outcome)


# ---------------------------------------------------------------- entry point
def main(argv: list[str] | None = None) -> None:
    """Run the CLI, mapping every failure to one line and an exit code."""
    # SIGTERM (systemd, a CI timeout, `kill`) and SIGHUP (a closed terminal, a dropped SSH session) unwind like
    # Ctrl-C: finished rows stay saved, the JSON is written, servers, mounts, scratch directories and namespaces
    # are torn down by the `finally:` blocks on the way out.
    signals.install()
    try:
        # Outside standalone mode typer returns an exit code instead of exiting (Ctrl-C becomes 130).
        code = app(args=argv, standalone_mode=False, prog_name="workbench")
        if isinstance(code, int) and code:
            if code == ExitCode.INTERRUPTED:
                err.print("interrupted")
            sys.exit(code)
    except WorkbenchError as exc:
        if _DEBUG["on"]:
            raise
        err.print(f"[bold red]error:[/] {escape(exc.one_line())}", soft_wrap=True)
        sys.exit(exc.exit_code)
    except Terminated as exc:
        err.print(signals.last_words(exc))
        sys.exit(signals.exit_code_of(exc))
    except (typer.Abort, KeyboardInterrupt):
        err.print("interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    except SystemExit as exc:
        # the lab turns SIGTERM (SIGHUP) into SystemExit(143 / 129) while its namespaces are up (lab/lifecycle.py)
        if exc.code == ExitCode.TERMINATED:
            err.print("terminated")
        elif exc.code == ExitCode.HANGUP:
            err.print("hung up")
        raise
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:
        if _DEBUG["on"]:
            raise
        translated = from_os_error(exc, "running workbench")
        err.print(f"[bold red]error:[/] {escape(translated.one_line())}", soft_wrap=True)
        sys.exit(translated.exit_code)
    except Exception as exc:
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # click's usage errors (typer vendors click)
            if type(exc).__name__ == "NoArgsIsHelpError" or not hasattr(exc, "format_message"):
                exc.show()  # a group given no command: its help is the answer
            else:  # one line, as every other refusal, naming where the help is
                ctx = getattr(exc, "ctx", None)
                where = f"see '{ctx.command_path} --help'" if ctx is not None else "see 'workbench --help'"
                err.print(f"[bold red]error:[/] {escape(exc.format_message())} ({escape(where)})", soft_wrap=True)
            sys.exit(ExitCode.USAGE)
        if _DEBUG["on"] or os.environ.get("WORKBENCH_DEBUG"):
            raise
        what = escape(f"{type(exc).__name__}: {exc}")
        err.print(f"[bold red]internal error:[/] {what} (rerun with --debug and report it)")
        sys.exit(ExitCode.ERROR)
