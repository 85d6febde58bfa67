"""Outside text in the notebook's Markdown: escaped as Markdown, so a terminal reader sees no HTML entities."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from orchard.lab.judge.verdict_view import GateView, VerdictView, markdown_table
from orchard.lab.text import code, html_text, inline, visible


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



HOSTILE = "t \x1b]52;c;cm0K\x07 \x9b2J \u202eexe \u2066x\u2069 \udc9b"
HOSTILE_SHOWN = "t \\x1b]52;c;cm0K\\x07 \\x9b2J \\u202eexe \\u2066x\\u2069 \\x9b"


def test_each_output_kind_writes_controls_bidi_and_bytes_that_are_not_utf8_as_escapes() -> None:
    """ESC, BEL, C1 CSI, the bidi overrides and isolates, a byte that was not UTF-8: shown, never obeyed."""
    assert visible(HOSTILE) == HOSTILE_SHOWN
    assert visible("a\tb\nc") == "a\\tb\\nc"
    assert inline(HOSTILE) == HOSTILE_SHOWN
    assert html_text(HOSTILE + " <b>") == HOSTILE_SHOWN + " &lt;b&gt;"
    assert html_text("two\nlines") == "two\nlines"
    assert code(HOSTILE) == f"`{HOSTILE_SHOWN}`"
    for shown in (visible(HOSTILE), inline(HOSTILE), html_text(HOSTILE), code(HOSTILE)):
        shown.encode("utf-8")  # writable anywhere: nothing of it is a lone surrogate any more


@pytest.mark.parametrize("text", [
    "see [docs](javascript:alert(1))", "![pixel](https://evil.example/p.png)", "[ref]: https://x", "`a` and `` b",
    "**bold** _it_ and parse_file_name", "[![x](https://a/b.png)](https://c)",
])
def test_inline_markup_renders_as_its_own_characters_never_a_link_image_or_code(text: str) -> None:
    page = MarkdownIt("commonmark").render(inline(text))
    assert "<a " not in page and "<img" not in page and "<code>" not in page and "<em>" not in page, page
    assert _rendered_text(inline(text)) == text


def test_a_snake_case_name_keeps_its_underscores_unescaped_in_the_raw_file() -> None:
    assert inline("cache parse_file results") == "cache parse_file results"


@pytest.mark.parametrize("text", ["plain", "a ` b", "``x``", "`edge"])
def test_code_keeps_backticks_inside_one_code_span(text: str) -> None:
    page = MarkdownIt("commonmark").render(code(text))
    assert page.count("<code>") == 1 and html.unescape(page.split("<code>")[1].split("</code>")[0]).strip() == \
        text.strip(), page
