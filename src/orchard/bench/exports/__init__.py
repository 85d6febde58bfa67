"""Verdicts written to files, one module per format (as hyperfine does).

`orchard verdict --export-json/--export-csv/--export-markdown FILE` and
`orchard compare` write through `export`; the Markdown form is what a CI job
appends to its step summary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard.bench.deciding.verdict import VerdictDecision
from orchard.bench.exports import csv, json, markdown


@dataclass(frozen=True)
class Targets:
    """Where each export goes; None skips that format."""

    json: Path | None = None
    csv: Path | None = None
    markdown: Path | None = None


def export(decision: VerdictDecision, document: dict[str, Any], facts: list[str], targets: Targets) -> list[Path]:
    """Write every requested format; returns the files written.

    `document` is the `--json` document (it already holds every field);
    `facts` are the lines the Markdown summary states above its table.
    """
    written = []
    renderers: tuple[tuple[Path | None, Callable[[], str]], ...] = (
        (targets.json, lambda: json.render(document)),
        (targets.csv, lambda: csv.render(decision)),
        (targets.markdown, lambda: markdown.render(decision, facts)),
    )
    for path, text in renderers:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text(), encoding="utf-8")
            written.append(path)
    return written
