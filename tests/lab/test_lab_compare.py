"""`workbench compare` on real lab runs: two runs of the same link are mostly within noise; a run on a slower
link is slower wherever the link held the rows back, and the comparison says the link changed.

Three small labs (three streaming clients, one 8 MiB file, five timed copies each way so the test has samples
to work with), then two comparisons through the command line. About 45 s on a 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from workbench.core.noise import SLOWER, WITHIN_NOISE

REPO = Path(__file__).resolve().parents[2]
PLAN = [
    "--link",
    "wifi-ac",
    "--protocols",
    "http/aiohttp,http/curl,ftp/ftplib",
    "--sizes",  # 8 MiB copies in about 50 round trips on wifi-ac: long enough to stream at the link's rate
    "8M",
    "--small",
    "none",
    "--repeat",
    "5",
    "--warmup",
    "1",
    "--tcp-duration",  # the raw-TCP figures compared fall with the slower link by ~45 %; half a second shows it
    "0.5",
    "--goodput-duration",  # the link's own meter: no figure of it is compared
    "0",
    "--skip-iperf3",  # the probe's raw-TCP figures are compared, not iperf3's cross-check
]
SLOWER_RATE = "300mbit"  # against wifi-ac's 533: every row that streams near the link rate must drop
# A row is link-bound on the slower link when the first run moved it faster than that link's goodput can:
# 10 % above it, so a row that only just reached it (and might not have been held back) does not count.
LINK_BOUND_MARGIN = 1.10

needs_lab = pytest.mark.skipif(lab_unavailable() is not None, reason=lab_unavailable() or "")


@dataclass(frozen=True)
class LabRuns:
    db: Path
    home: Path
    ids: tuple[int, int, int]  # the same link twice, then the slower link
    docs: tuple[dict, dict, dict]
    wall_s: float


def _workbench(*args: str, home: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_HOME": str(home), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.fixture(scope="module")
def lab_runs(tmp_path_factory: pytest.TempPathFactory) -> LabRuns:
    """The three runs, one lab after the other (never two labs at once: they share the machine's CPUs)."""
    tmp = tmp_path_factory.mktemp("compare")
    db, home = tmp / "runs.sqlite", tmp / "home"
    started = time.monotonic()
    docs = []
    for name, extra in (("same-1", []), ("same-2", []), ("slower", ["--rate", SLOWER_RATE])):
        doc_path = tmp / f"{name}.json"
        proc = _workbench("lab", *PLAN, *extra, "--db", str(db), "--json", str(doc_path), home=home, timeout=600)
        assert proc.returncode == 0, f"lab {name}: " + proc.stdout[-3000:] + proc.stderr[-3000:]
        docs.append(json.loads(doc_path.read_text()))
    wall_s = time.monotonic() - started
    print(f"three labs in {wall_s:.0f} s")
    ids = tuple(doc["run"]["id"] for doc in docs)
    return LabRuns(db, home, ids, tuple(docs), wall_s)  # type: ignore[arg-type]


def _compare(runs: LabRuns, before: int, after: int, markdown: Path) -> tuple[str, list[dict[str, str]]]:
    """`workbench compare` of two runs: what it printed, and its Markdown table's lines as {header: cell}."""
    proc = _workbench(
        "compare",
        str(before),
        str(after),
        "--db",
        str(runs.db),
        "--markdown",
        str(markdown),
        home=runs.home,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = [line for line in markdown.read_text().splitlines() if line.startswith("|")]
    headers = [cell.strip() for cell in table[0].strip("|").split(" | ")]
    lines = [dict(zip(headers, (c.strip() for c in line.strip("|").split(" | ")), strict=True)) for line in table[2:]]
    return proc.stdout, lines


@pytest.mark.lab
@needs_lab
def test_two_runs_of_the_same_lab_are_mostly_within_noise(lab_runs: LabRuns, tmp_path: Path) -> None:
    first, second, _ = lab_runs.ids
    printed, lines = _compare(lab_runs, first, second, tmp_path / "same.md")
    rows = [line for line in lines if line["client"] != "raw TCP"]
    assert len(rows) == 6, printed  # 3 clients x 2 directions, all present in both runs
    assert all(row["n"] == "5/5" for row in rows), printed
    # Noise is real, and so is drift between two runs minutes apart on a shared machine: a majority, not all.
    within = [row for row in rows if row["verdict"] == WITHIN_NOISE]
    print("same lab twice:", [(row["client"], row["dir"], row["verdict"]) for row in rows])
    assert len(within) > len(rows) / 2, printed
    assert "the lab link differs" not in printed, printed  # same preset, and the idle RTT within tolerance


@pytest.mark.lab
@needs_lab
def test_a_slower_link_makes_link_bound_rows_slower_and_says_the_link_changed(
    lab_runs: LabRuns, tmp_path: Path
) -> None:
    first, _, slow = lab_runs.ids
    printed, lines = _compare(lab_runs, first, slow, tmp_path / "slower.md")
    flat = " ".join(printed.split())  # warnings wrap at the console's width
    assert "the lab link differs (rate 533 → 300 Mbit/s): the network changed, not the protocol." in flat, printed
    # the raw-TCP probe fell with the link, in both directions
    assert "raw TCP upload went from" in flat and "raw TCP download went from" in flat, printed

    goodput = lab_runs.docs[2]["link"]["expected_goodput_bytes_per_s"]  # what the slower link can carry
    # each row's slowest timed copy: a row is held back by the slower link only if every copy ran faster than that
    # link carries (a copy already at its rate, as one of ftplib's downloads now and then is, is not slowed by it)
    before = {
        (f"{r['protocol']}/{r['client']}", r["direction"]): min(
            (s["bytes"] / s["seconds"] for s in r["samples"] if s["seconds"] and not s.get("error")), default=0.0
        )
        for r in lab_runs.docs[0]["results"]
    }
    short = {"upload": "up", "download": "down"}
    bound = [key for key, rate in before.items() if rate and rate > LINK_BOUND_MARGIN * goodput]
    print("slowest copy over the slower link's goodput:", {k: round(r / goodput, 2) for k, r in before.items()})
    # on this machine every one of these clients streams well above 300 Mbit/s on wifi-ac: most rows must count
    assert len(bound) >= len(before) / 2, (before, goodput)
    verdicts = {(line["client"], line["dir"]): line["verdict"] for line in lines}
    for label, direction in bound:
        assert verdicts[(label, short[direction])] == SLOWER, printed
