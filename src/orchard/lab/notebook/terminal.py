"""Outside text on a terminal: shown, never obeyed.

A hypothesis title, a worker's log line or a stop reason may hold escape
sequences: an OSC 52 write to the user's clipboard, a cursor move that
hides a line, a title change. Everything orchard prints from outside the
lab passes through here: `visible` shows each control character as its
Python escape (`\\x1b]52;...`), so a reader sees what was sent;
`CONTROL` is the one class of characters that counts as control (C0 but
tab and newline, DEL, C1), which `live.log_tail` removes from a worker's log.
"""

from __future__ import annotations

import re

CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f"  # a regular-expression character class body
_SHOWN = re.compile(f"[\t\n{CONTROL}]")  # a one-line field escapes tab and newline too


def visible(text: str) -> str:
    """`text` on one line with every control character written as its escape (`\\x1b`, `\\n`)."""
    return _SHOWN.sub(lambda match: repr(match.group())[1:-1], text)
