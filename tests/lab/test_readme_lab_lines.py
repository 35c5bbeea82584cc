"""The README's `workbench lab` lines, taken from README.md at test time (tests/readme_lines.py), each run through bash
with the installed console script first on PATH and HOME a fresh directory.

As written, `workbench lab` copies 64 MiB files and 100 × 64 KiB both ways, 1 + 3 times, with each protocol's Python
client and native reference: minutes. There are ten lab lines, so each runs the smallest plan the lab takes, by flags
APPENDED to the line (click gives a single-valued option its last value; `--small none` empties the lab's small-file
list): one 64 KiB file, downloads only, one timed copy and no warm-up, half a second of raw TCP, no goodput meter, and
`--protocols http/aiohttp` where the line names no protocols of its own (a line's own `--protocols smb,sftp` or `rsync`
is its subject and is kept). The bare `workbench lab` line also carries the lab's output and plan options (`--db`,
`--markdown`, `--csv`, `--label`, `--wide`, `--stall-timeout`), so each of the lab's options runs from the console
script somewhere (tests/integration/test_commands.py checks that). Every line must exit 0 with no traceback; a line
writing `--json` must leave a valid document. About 15 s a line on a quiet 2-core machine, most of it building the lab
and probing its link: the lines run beside the scenarios' reduced forms (tests/lab/conftest.py, `concurrent_lab`).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from tests.lab.concurrent_labs import ConcurrentLabs, LabJob
from tests.readme_lines import ReadmeLine, readme_lines, with_flags
from tests.schema_check import assert_valid_run_document

SCRIPT = Path(sys.prefix) / "bin" / "workbench"
SMALLEST = ["--sizes", "64K", "--small", "none", "--directions", "download", "--repeat", "1", "--warmup", "0"]
SMALLEST += ["--tcp-duration", "0.5", "--goodput-duration", "0"]  # a figure of raw TCP, none of the link's meter
# The lab's output and plan options, run once (on the first lab line).
OUTPUTS = ["--db", "lab-runs.sqlite", "--markdown", "lab.md", "--csv", "lab.csv", "--label", "readme lab"]
OUTPUTS += ["--wide", "--stall-timeout", "20"]
NO_LAB = (["--scenario", "list"],)  # lines that list and build no lab: run as written

LAB_LINES = [ln for ln in readme_lines() if ln.is_lab]
# the documented bare `workbench lab` (what setup.sh runs) carries the output options
BARE = next((ln for ln in LAB_LINES if ln.argv == ["workbench", "lab"]), None)


def bounds_for(line: ReadmeLine) -> list[str]:
    argv = line.argv
    if any(argv[2:] == list(words) for words in NO_LAB):
        return []
    flags = list(SMALLEST)
    if "--protocols" not in argv:
        flags += ["--protocols", "http/aiohttp"]
    if not {"--servers", "stock"} <= set(argv):  # no figure of iperf3 is read; a stock lab's raw TCP is iperf3
        flags += ["--skip-iperf3"]
    if line is BARE:
        flags += OUTPUTS
    return flags


pytestmark = [pytest.mark.lab, pytest.mark.skipif(lab_unavailable() is not None, reason=f"lab: {lab_unavailable()}")]


def test_the_readme_has_lab_lines() -> None:
    assert len(LAB_LINES) >= 5, [ln.command for ln in LAB_LINES]
    assert BARE is not None, [ln.command for ln in LAB_LINES]


def _run_line(line: ReadmeLine, home: Path) -> tuple[str, subprocess.CompletedProcess[str]]:
    """The line through bash in `home` (its HOME and working directory): (the command run, its outcome)."""
    command = with_flags(line.command, bounds_for(line))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_") and k not in ("COLUMNS", "BASH_ENV")}
    env.update(HOME=str(home), PATH=f"{SCRIPT.parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}")
    env["COLUMNS"] = "200"
    proc = subprocess.run(
        ["bash", "-c", command],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )
    return command, proc


def _key(line: ReadmeLine) -> str:
    return f"{LAB_LINES.index(line)}: {line.command}"


def concurrent_lab_jobs(items: list[pytest.Item], tmp_path_factory: pytest.TempPathFactory) -> list[LabJob]:
    """Every selected lab line, beside the other concurrent lab runs (tests/lab/conftest.py): each builds its own
    lab (namespaces named by its process), and most of a line's time is building it, so they overlap."""
    selected = [
        item.callspec.params["line"]
        for item in items
        if getattr(item, "originalname", "") == "test_readme_lab_line_runs" and hasattr(item, "callspec")
    ]
    jobs = []
    for line in selected:
        home = tmp_path_factory.mktemp("readme-lab")
        jobs.append(LabJob(_key(line), home, functools.partial(_run_line, line, home)))
    return jobs


@pytest.mark.concurrent_lab
@pytest.mark.parametrize("line", LAB_LINES, ids=[ln.label() for ln in LAB_LINES])
def test_readme_lab_line_runs(line: ReadmeLine, concurrent_labs: ConcurrentLabs) -> None:
    assert SCRIPT.is_file(), f"no console script at {SCRIPT}"
    tmp_path, (command, proc) = concurrent_labs.result(_key(line))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, (command, proc.returncode, text[-6000:])
    assert "Traceback" not in text and "internal error" not in text, text[-6000:]
    if line.argv[2:] == ["--scenario", "list"]:
        assert "wifi-ac-64k" in proc.stdout, proc.stdout
        return
    assert "raw TCP" in proc.stdout or "raw-TCP" in proc.stdout, proc.stdout[-3000:]
    if "--json" in line.argv:
        stem = Path(line.argv[line.argv.index("--json") + 1])
        written = sorted(tmp_path.glob(f"{stem.stem}*.json"))
        assert written, sorted(p.name for p in tmp_path.iterdir())
        for path in written:
            doc = json.loads(path.read_text())
            assert_valid_run_document(doc)
            assert doc["run"]["plan"]["sizes"] == [64 << 10], doc["run"]["plan"]
    if line is BARE:
        assert (tmp_path / "lab-runs.sqlite").exists() and (tmp_path / "lab.md").exists()
        assert (tmp_path / "lab.csv").read_text().startswith("run_id")
