#!/usr/bin/env python3
"""Write the reference pages generated from the code: docs/config.md from the settings table, docs/commands.md
from every command's --help.

Run it after changing a setting (workbench/core/settings.py): `.venv/bin/python scripts/gen_docs.py`.
`--check` writes nothing and exits 1 when a page is out of date (the tests run it so).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from workbench.cli.commands_page import commands_page, same_words
from workbench.core.settings import config_page

ROOT = Path(__file__).resolve().parents[1]
PAGES: dict[str, Callable[[], str]] = {"docs/config.md": config_page, "docs/commands.md": commands_page}
# How a page is compared with its rendering: the commands page by its words (typer and rich lay the help out as
# their version does); the others byte for byte.
SAME: dict[str, Callable[[str, str], bool]] = {"docs/commands.md": same_words}


def stale() -> list[str]:
    """The pages whose file says other than what the code renders now."""
    return [
        name
        for name, render in PAGES.items()
        if not (ROOT / name).is_file() or not SAME.get(name, str.__eq__)((ROOT / name).read_text(), render())
    ]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        out_of_date = stale()
        for name in out_of_date:
            print(f"{name} is out of date: run scripts/gen_docs.py", file=sys.stderr)
        return 1 if out_of_date else 0
    for name, render in PAGES.items():
        (ROOT / name).write_text(render())
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
