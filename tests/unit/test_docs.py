"""The documentation stays true to the code: the README's sample is what `workbench report` prints for the stored
real run, the commands page is the command line's own help, every link between the pages leads somewhere, and the
README stays a page for the person who wants the answer (reference material lives in docs/)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.readme_lines import PAGES
from workbench.cli.commands_page import command_paths, commands_page, same_words, words

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 250


def _script(name: str) -> ModuleType:
    """One of scripts/*.py, loaded as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= README_MAX_LINES


def test_the_readme_keeps_the_two_command_quick_start() -> None:
    from tests.readme_lines import parse

    lines = [ln.command for ln in parse(README.read_text(encoding="utf-8"))]
    assert "./setup.sh" in lines and "./test.sh" in lines
    assert lines.index("./test.sh") == lines.index("./setup.sh") + 1


def test_the_readme_sample_is_what_report_prints_for_the_stored_real_run() -> None:
    sample = _script("readme_sample")
    readme = README.read_text(encoding="utf-8")
    assert readme.count(sample.START) == 1 and readme.count(sample.END) == 1, "the sample's markers"
    doc = json.loads(sample.SAMPLE.read_text(encoding="utf-8"))
    protocols = sample.LAB[sample.LAB.index("--protocols") + 1].split(",")
    assert doc["run"]["plan"]["protocols"] == protocols and doc["link"]["preset"] == "wifi-ac", "the script's lab run"
    assert sample.with_block(readme, doc) == readme, "stale sample: run python scripts/readme_sample.py --render"
    shown = readme.split(sample.START, 1)[1].split(sample.END, 1)[0]
    assert "verdict:" in shown and "% TCP" in shown and "raw TCP" in shown
    for row in doc["results"]:  # every row of the run is in the table the README shows
        assert f"{row['protocol']}/{row['client']}" in shown, row["client"]


def test_the_sample_block_changes_when_the_run_does() -> None:
    sample = _script("readme_sample")
    readme = README.read_text(encoding="utf-8")
    doc = json.loads(sample.SAMPLE.read_text(encoding="utf-8"))
    doc["results"] = doc["results"][:1]
    assert sample.with_block(readme, doc) != readme
    with pytest.raises(ValueError, match="markers"):
        sample.with_block("no markers here", doc)


def test_the_commands_page_is_the_command_lines_own_help() -> None:
    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    # its words, not its layout: another typer or rich release may draw the boxes or wrap lines otherwise
    assert words(page) == words(commands_page()), "docs/commands.md is out of date: run scripts/gen_docs.py"
    paths = command_paths()
    assert ("run",) in paths and ("servers", "up") in paths and ("fleet-member",) not in paths
    assert "## workbench servers up" in page and "--bind" in page


def test_the_commands_page_check_ignores_the_layout_but_not_the_words() -> None:
    page = commands_page()
    line = next(ln for ln in page.splitlines() if ln.startswith("│ --markdown "))
    # another box style, wider padding, and the help wrapped onto a second row
    other = page.replace("╭", "┏").replace("─", "━").replace("│", "┃").replace("  ", "   ")
    other = other.replace("Also write the comparison", "Also write the\n┃              comparison", 1)
    assert other != page and same_words(page, other)
    assert not same_words(page, page.replace(line, "", 1)), "an option gone"
    assert not same_words(page, page.replace("Also write the comparison", "Also write a comparison", 1)), "help text"
    assert not same_words(page, page.replace("--markdown", "--md", 1)), "an option renamed"
    gen_docs = _script("gen_docs")
    assert gen_docs.SAME["docs/commands.md"] is same_words


def _anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # no headings inside code
    return {_anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_between_the_pages_leads_somewhere(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # another site: not checked here
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.is_file(), f"{page.name} links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(linked), f"{page.name} links to {target}: no such heading"


def test_the_anchor_rule_matches_githubs() -> None:
    assert _anchor("Servers you already have (`run URL`)") == "servers-you-already-have-run-url"
    assert _anchor("Many clients, one server (`fleet`)") == "many-clients-one-server-fleet"
    assert _anchor("workbench files make") == "workbench-files-make"


def test_writing_the_commands_page_leaves_later_help_at_the_callers_width() -> None:
    """In a fresh process (typer reads its width once, when its help renderer is first imported): after the page's
    100 columns, a --help asked at 200 columns is drawn at 200."""
    code = (
        "from typer.testing import CliRunner\n"
        "from workbench.cli.app import app\n"
        "from workbench.cli.commands_page import commands_page\n"
        "commands_page()\n"
        "out = CliRunner().invoke(app, ['--help'], env={'COLUMNS': '200'}).stdout\n"
        "print(max(len(line) for line in out.splitlines()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TERMINAL_WIDTH"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, env=env)
    assert int(done.stdout.strip()) > 150, done.stdout


def test_ci_runs_the_readmes_test_command_and_its_two_steps_are_the_whole_suite() -> None:
    """.ci/run calls ./test.sh; its two steps' markers select every test once ("not lab and not serial", then
    "lab or serial")."""
    root = README.parent
    assert "./test.sh" in (root / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    steps = re.findall(r'^run_step \S+ "([^"]+)"', (root / "test.sh").read_text(encoding="utf-8"), re.MULTILINE)
    assert steps == ["not lab and not serial", "lab or serial"], steps
