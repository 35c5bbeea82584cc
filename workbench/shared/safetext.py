"""Words from outside (a server's reply, a fleet member's line, a file or host name, a label, an error) made safe
for the place they are shown in: the terminal, a CSV cell, Markdown, a plot, HTML.

The run keeps such words as they came (they are data); each renderer passes them through the function for its
destination at the point of display or export, so that no destination interprets them:

- for_terminal: no control character reaches the terminal (C0, DEL, C1; whole ESC, CSI and OSC sequences go,
  so `ESC]52;…` cannot write the clipboard nor `ESC[2J` clear the screen), no bidi override reorders the line,
  no lone surrogate (an undecodable file name) breaks the output's encoding. Printable Unicode stays.
- for_markup: that, escaped for rich's console markup, to sit inside a markup string (`[/]` and `[link=…]` show
  as typed). Text printed with `markup=False`, or as a rich `Text`, needs for_terminal only.
- for_csv_cell: a cell a spreadsheet does not take for a formula (`=`, `+`, `-`, `@`, tab, CR first get a `'`);
  numbers, negative ones too, stay numbers.
- for_markdown_cell / for_markdown_line: one table cell or one line of prose that adds no structure (no row
  break, cell break, HTML tag or link).
- for_html: escaped text with the control characters removed (they are not allowed in HTML or SVG text).
- for_plot: one short line for a matplotlib text artist, `$` escaped so that mathtext never parses data.
"""

from __future__ import annotations

import html
import re

# ESC sequences as terminals parse them, removed whole so that no part of one shows: CSI (ESC [ … final byte),
# OSC, DCS, SOS, PM and APC strings (ending at BEL or ESC \ ; of an unterminated one only the introducer goes,
# so that the words after it stay), and two-byte ESC X. The 8-bit forms start with the C1 bytes 0x9b (CSI),
# 0x9d (OSC), 0x90, 0x98, 0x9e, 0x9f and end at 0x9c (ST).
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: parameters, intermediates, the final byte (when there is one)
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?",  # any other escape (ESC c resets the terminal), with its intermediate bytes
)
# What is left of control characters after the sequences: C0 but newline and tab, DEL, C1.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Bidirectional embeddings, overrides and isolates (and the marks), which reorder how a line reads.
_BIDI = re.compile(r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Line breaks of every kind, for text shown on one line.
_BREAKS = re.compile(r"\r\n|[\n\r\t\v\f\x1c-\x1e\x85\u2028\u2029]")
# Lone surrogates (a name decoded with surrogateescape): they cannot be encoded to UTF-8 when printed.
_SURROGATES = re.compile(r"[\ud800-\udfff]")

# A number as a spreadsheet reads it: left as it is in a CSV cell.
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def strip_controls(text: str, one_line: bool = True) -> str:
    """`text` with ESC sequences, control characters, bidi overrides and lone surrogates removed. With
    `one_line` every line break (and tab) becomes a space; otherwise newlines and tabs stay."""
    text = _SURROGATES.sub("\ufffd", str(text))
    if one_line:
        text = _BREAKS.sub(" ", text)
    else:
        text = text.replace("\r\n", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    text = _SEQUENCES.sub("", text)
    text = _CONTROLS.sub("", text)
    return _BIDI.sub("", text)


def for_terminal(text: object, one_line: bool = True) -> str:
    """`text` safe to print with rich markup off (`markup=False`) or as a rich `Text`: see strip_controls."""
    return strip_controls(str(text), one_line)


def for_markup(text: object, one_line: bool = True) -> str:
    """`text` safe to embed in a rich markup string: for_terminal, then every tag-like `[…]` escaped."""
    from rich.markup import escape  # here, not at the top: errors.py imports this module, and rich is slow to load

    return escape(for_terminal(text, one_line))


def for_csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: a string starting with `= + - @`, a tab or a CR gets a leading
    `'` unless it is a plain number; control characters but newline and tab go. Anything not a string (a
    number, None) is returned as it is."""
    if not isinstance(value, str):
        return value
    text = strip_controls(value, one_line=False)
    if text.startswith(_FORMULA_START) and text != "-" and not _NUMBER.fullmatch(text):  # '-' alone: 'none'
        return "'" + text
    return text


# ASCII punctuation that opens structure anywhere in a line (a heading or a quote at its start too: emphasis,
# strikethrough, code, a link or image, a tag or autolink, an entity, a table cell, math, an attribute block, an
# email autolink), each made literal by a backslash as CommonMark allows for every ASCII punctuation character;
# `_` but between two letters or digits, where it never opens emphasis (mount_afp, tcp_rmem read as they are).
_MARKDOWN_ANYWHERE = re.compile(r"([\\`*~\[\]!<>&|#${}@]|_(?![^\W_])|(?<![^\W_])_)")
# ... and what does only in one place: a list item (its marker, then a space), a thematic break (`---`) or an
# ordered item (`1.` or `1)`, then a space) at the line's start;
# GitHub's autolinks: `www.` at a word's start, a `:` running into a scheme's `//` or a `mailto:` address. The
# rest (`.`, `,`, `-`, `:` before a digit or a space, `/`, `(`, quotes) stays as typed, so that the Markdown's
# figures, names and times read as they are (1.5, http/aiohttp, 04:32).
_MARKDOWN_START = re.compile(r"^(?:([-+])(?=[\s-]|$)|(\d{1,9})([.)])(?=\s|$))")
_MARKDOWN_AUTOLINK = re.compile(r"(?i)(?<![\w.])(www)\.|:(?=[^\s\d])")


def _markdown_inline(text: str, block: bool) -> str:
    """`text` escaped as inline Markdown; `block`: it starts a line, where a list or a break could begin (a table
    cell holds inline Markdown only: its `-` is a dash)."""
    # Stripped: leading spaces would make indented code (and a list item's content starts after its marker).
    text = _MARKDOWN_ANYWHERE.sub(r"\\\1", text.strip())
    text = _MARKDOWN_AUTOLINK.sub(lambda m: f"{m.group(1)}\\." if m.group(1) else "\\:", text)
    if not block:
        return text
    return _MARKDOWN_START.sub(lambda m: f"\\{m.group(1)}" if m.group(1) else f"{m.group(2)}\\{m.group(3)}", text)


def for_markdown_cell(text: object) -> str:
    """`text` as one GitHub-flavoured Markdown table cell that adds no structure: what would open any
    backslash-escaped (no pipe ends the cell, nothing opens a tag, a link or emphasis), no newline the row (lines
    are joined with `<br>`)."""
    lines = strip_controls(str(text), one_line=False).split("\n")
    return "<br>".join(_markdown_inline(line, block=False) for line in lines)


def for_markdown_line(text: object) -> str:
    """`text` as one line of Markdown prose (a list item, a paragraph) that adds no structure: on one line, no
    leading or trailing space, what would open any backslash-escaped (no heading, quote, fence, list, break,
    emphasis, code, link, autolink, tag, entity or table cell comes of it)."""
    return _markdown_inline(strip_controls(str(text), one_line=True), block=True)


def for_html(text: object) -> str:
    """`text` escaped for HTML text or an attribute, without the control characters HTML does not allow."""
    return html.escape(strip_controls(str(text), one_line=False))


def cut(text: str, max_chars: int, say_rest: bool = False) -> str:
    """`text` cut to `max_chars` characters, an ellipsis saying so: "…" as the last of them, or with `say_rest`
    after them with how many more there were ("… (N more characters)")."""
    if len(text) <= max_chars:
        return text
    if say_rest:
        return f"{text[:max_chars]}… ({len(text) - max_chars} more characters)"
    return text[: max_chars - 1] + "…"


# A plot's label longer than this is cut: a tick label of a few hundred characters squeezes the axes to nothing.
PLOT_MAX_CHARS = 48


def for_plot(text: object, max_chars: int = PLOT_MAX_CHARS) -> str:
    """`text` for a matplotlib text artist (a title, a tick label, a legend entry): one line of at most
    `max_chars` characters, no control characters, every `$` escaped so that mathtext never parses it."""
    return cut(strip_controls(str(text), one_line=True), max_chars).replace("$", r"\$")
