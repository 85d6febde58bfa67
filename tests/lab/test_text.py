"""Outside text in the notebook's Markdown: escaped as Markdown, so a terminal reader sees no HTML entities."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from orchard.lab.judge.verdict_view import GateView, VerdictView, markdown_table
from orchard.lab.text import inline


def _rendered_text(markdown: str) -> str:
    """What a reader of the rendered Markdown sees: the HTML's text."""
    rendered = MarkdownIt("commonmark").render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


@pytest.mark.parametrize("text", [
    "<script>alert(1)</script>", "effect -3.1% < floor 5.0%", "a > b", "AT&amp;T and R&D", "<!-- hidden -->",
    "cost <https://example.com>", "x | y \\ z", "20.5x faster", "1. first", "3) third", "# not a heading",
    "- not an item",
])
def test_inline_text_renders_as_itself_without_html_entities(text: str) -> None:
    line = inline(text)
    assert "&lt;" not in line and "&gt;" not in line and "&amp;" not in line.replace("\\&amp;", "")
    assert _rendered_text(line) == text, (line, MarkdownIt("commonmark").render(line))


def test_a_leading_number_is_left_alone_unless_it_would_start_a_list() -> None:
    assert inline("20.5x faster") == "20.5x faster"
    assert inline("1. first") == "1\\. first"


def test_a_comparison_in_a_reason_stays_readable_in_the_raw_file() -> None:
    assert inline("effect -3.1% < floor 5.0%") == "effect -3.1% < floor 5.0%"


def test_a_gate_detail_in_a_report_is_escaped_as_markdown() -> None:
    gate = GateView("build", passed=False, detail="<b>exit 1</b> & done")
    view = VerdictView(verdict="ERROR", pairs=0, seed=7, lock_wait_ms=0.0, reasons=(), metrics=(), gates=(gate,))
    line = markdown_table(view)[-1]
    assert "&lt;" not in line and "\\<b>exit 1\\</b>" in line

