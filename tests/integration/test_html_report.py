"""`workbench report RUN --html FILE` end to end: the page of a stored lab run and of a real run on loopback, each
written by the CLI in a subprocess, then opened offline in headless Chromium (tests/browser.py): it loads with no
error and no request beyond its own file, and every plot is drawn. Bad output paths are one line and an exit code.

The lab run's screenshot and page are kept as test artefacts: test-artefacts/html-report.png and .html under the
repository root (the loopback run's as html-report-loopback.*). Without chromium the browser checks skip, and
fail under WORKBENCH_TESTS_STRICT=1 (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.browser import PageReport, chromium_unavailable, render_page
from tests.report_runs import lab_run
from tests.serve_fixtures import ServeRunner
from workbench.cli import plots
from workbench.core.results import Run
from workbench.core.store import Store
from workbench.shared.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
ARTEFACTS = REPO / "test-artefacts"
# A row's error as a hostile server could phrase it: the page must show it as text, never run it.
LINKING = ("src", "href", "xlink:href", "srcset", "action", "data", "poster", "background")
HOSTILE_ERROR = '<script>alert("x")</script> & <img src=x onerror=alert(1)> refused'


def workbench(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_HOME": str(home), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def assert_clean_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def store_run(db: Path, run: Run) -> int:
    """`run` saved as the runner saves one: rows as measured, then explained; link, sweep, verdict."""
    with Store(db) as store:
        run_id = store.begin_run(dict(run.meta))
        store.save_baseline(run_id, run.baseline)
        store.save_extra(
            run_id, dict(run.link) if run.link else None, [dict(p) for p in run.window_sweep or ()] or None
        )
        for idx, (row, why) in enumerate(run.explained_rows()):
            store.save_result(run_id, idx, row, why)
        verdict = list(run.explanation.verdict) if run.explanation else None
        store.finish_run(run_id, str(run.meta["finished_utc"]), list(run.warnings), verdict=verdict)
    return run_id


class Page(HTMLParser):
    """What the page holds: its title, its text, its <svg> count, the text of the tables' cells, every id."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.title = ""
        self.svgs = 0
        self.ids: list[str] = []
        self.links: list[str] = []
        self.cells: list[str] = []
        self.text = ""  # every text of the body, entities decoded, as a reader sees it
        self._in: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in.append(tag)
        self.svgs += tag == "svg"
        self.ids += [value for name, value in attrs if name == "id" and value]
        # what a browser would fetch or follow: only references within the page itself (#id) may be there
        self.links += [
            f"{tag} {name}={value}" for name, value in attrs if name in LINKING and not (value or "").startswith("#")
        ]
        if tag == "td":
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        while self._in and self._in.pop() != tag:
            pass

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "title":
            self.title += data
            return
        self.text += data
        if "td" in self._in and self.cells:
            self.cells[-1] += data


def browse(html: Path, shot: Path) -> PageReport:
    if reason := chromium_unavailable():
        pytest.skip(reason)
    report = render_page(html, shot, width=1280, timeout_s=60)
    keep = ARTEFACTS / shot.name
    ARTEFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, keep)
    shutil.copyfile(html, keep.with_suffix(".html"))
    return report


def assert_self_contained(text: str, page: Page) -> None:
    assert "http://" not in text and "https://" not in text
    assert "<script" not in text.lower()
    assert page.links == []


def test_html_report_of_a_lab_run_opens_offline_with_every_plot_drawn(tmp_path: Path) -> None:
    run = lab_run()
    assert run.results[-1].error  # the failed row, in hostile words
    hostile = replace(run, results=(*run.results[:-1], replace(run.results[-1], error=HOSTILE_ERROR)))
    db = tmp_path / "runs.db"
    run_id = store_run(db, hostile)
    page_path = tmp_path / "report.html"

    proc = workbench("report", str(run_id), "--db", str(db), "--html", str(page_path), home=tmp_path / "home")

    assert proc.returncode == 0, proc.stderr
    assert f"HTML report: {page_path}" in proc.stdout
    text = page_path.read_text(encoding="utf-8")
    page = Page(text)
    assert_self_contained(text, page)
    assert page.title == f"workbench run {run_id} — 2026-11-24"
    expected_plots = len(plots.time_plot_rows(hostile)) + 3  # + spread, window sweep, files/s
    assert page.svgs == expected_plots
    assert "http/aiohttp upload 128M: 1 stall(s), 0.5 s" in page.text  # the row that stalled has its time plot
    assert len(page.ids) == len(set(page.ids))
    # the verdict first, then the link and the hosts, the table, the sweep, the plots, the notes
    order = [text.index(h) for h in ("<h2>Verdict", "<h2>Link and hosts", "<h2>Summary", "<h2>TCP window sweep",
                                     "<h2>Plots", "<h2>Notes")]  # fmt: skip
    assert order == sorted(order)
    assert run.explanation is not None and " ".join(run.explanation.verdict) in page.text
    assert "wb-client" in text and "wb-server" in text and "cc bbr" in text and "MTU 1500" in text
    assert "lab link (wifi-ac): 533 Mbit/s" in text
    assert HOSTILE_ERROR in page.cells  # shown as the text it is
    assert '<span class="status-failed">failed</span>' in text and '<span class="status-ok">ok</span>' in text
    assert run.warnings and all(warning in page.text for warning in run.warnings)

    report = browse(page_path, tmp_path / "html-report.png")

    assert not report.problems(), report.problems()
    assert report.requests == []
    assert report.title == page.title
    svgs = [(w, h) for tag, w, h in report.images if tag == "svg"]
    assert len(svgs) == expected_plots
    assert all(w > 300 and h > 150 for w, h in svgs), svgs
    assert report.screenshot.stat().st_size > 50_000  # a page of tables and plots, not a blank one


def test_html_report_of_a_real_loopback_run(served: ServeRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ran = workbench(
        "run",
        "--target",
        str(served.ctx.state_dir / "target.json"),
        "--credentials",
        str(served.ctx.state_dir / "credentials.json"),
        "--protocols",
        "http/aiohttp",
        "--sizes",
        "2M",
        "--small",
        "10x4K",
        "--repeat",
        "2",
        "--tcp-duration",
        "0.5",
        "--files",
        str(tmp_path / "files"),
        home=home,
    )
    assert ran.returncode == 0, ran.stderr
    page_path = tmp_path / "loopback.html"

    proc = workbench("report", "--html", str(page_path), home=home)  # the latest run of the default database

    assert proc.returncode == 0, proc.stderr
    assert "http/aiohttp" in proc.stdout  # the table is still printed
    text = page_path.read_text(encoding="utf-8")
    page = Page(text)
    assert_self_contained(text, page)
    assert re.fullmatch(r"workbench run \d+ — \d{4}-\d\d-\d\d", page.title), page.title
    assert "raw TCP" in page.cells and "http/aiohttp" in page.cells
    assert page.cells.count("ok") == 4  # 2M and 10x4K, both ways: every copy verified
    assert "<h2>TCP window sweep" not in text  # a run has no sweep: no table, no plot
    # at least the spread and files/s plots, and a time plot per direction when the copies were sampled
    assert page.svgs >= 2

    report = browse(page_path, tmp_path / "html-report-loopback.png")

    assert not report.problems(), report.problems()
    assert len([tag for tag, _, _ in report.images if tag == "svg"]) == page.svgs


def test_html_report_into_a_missing_directory_or_onto_a_directory_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db, lab_run(with_sweep=False))
    missing = tmp_path / "no-such-dir" / "report.html"

    proc = workbench("report", str(run_id), "--db", str(db), "--html", str(missing), home=tmp_path / "home")

    assert_clean_error(proc, ExitCode.NOT_FOUND, "--html", "does not exist")
    assert proc.stdout == ""  # refused before anything was shown
    assert not missing.parent.exists()

    proc = workbench("report", str(run_id), "--db", str(db), "--html", str(tmp_path), home=tmp_path / "home")

    assert_clean_error(proc, ExitCode.USAGE, "--html", "is a directory")

    same = tmp_path / "same.out"
    proc = workbench(
        "report", str(run_id), "--db", str(db), "--json", str(same), "--html", str(same), home=tmp_path / "home"
    )

    assert_clean_error(proc, ExitCode.USAGE, "--html", "same file")
    assert not same.exists()
