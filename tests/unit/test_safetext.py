"""workbench.shared.safetext: each destination (terminal, rich markup, CSV, Markdown, HTML, plots) against each
class of hostile words (control sequences, markup, formulas, structure, mathtext), and printable text kept."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from rich.console import Console

from workbench.shared.errors import ONE_LINE_MAX_CHARS, NetworkError
from workbench.shared.safetext import (
    for_csv_cell,
    for_html,
    for_markdown_cell,
    for_markdown_line,
    for_markup,
    for_plot,
    for_terminal,
)

OSC52 = "\x1b]52;c;aGVsbG8=\x07"  # writes the clipboard
CLEAR = "\x1b[2J"  # clears the screen
# Every control sequence and character a terminal acts on: 7-bit and 8-bit CSI/OSC/DCS, ST-terminated OSC, a
# reset (ESC c), C0 and C1 bytes, DEL.
CONTROLS = [
    OSC52,
    CLEAR,
    "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
    "\x1bc",
    "\x1bP1$r\x1b\\",
    "\x9b31m",
    "\x9d0;title\x9c",
    "\x00\x07\x08\x0b\x0c\x0e\x1f\x7f\x85\x90\x9f",
]
BIDI = "\u202eevil\u202c \u2066x\u2069 \u200f"
CONTROL_CHAR = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


@pytest.mark.parametrize("attack", CONTROLS)
def test_for_terminal_removes_every_control_sequence_whole(attack: str) -> None:
    shown = for_terminal(f"550 {attack} refused")
    assert not CONTROL_CHAR.search(shown), repr(shown)
    assert shown.startswith("550 ") and shown.endswith(" refused")
    assert "52;c;" not in shown and "[2J" not in shown  # no part of a sequence shows either


def test_for_terminal_keeps_printable_unicode_and_drops_bidi_overrides() -> None:
    assert for_terminal("Grüße — 日本 ✓ ≈4 ms ±σ") == "Grüße — 日本 ✓ ≈4 ms ±σ"
    assert for_terminal(BIDI) == "evil x "


def test_for_terminal_puts_text_on_one_line_unless_asked() -> None:
    assert for_terminal("a\nb\r\nc\td\u2028e") == "a b c d e"
    assert for_terminal("a\nb\tc\r\nd", one_line=False) == "a\nb\tc\nd"


def test_for_terminal_replaces_lone_surrogates_so_printing_cannot_fail() -> None:
    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    shown = for_terminal(name)
    assert shown == "caf\ufffd.txt"
    shown.encode("utf-8")


@pytest.mark.parametrize(
    "words", ["x [/] y", "[link=http://x]click[/link]", "[bold]B[/bold]", "[fd00::5]:5201", "a\\", "[/]\\[x]"]
)
def test_for_markup_prints_markup_as_typed(words: str) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, emoji=False, highlight=False)
    console.print(f"[yellow]note:[/] [bold]{for_markup(words)}[/]")  # a trailing backslash must not eat the [/]
    assert out.getvalue() == f"note: {words}\n"


def test_for_markup_removes_controls_before_escaping() -> None:
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(for_markup(f"{OSC52}[bold]x{CLEAR}"))
    assert out.getvalue() == "[bold]x\n"


@pytest.mark.parametrize(
    ("cell", "shown"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+1", "'+1"),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("-2+3", "'-2+3"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'=1"),  # the CR goes (a control character); what is left is still a formula
        ("-1", "-1"),
        ("-12.5", "-12.5"),
        ("-1e6", "-1e6"),
        ("-", "-"),
        ("server said: 550 =x", "server said: 550 =x"),
        ("two\nlines", "two\nlines"),
    ],
)
def test_for_csv_cell_neutralises_formulas_and_keeps_numbers(cell: str, shown: str) -> None:
    assert for_csv_cell(cell) == shown


def test_for_csv_cell_leaves_numbers_and_none_alone() -> None:
    assert for_csv_cell(-5) == -5 and for_csv_cell(-0.5) == -0.5 and for_csv_cell(None) is None
    assert for_csv_cell(f"x{OSC52}y") == "xy"


def _cells(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line)[1:-1]


@pytest.mark.parametrize("words", ["a|b", "a\nb\nc", "<script>alert(1)</script>", "[x](http://e)", "a\\|b", OSC52])
def test_for_markdown_cell_adds_no_cell_row_tag_or_link(words: str) -> None:
    cell = for_markdown_cell(words)
    line = f"| {cell} | 2 |"
    assert "\n" not in cell and "<script" not in cell.replace("\\<", "") and "](" not in cell.replace("\\](", "")
    assert len(_cells(line)) == 2
    assert not CONTROL_CHAR.search(cell)


def test_for_markdown_line_is_one_line_of_prose() -> None:
    line = for_markdown_line("host|x\n# heading\n| a | b |\n<img src=x>")
    assert "\n" not in line and "<img" not in line.replace("\\<", "") and "\\|" in line


@pytest.mark.parametrize("words", ["<script>alert(1)</script>", '"><img src=x>', f"a{OSC52}{CLEAR}b"])
def test_for_html_escapes_and_drops_controls(words: str) -> None:
    shown = for_html(words)
    assert "<" not in shown and '"' not in shown and not CONTROL_CHAR.search(shown)


def test_for_plot_never_lets_mathtext_parse_data() -> None:
    from matplotlib.figure import Figure

    for words in ("$x^2$", "$\\undefinedcommand$", "a$b", "\\$x$", "1 $ and 2 $"):
        label = for_plot(words)
        fig = Figure()
        text = fig.text(0, 0, label)
        assert text.get_text() == label
        fig.canvas.draw()  # mathtext would raise on an unknown command
        assert text._preprocess_math(label) == (words, False)  # shown as typed, never as math


def test_one_line_drops_controls_and_cuts_a_dump() -> None:
    error = NetworkError(f"550 {OSC52}{CLEAR}nope\r\nsecond line", "check\x1b[31m the server")
    assert error.one_line() == "550 nope second line (check the server)"
    long = NetworkError("550 " + "x" * 1_000_000, "a hint").one_line()
    assert len(long) < ONE_LINE_MAX_CHARS + 100 and long.endswith("more characters) (a hint)")


# Prose and cells that a Markdown renderer would otherwise read as structure: headings, quotes, fences, lists,
# thematic breaks, emphasis, code, links, images, autolinks, HTML, entities, table pipes, indented code.
MARKDOWN_STRUCTURE = [
    "# heading",
    "###### six",
    "> quoted",
    "```python",
    "~~~",
    "    indented code",
    "1. numbered",
    "2) numbered",
    "- dash item",
    "+ plus item",
    "* star item",
    "***",
    "___",
    "*emphasis* and **strong** and _under_ and __double__ and snake_case_",
    "`code` and ``more``",
    "~~struck~~",
    "[a link](http://x.example)",
    "![an image](x.png)",
    "[ref]: http://x.example",
    "<http://x.example>",
    "<b>bold</b> &amp; &#60; &copy;",
    "a | b | c",
    "trailing backslash \\",
    "\\# escaped already",
    "x<br>y",
    "  - spaced item",
    "10. ten",
    "= equals",
    "-- dashes",
    "a - b + c = d",
    "$x^2$",
    "{#id .class}",
    "see www.example.com, http://x.example/a, admin@x.example and mailto:a@b.example",
    ":warning: :+1:",
]


def _md_tokens(source: str) -> list[Any]:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").enable("strikethrough").parse(source)


def _inline_text(token: Any) -> str:
    assert token.type == "inline"
    kinds = {child.type for child in token.children}
    assert kinds <= {"text"}, (token.content, [(c.type, c.content) for c in token.children])
    return "".join(child.content for child in token.children)


@pytest.mark.parametrize("words", MARKDOWN_STRUCTURE)
def test_for_markdown_line_in_a_list_item_is_only_text(words: str) -> None:
    tokens = _md_tokens(f"- {for_markdown_line(words)}\n")
    kinds = [t.type for t in tokens]
    assert kinds == [
        "bullet_list_open", "list_item_open", "paragraph_open", "inline", "paragraph_close", "list_item_close",
        "bullet_list_close",
    ], kinds  # fmt: skip
    assert _inline_text(tokens[3]) == words.strip()  # shown as typed: no escape visible


@pytest.mark.parametrize("words", MARKDOWN_STRUCTURE)
def test_for_markdown_line_as_a_paragraph_is_only_text(words: str) -> None:
    tokens = _md_tokens(f"{for_markdown_line(words)}\n")
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert _inline_text(tokens[1]) == words.strip()


@pytest.mark.parametrize("words", MARKDOWN_STRUCTURE)
def test_for_markdown_cell_is_only_text_in_its_cell(words: str) -> None:
    tokens = _md_tokens(f"| a | b |\n|---|---|\n| {for_markdown_cell(words)} | 2 |\n")
    cells = [t for t in tokens if t.type == "inline"]
    assert len(cells) == 4, [t.content for t in cells]
    assert _inline_text(cells[2]) == words.strip()


def test_figures_names_and_times_read_as_they_are() -> None:
    assert for_markdown_cell("1.5") == "1.5" and for_markdown_cell("-3.25") == "-3.25" == for_markdown_line("-3.25")
    assert (
        for_markdown_line("http/aiohttp at 04:32, 127.0.0.1:5201 (a - b)")
        == "http/aiohttp at 04:32, 127.0.0.1:5201 (a - b)"
    )


def test_bare_links_are_not_left_for_an_autolinking_renderer() -> None:
    # GitHub's renderer links www.…, http://… and user@host.… without brackets; escaped, each is text
    assert for_markdown_line("see www.example.com") == "see www\\.example.com"
    assert for_markdown_line("http://x.example/a") == "http\\://x.example/a"
    assert for_markdown_line("mail admin@x.example") == "mail admin\\@x.example"


def test_cut_says_where_it_cut() -> None:
    from workbench.shared.safetext import cut

    assert cut("abc", 3) == "abc" and cut("abcd", 3) == "ab…"
    assert cut("abcd", 3, say_rest=True) == "abc… (1 more characters)"
    assert len(for_plot("x" * 100)) == 48
