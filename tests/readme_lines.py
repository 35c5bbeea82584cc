"""The command lines of README.md, read from the README itself, so the tests that run them cannot drift from it.

A command line is a line of a fenced ```sh block (also ```bash, ```shell), with `\\` continuations joined and a
trailing `# comment` dropped. The tests run each line as written through bash (so `~` expands as a user's
shell expands it), after replacing only what names another machine (a reviewed table in each test module)
and appending flags that bound its size: a single-valued option typed twice takes its last value (click), so
an appended `--sizes 64K` replaces the line's `--sizes 16M,256M,1G`.

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
SHELL_FENCES = ("sh", "bash", "shell")
_COMMENT = re.compile(r"(^|\s)#.*$")


@dataclass(frozen=True)
class ReadmeLine:
    """One command line of the README: where it starts, and the command without its comment."""

    lineno: int  # 1-based line number in README.md of its first physical line
    written: str  # as written, continuations joined
    command: str  # without the trailing comment

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def is_lab(self) -> bool:
        return self.argv[:2] == ["workbench", "lab"]

    def label(self) -> str:
        """A test id: the line number and the command."""
        return f"L{self.lineno}: {self.command}"

    def substituted(self, table: Iterable[tuple[str, str]]) -> str:
        """The command with each (README text, replacement) of `table` that occurs in it replaced."""
        text = self.command
        for old, new in table:
            text = text.replace(old, new)
        return text


def _strip_comment(text: str, lineno: int) -> str:
    # Quotes would make "where the comment starts" a shell question; no README line has any, and a new one
    # with quotes fails here rather than being cut wrongly.
    if "'" in text or '"' in text:
        raise ValueError(f"README.md:{lineno}: quoted command lines are not parsed: {text}")
    stripped = _COMMENT.sub("", text).strip()
    if shlex.split(stripped) != shlex.split(text, comments=True):
        raise ValueError(f"README.md:{lineno}: cannot tell the command from its comment: {text}")
    return stripped


def parse(text: str) -> list[ReadmeLine]:
    """Every command line of every shell block of the Markdown `text`, in order."""
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
                raise ValueError(f"README.md:{start}: a continued line runs into the end of its block")
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
        found.append(ReadmeLine(start, written, _strip_comment(written, start)))
    if in_block:
        raise ValueError("README.md: a shell block is never closed")
    return found


def readme_lines(path: Path = README) -> list[ReadmeLine]:
    return parse(path.read_text(encoding="utf-8"))


def with_flags(command: str, flags: Iterable[str]) -> str:
    """`command` with `flags` appended (quoted for the shell)."""
    extra = shlex.join(list(flags))
    return f"{command} {extra}" if extra else command
