"""Text from outside the lab, placed in the notebook's Markdown: always one line of plain text.

Hypothesis titles, causes and changes (a planner agent writes them), reasons
(which quote build and test output) and whatever else a worker wrote end up
in backlog.md, JOURNAL.md, LEADERBOARD.md and FINAL_REPORT.md. `inline` is
the one function every renderer passes such text through: line breaks
become spaces, so the text cannot start a heading, list or table row of its
own; `|` cannot end a table cell; a leading block marker, HTML and entity
references are escaped, so `- # title` stays a list item with a title in
it. Escapes are Markdown's own backslashes, never HTML entities: the files
are read as plain text in a terminal too, where `&lt;` would show as such,
and a comparison such as `effect < floor` is left as it is. `a_few` keeps
a list of names (files, flags) to one line of a reason.
"""

from __future__ import annotations

import re

# Every character Python's str.splitlines() breaks on: a reader's renderer may break on any of them.
_BREAKS = re.compile(r"[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
_BLOCK_START = re.compile(r"^(\s*)([#>+*=_~`-])")
# An ordered-list marker: its punctuation is escaped (a backslash before a digit is shown as typed).
_ORDERED_START = re.compile(r"^(\s*\d+)([.)])(?=\s|$)")
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")  # a tag, comment or autolink opens this way; `a < b` does not
_ENTITY = re.compile(r"&(?=#?\w+;)")


def inline(text: object) -> str:
    """`text` as one line of Markdown that renders as exactly these characters (no markup of its own)."""
    line = _BREAKS.sub(" ", str(text))
    line = line.replace("\\", "\\\\").replace("|", "\\|")
    line = _ENTITY.sub("\\&", _HTML_START.sub("\\<", line))
    line = _ORDERED_START.sub(lambda m: m.group(1) + "\\" + m.group(2), line)
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), line)


SHOWN_NAMES = 3


def a_few(names: list[str] | tuple[str, ...], shown: int = SHOWN_NAMES) -> str:
    """Some names and how many more: a reason stays one line however many files there are."""
    listed = ", ".join(names[:shown])
    more = len(names) - shown
    return f"{listed} and {more} more" if more > 0 else listed
