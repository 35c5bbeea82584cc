"""`workbench run ftp://…` against a real FTP server whose replies are hostile (tests/hostile_servers.py), then
`workbench report --markdown --csv --html --json` on the stored run.

Each reply is tried on each command it can answer: the scratch directory (MKD), an upload (STOR), a download
(RETR), the clean-up (DELE, RMD) and the login (PASS); and files with hostile names in the scratch directory.
Whatever the server says, workbench prints one line per error, exits with its documented code, never says
"internal error" nor shows a traceback, sends no control code to the terminal and shows markup as typed.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from typer.testing import CliRunner

from tests.forked_workbench import ForkedWorkbench
from tests.helpers import free_port
from tests.hostile_servers import HostileStockFtp
from tests.markdown_check import assert_no_markdown_from_data
from tests.stock_urls import StockSite, run_workbench
from workbench.cli import plots
from workbench.cli.app import app
from workbench.core.results import Run
from workbench.server.daemons.base import ServerContext
from workbench.shared.errors import ExitCode

OSC52 = "\x1b]52;c;aGVsbG8=\x07"
CLEAR = "\x1b[2J"
REPLIES = {
    "escapes": f"550 {OSC52}{CLEAR}\x1bc\x9b31m refused \u202eRLO",
    "markup": "550 [/] not empty [link=http://x]click[/link] [bold]B :warning:",
    "formula": '550 =HYPERLINK("http://x","y") | $x^2$ $\\undefinedcmd$ <script>alert(1)</script>',
    "lines": f"550-first [/] line\r\n {CLEAR}middle\r\n550 last line",
    "megabyte": "550 " + "x" * (1 << 20),
}
# What each command refused means for the run (name: the command, the argument it is refused for, the exit codes
# the documentation allows).
COMMANDS: dict[str, tuple[str, str, set[int]]] = {
    "MKD": ("MKD", "", {ExitCode.ERROR, ExitCode.NOT_FOUND, ExitCode.DISK}),  # no scratch directory: no run
    "STOR-files": ("STOR", "files/", {ExitCode.NOT_FOUND, ExitCode.DISK}),  # the test files cannot be put there
    "STOR": ("STOR", "incoming", {ExitCode.ROWS_FAILED}),  # the timed uploads fail: their rows
    "RETR": ("RETR", "files/", {ExitCode.ROWS_FAILED}),  # the downloads fail: their rows
    "DELE": ("DELE", "", {ExitCode.OK, ExitCode.ROWS_FAILED}),  # clean-up refused: a note
    "RMD": ("RMD", "", {ExitCode.OK}),  # the scratch directory stays: a note says so
    "PASS": ("PASS", "", {ExitCode.AUTH}),  # the login refused
    "PASS-550": ("PASS", "", {ExitCode.AUTH}),  # refused with another code: still the login's, no missing path
}
ODD_NAMES = (f"odd{OSC52}{CLEAR}[/]name", "=cmd|x[link=http://x]", "$x^2$ <b>")
RUN = ("--protocols", "ftp/ftplib", "--sizes", "64K", "--small", "2x4K", "--repeat", "1", "--warmup", "0")
ACTED_ON = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
CHARTS = ("throughput_over_time", "spread_by_client", "window_sweep", "files_per_s")  # what the HTML page draws
# The one reply case of the matrix whose report draws the real charts: every download fails, so the page charts
# uploads beside an empty download side (a chart that breaks on oddly shaped numbers breaks here).
CHARTED_CASE = ("RETR", "escapes")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StockSite, HostileStockFtp]]:
    base = tmp_path_factory.mktemp("hostile")
    site = StockSite(base)
    root = base / "ftp" / "root"
    root.mkdir(parents=True)
    ctx = ServerContext(
        root=root,
        bind="127.0.0.1",
        state_dir=base / "ftp" / "state",
        credentials=site.credentials,
        ports={"ftp": free_port()},
    )
    server = HostileStockFtp(ctx)
    server.start()
    site.servers["ftp"] = server
    site._write_client_side()  # the client's ~/.netrc
    try:
        yield site, server
    finally:
        site.stop()


@pytest.fixture(scope="module")
def forked(hostile: tuple[StockSite, HostileStockFtp]) -> Iterator[ForkedWorkbench]:
    """The matrix's runs, each a process forked from one that has imported workbench (tests/forked_workbench.py);
    the hostile file names' run is `python -m workbench` itself."""
    runner = ForkedWorkbench(hostile[0].env(), ("workbench.protocols.ftp",))
    try:
        yield runner
    finally:
        runner.close()


def _assert_shown_safely(text: str) -> None:
    assert not ACTED_ON.search(text), repr(ACTED_ON.search(text))
    assert "52;c;" not in text and "[2J" not in text
    assert "internal error" not in text and "Traceback" not in text
    assert "click[/link]" in text or "[link=" not in text  # markup is never interpreted, only shown


# Every word a chart draws: a client (protocol/client, a fleet row's " @host" or " ×N"), a direction, a file set.
CHARTED_WORD = re.compile(r"[\w./:@× -]{1,120}")
EMPTY_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>'


class _WouldDraw(Exception):
    """Raised where a chart would start its figure (workbench.cli.plots.Figure) while charts are not drawn."""


def _no_figure(*args: object, **kwargs: object) -> NoReturn:
    raise _WouldDraw


def _drawn_from_own_words(chart: Callable[..., str | None]) -> Callable[..., str | None]:
    """`chart` (a workbench.cli.plots function) replaced by a check that the run it would draw names only what
    workbench itself names (clients, directions, file sets: never a server's words), then the chart itself run up
    to its figure (plots.Figure replaced by _no_figure): its None where it draws nothing, else an empty figure."""

    def check(run: Run, *args: object, **kwargs: object) -> str | None:
        for row in run.results:
            for word in (row.label, row.direction, row.file_set, row.client_host or "-"):
                assert CHARTED_WORD.fullmatch(word), (chart.__name__, word[:200])
        try:
            return chart(run, *args, **kwargs)  # None: nothing to draw, as the real page has it
        except _WouldDraw:
            return EMPTY_SVG

    return check


def _report_everything(site: StockSite, tmp_path: Path, db: Path, charts: bool = False) -> None:
    """`report` of the latest run to every format: exit 0, files written, each safe for its reader.

    In this process, through the command the console script calls (typer's runner, the run's environment): a
    process per case spent ~1.5 s of CPU importing the HTML page's plotting library each time. The console
    script's own `report` to every format runs in tests/integration/test_commands.py.

    A server's words reach the page's tables, notes and captions, never its charts, which draw workbench's own
    names and the numbers: unless `charts`, each chart is replaced by a check of exactly that and runs only up
    to its figure (None where the real chart draws nothing, else an empty figure), so the page around it is
    built and checked as it is without the drawing (~0.16 s of CPU a case). The cases with `charts` (one reply
    case of each matrix, CHARTED_CASE, and the hostile file names) and tests/unit/test_hostile_words.py (hostile
    client names in every chart) draw the real charts."""
    files = {ext: tmp_path / f"report.{ext}" for ext in ("md", "csv", "html", "json")}
    args = ["report", "--db", str(db), "--wide", "--markdown", str(files["md"]), "--csv", str(files["csv"])]
    args += ["--html", str(files["html"]), "--json", str(files["json"])]
    with pytest.MonkeyPatch.context() as patch:
        if not charts:
            patch.setattr(plots, "Figure", _no_figure)  # once for all charts: the page may draw them in threads
            for name in CHARTS:
                patch.setattr(plots, name, _drawn_from_own_words(getattr(plots, name)))
        done = CliRunner().invoke(app, args, env=site.env())
    assert done.exit_code == 0, (done.exception, done.stderr)
    assert done.stdout, "the report's table was not captured: nothing was checked"
    _assert_shown_safely(done.stdout + done.stderr)
    assert done.stderr == ""
    markdown = files["md"].read_text(encoding="utf-8")
    assert not ACTED_ON.search(markdown.replace("\n", ""))
    assert_no_markdown_from_data(markdown)
    for record in csv.DictReader(io.StringIO(files["csv"].read_text(encoding="utf-8"), newline="")):
        for cell in record.values():
            assert cell[:1] not in ("=", "+", "@", "\t", "\r"), cell
    page = files["html"].read_text(encoding="utf-8")
    assert "<script" not in page and not ACTED_ON.search(page.replace("\n", ""))
    if charts:  # the real charts drew at least one figure here, so a chart that breaks on this run fails the case
        assert "<svg" in page and EMPTY_SVG not in page
    json.loads(files["json"].read_text())


@pytest.mark.parametrize("reply", list(REPLIES))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_hostile_reply_is_one_safe_line_and_the_documented_exit(
    hostile: tuple[StockSite, HostileStockFtp], forked: ForkedWorkbench, tmp_path: Path, command: str, reply: str
) -> None:
    site, server = hostile
    db = tmp_path / "runs.sqlite"
    verb, match, codes = COMMANDS[command]
    words = REPLIES[reply].replace("550", "530") if command == "PASS" else REPLIES[reply]  # 530: not logged in
    server.set_case((verb,), words, match)
    try:
        proc = forked.run("run", site.url("ftp"), *RUN, "--db", str(db), timeout=240)
    finally:
        server.set_case()
    shown = proc.stdout + proc.stderr
    _assert_shown_safely(shown)
    if reply == "megabyte":  # past 8 KiB the client drops the reply and the connection: a generic failure
        codes = codes | {ExitCode.ERROR, ExitCode.ROWS_FAILED}
    assert proc.returncode in codes, (proc.returncode, proc.stderr[-2000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) <= 1 and len(proc.stderr.splitlines()) <= 2, proc.stderr[-2000:]  # one line per error
    assert all(len(line) < 4000 for line in shown.splitlines())  # a megabyte is cut, not printed
    if proc.returncode in (ExitCode.OK, ExitCode.ROWS_FAILED):
        _report_everything(site, tmp_path, db, charts=(command, reply) == CHARTED_CASE)


def test_hostile_file_names_in_the_scratch_directory(
    hostile: tuple[StockSite, HostileStockFtp], tmp_path: Path
) -> None:
    site, server = hostile
    db = tmp_path / "runs.sqlite"
    server.set_case(odd_names=ODD_NAMES)
    try:
        proc = run_workbench(site, "run", site.url("ftp"), *RUN, "--db", str(db), timeout=240)
    finally:
        server.set_case()
    _assert_shown_safely(proc.stdout + proc.stderr)
    assert proc.returncode in (ExitCode.OK, ExitCode.ROWS_FAILED), proc.stderr[-2000:]
    _report_everything(site, tmp_path, db, charts=True)
