"""An experiment's patch as a code review shows it: per file, each line marked added or removed, its code coloured.

Pygments colours the code by each file's language (guessed from its name);
the old and new sides of a file are lexed as two whole texts, so a string or
comment that spans lines keeps its colour, and the tokens are cut back into
the diff's lines. A file pygments does not know is shown uncoloured, still
marked line by line. Everything is escaped: a patch is a worker's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

from orchard.lab.text import html_text as escape

STYLE_SCOPE = ".diff"
_FILE = re.compile(r"^diff --git a/(.*?) b/(.*)$")


@dataclass(frozen=True)
class FileDiff:
    path: str
    lines: tuple[str, ...]  # the file's part of the patch, its `diff --git` line first

    @property
    def added(self) -> int:
        return sum(1 for line in self.lines if line.startswith("+") and not line.startswith("+++"))

    @property
    def removed(self) -> int:
        return sum(1 for line in self.lines if line.startswith("-") and not line.startswith("---"))


def files_of(patch: str) -> list[FileDiff]:
    """The patch cut at each `diff --git` line (text before the first is kept as a file of its own)."""
    parts: list[tuple[str, list[str]]] = []
    for line in patch.splitlines():
        found = _FILE.match(line)
        if found or not parts:
            parts.append((found.group(2) if found else "", []))
        parts[-1][1].append(line)
    return [FileDiff(path, tuple(lines)) for path, lines in parts]


def _css_class(kind: _TokenType) -> str:
    while kind not in STANDARD_TYPES and kind.parent is not None:
        kind = kind.parent
    return str(STANDARD_TYPES.get(kind, ""))


@cache
def _lexer(path: str) -> Lexer | None:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _coloured_lines(code: list[str], lexer: Lexer | None) -> list[str]:
    """Each line of `code` as escaped HTML, its tokens in pygments' short classes."""
    if lexer is None or not code:
        return [escape(line) for line in code]
    lines: list[str] = [""]
    for kind, value in lexer.get_tokens("\n".join(code)):
        css = _css_class(kind)
        for number, piece in enumerate(value.split("\n")):
            if number:
                lines.append("")
            if piece:
                lines[-1] += f"<span class={css}>{escape(piece)}</span>" if css else escape(piece)
    return (lines + [""] * len(code))[: len(code)]


def _line_kind(line: str) -> str:
    if line.startswith(("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file", "similarity",
                        "rename ", "old mode", "new mode", "Binary files")):
        return "meta"
    return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")


def file_html(diff: FileDiff) -> str:
    """One file of the patch as a table of lines: the sign, then the coloured code."""
    lexer = _lexer(diff.path) if diff.path else None
    kinds = [_line_kind(line) for line in diff.lines]
    old = [i for i, k in enumerate(kinds) if k in ("ctx", "del")]
    new = [i for i, k in enumerate(kinds) if k == "add"]
    shown: dict[int, str] = {}
    for indices in (old, new):
        for index, html in zip(indices, _coloured_lines([diff.lines[i][1:] for i in indices], lexer), strict=True):
            shown[index] = html
    rows = []
    for index, (line, kind) in enumerate(zip(diff.lines, kinds, strict=True)):
        code = shown.get(index)
        text = escape(line) if code is None else escape(line[:1]) + code
        rows.append(f"<tr class={kind}><td><pre>{text}</pre></td></tr>")
    head = f"<code>{escape(diff.path or '(patch header)')}</code> +{diff.added} −{diff.removed}"
    return f"<details open class=diff-file><summary>{head}</summary><table class=diff>{''.join(rows)}</table></details>"


def patch_html(patch: str) -> str:
    if not patch.strip():
        return "<p class=muted>no patch: the worker changed nothing, or its change was refused before judging</p>"
    return "".join(file_html(diff) for diff in files_of(patch))


@cache
def diff_style() -> str:
    """The CSS of the coloured code and of the added, removed and hunk lines. The code is set in a named
    monospace at its table's size: `pre`'s own .85em of a bare `monospace` (13 px in browsers) drew it at 9 px."""
    tokens = HtmlFormatter(style="default").get_style_defs(STYLE_SCOPE)
    lines = (".diff{border-collapse:collapse;width:100%;font-size:.9em}.diff td{border:0;padding:0 .4em}"
             ".diff pre{background:none;margin:0;padding:0;white-space:pre-wrap;font-size:1em;"
             "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace}"
             ".diff tr.add{background:#e6ffec}.diff tr.del{background:#ffebe9}.diff tr.hunk{background:#ddf4ff;"
             "color:#555}.diff tr.meta{color:#666;font-weight:bold}.diff-file{margin:.6em 0}")
    return str(tokens) + "\n" + lines
