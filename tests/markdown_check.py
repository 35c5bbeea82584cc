"""Markdown as a renderer reads it: which structure a document holds, so that a test can tell the export's own
(headings, lists, tables) from structure that outside words (a server's reply, a host name) would have added."""

from __future__ import annotations

# What the Markdown export itself makes: one heading, paragraphs, bullet lists, tables, the verdict's bold label
# and the <br> joining a cell's lines. Anything else a renderer finds came from the hostile words.
_OWN_BLOCKS = set("heading paragraph bullet_list list_item table thead tbody tr th td inline".split())
_OWN_INLINE = {"text", "softbreak", "strong_open", "strong_close", "html_inline"}


def assert_no_markdown_from_data(text: str) -> None:
    """`text` (a run's Markdown export) renders to nothing but the export's own structure."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)
    blocks = {t.type.removesuffix("_open").removesuffix("_close") for t in tokens}
    assert blocks <= _OWN_BLOCKS, blocks - _OWN_BLOCKS
    assert sum(t.type == "heading_open" for t in tokens) == 1
    inline = [c for t in tokens if t.children for c in t.children]
    assert {c.type for c in inline} <= _OWN_INLINE, [(c.type, c.content) for c in inline if c.type not in _OWN_INLINE]
    assert {c.content for c in inline if c.type == "html_inline"} <= {"<br>"}
    assert sum(c.type == "strong_open" for c in inline) <= 1
