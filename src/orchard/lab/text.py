"""Text from outside the lab, shown safely: one function per kind of output, every renderer calls them.

Hypothesis titles, causes and changes (a user or a planner agent writes
them), reasons (which quote build and test output) and whatever else a
worker wrote are stored as given and shown through here, never raw:

- `visible`: a terminal line (`orchard status`, `orchard backlog`, the
  loop's log lines) and a line of a commit message the lab makes on the
  user's main (read in a terminal by `git log`);
- `inline`: one line of the Markdown files (JOURNAL.md, backlog.md,
  LEADERBOARD.md, FINAL_REPORT.md, REVIEW.md, pull-request bodies), and
  `code` for such text inside a code span;
- `html_text`: text on an HTML page (report.html, the dashboard).

Every one of them writes what a terminal would obey or hide as its Python
escape, so a reader sees what was sent: C0 and C1 controls (ESC, BEL, an
OSC 52 clipboard write, the one-byte CSI 0x9b), DEL, the bidirectional
embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069: text that
reads in another order than it runs), and bytes that were not UTF-8 (kept
as Python's surrogate escapes, shown as `\\x9b`). `inline` also neutralises
Markdown: line breaks become spaces, so the text cannot start a heading,
list or table row of its own; `|` cannot end a table cell; a leading block
marker, HTML, entity references, emphasis, backticks and the bracket that
closes a link's or image's text are escaped, so `[x](javascript:...)` and `![x](https://...)`
stay text. Escapes are Markdown's own backslashes, never HTML entities: the
files are read as plain text in a terminal too, where `&lt;` would show as
such, and a comparison such as `effect < floor` is left as it is. `a_few`
keeps a list of names (files, flags) to one line of a reason.
"""

from __future__ import annotations

import html
import re

# C0 but tab and newline, DEL, C1, bidi embeddings/overrides and isolates, lone surrogates (bytes not UTF-8)
CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"  # a character class body
_UNSAFE = re.compile(f"[{CONTROL}]")
_UNSAFE_IN_A_LINE = re.compile(f"[\t\n{CONTROL}]")  # a one-line field escapes tab and newline too
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, as Python's surrogateescape keeps it
        return f"\\x{code - 0xDC00:02x}"
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: object) -> str:
    """`text` on one line with every control character written as its escape (`\\x1b`, `\\n`, `\\u202e`)."""
    return _UNSAFE_IN_A_LINE.sub(_escape, str(text))


def html_text(text: object) -> str:
    """`text` for an HTML page: its markup escaped, its control characters written as escapes, lines kept."""
    return html.escape(_UNSAFE.sub(_escape, str(text)))


# Every character Python's str.splitlines() breaks on: a reader's renderer may break on any of them.
_BREAKS = re.compile(r"[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
_BLOCK_START = re.compile(r"^(\s*)([#>+*=_~`-])")
# An ordered-list marker: its punctuation is escaped (a backslash before a digit is shown as typed).
_ORDERED_START = re.compile(r"^(\s*\d+)([.)])(?=\s|$)")
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")  # a tag, comment or autolink opens this way; `a < b` does not
_ENTITY = re.compile(r"&(?=#?\w+;)")
# Inline markup: emphasis, code spans, and the `]` that would close a link's or image's text (`](`, `][`, `]:`);
# `_` inside a word (`parse_file`) and a list's brackets (`["a", "b"]`) are left as typed
_INLINE_MARKUP = re.compile(r"[*`]|\](?=[(\[:])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def inline(text: object) -> str:
    """`text` as one line of Markdown that renders as exactly these characters (no markup of its own)."""
    line = _BREAKS.sub(" ", str(text))
    line = line.replace("\\", "\\\\").replace("|", "\\|")
    line = _UNSAFE.sub(_escape, line)
    line = _INLINE_MARKUP.sub(lambda m: "\\" + m.group(), line)
    line = _ENTITY.sub("\\&", _HTML_START.sub("\\<", line))
    line = _ORDERED_START.sub(lambda m: m.group(1) + "\\" + m.group(2), line)
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), line)


def within(text: object) -> str:
    """`text` inside a line of Markdown, after other text: `inline` without the escapes only a line's start needs
    (`-40%` stays `-40%`, not `\\-40%`, which a reader in a terminal would see as typed)."""
    return inline("." + str(text))[1:]


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def with_code(text: object) -> str:
    """`text` (a check's detail: "`make` passed") inside a line of Markdown: each `...` pair kept as a code span
    (its text as `code` shows it), the rest as `within`; a backtick without its pair is escaped, so no span is
    left open."""
    line, parts, at = str(text), [], 0
    for span in _CODE_SPAN.finditer(line):
        parts += [within(line[at:span.start()]) if at < span.start() else "", code(span.group(1))]
        at = span.end()
    return "".join([*parts, within(line[at:]) if at < len(line) else ""])


def code(text: object) -> str:
    """`text` as one Markdown code span, its backticks included: a fence longer than any run of them inside."""
    line = _UNSAFE.sub(_escape, _BREAKS.sub(" ", str(text)))
    fence = "`" * (max((len(run) for run in re.findall("`+", line)), default=0) + 1)
    padded = f" {line} " if line.startswith("`") or line.endswith("`") else line
    return f"{fence}{padded}{fence}"


SHOWN_NAMES = 3


def a_few(names: list[str] | tuple[str, ...], shown: int = SHOWN_NAMES) -> str:
    """Some names and how many more: a reason stays one line however many files there are."""
    listed = ", ".join(names[:shown])
    more = len(names) - shown
    return f"{listed} and {more} more" if more > 0 else listed
