"""The command lines of the documentation (README.md, CONTRIBUTING.md, docs/*.md), read from the pages themselves,
so the tests that run them cannot drift from them.

A command line is a line of a fenced ```sh block (also ```bash, ```shell), with `\\` continuations joined and a
trailing `# comment` dropped. The tests run each line as written through bash (so `~` expands as a user's
shell expands it), after replacing only what names another machine (a reviewed table in each test module)
and appending flags that bound its size: a single-valued option typed twice takes its last value (click), so
an appended `--sizes 64K` replaces the line's `--sizes 16M,256M,1G`. A command written on several pages (the
README's lab lines are also the lab page's) is run once, where it first appears.

Used by tests/integration/test_readme_commands.py (every line but the lab's) and
tests/lab/test_readme_lab_lines.py (the `workbench lab` lines).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# The pages whose shell blocks are run, README first (the order a command's first appearance is taken in).
PAGES = (README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md")))
SHELL_FENCES = ("sh", "bash", "shell")
_COMMENT = re.compile(r"(^|\s)#.*$")


@dataclass(frozen=True)
class ReadmeLine:
    """One command line of a documentation page: where it starts, and the command without its comment."""

    lineno: int  # 1-based line number in its page of its first physical line
    written: str  # as written, continuations joined
    command: str  # without the trailing comment
    page: str = "README.md"  # the page's path in the repository

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def is_lab(self) -> bool:
        return self.argv[:2] == ["workbench", "lab"]

    @property
    def where(self) -> str:
        """page:line, for messages and as a key."""
        return f"{self.page}:{self.lineno}"

    def label(self) -> str:
        """A test id: the page, the line number and the command."""
        return f"{self.where}: {self.command}"

    def substituted(self, table: Iterable[tuple[str, str]]) -> str:
        """The command with each (README text, replacement) of `table` that occurs in it replaced."""
        text = self.command
        for old, new in table:
            text = text.replace(old, new)
        return text


def _strip_comment(text: str, where: str) -> str:
    # Quotes would make "where the comment starts" a shell question; no documented line has any, and a new one
    # with quotes fails here rather than being cut wrongly.
    if "'" in text or '"' in text:
        raise ValueError(f"{where}: quoted command lines are not parsed: {text}")
    stripped = _COMMENT.sub("", text).strip()
    if shlex.split(stripped) != shlex.split(text, comments=True):
        raise ValueError(f"{where}: cannot tell the command from its comment: {text}")
    return stripped


def parse(text: str, page: str = "README.md") -> list[ReadmeLine]:
    """Every command line of every shell block of the Markdown `text` (the page `page`), in order."""
    found: list[ReadmeLine] = []
    in_block = False
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        fence = raw.strip()
        if not in_block:
            if fence.startswith("```") and fence[3:].strip() in SHELL_FENCES:
                in_block = True
            continue
        if fence.startswith("```"):
            if pending:
                raise ValueError(f"{page}:{start}: a continued line runs into the end of its block")
            in_block = False
            continue
        if not pending and not raw.strip():
            continue
        if not pending:
            start = number
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1].strip())
            continue
        pending.append(raw.strip())
        written = " ".join(pending)
        pending = []
        if written.startswith("#"):
            continue  # a comment line of its own
        found.append(ReadmeLine(start, written, _strip_comment(written, f"{page}:{start}"), page))
    if in_block:
        raise ValueError(f"{page}: a shell block is never closed")
    return found


def readme_lines(pages: Iterable[Path] = PAGES) -> list[ReadmeLine]:
    """The command lines of `pages`, each command once (where it first appears)."""
    seen: set[str] = set()
    lines = []
    for path in pages:
        for line in parse(path.read_text(encoding="utf-8"), str(path.relative_to(REPO))):
            if line.command not in seen:
                seen.add(line.command)
                lines.append(line)
    return lines


def with_flags(command: str, flags: Iterable[str]) -> str:
    """`command` with `flags` appended (quoted for the shell)."""
    extra = shlex.join(list(flags))
    return f"{command} {extra}" if extra else command
