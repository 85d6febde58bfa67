"""Small Markdown helpers shared by the lanes' summaries."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from orchard.bench import rows


def cell(value: Any) -> str:
    """A table cell: null is `unmeasured`, never 0; floats get sensible precision."""
    if value is None:
        return "unmeasured"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value).replace("|", "\\|")


def oracle_cell(value: bool | None) -> str:
    return "pass" if value is True else ("FAIL" if value is False else "unmeasured")


def table(headers: Sequence[str], body: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(value) for value in line) + " |" for line in body]
    return lines


def skips_and_failures(all_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every skip and failed total, with its reason: nothing absent silently."""
    lines: list[str] = []
    skips = [row for row in all_rows if rows.is_skip(row) and str(row.get("operation", "")).endswith(".skipped")]
    if skips:
        lines += ["", "## Skipped", ""]
        lines += table(
            ("Subject", "Scenario", "Run", "Reason"),
            ((f"`{r['subject']}`", r["scenario"], r.get("run"), r.get("skip_reason")) for r in skips),
        )
    failed = [row for row in all_rows if row.get("step_kind") == "total" and rows.is_failure(row)]
    if failed:
        lines += ["", "## Failed", ""]
        lines += table(
            ("Subject", "Scenario", "Run", "Reason"),
            (
                (f"`{r['subject']}`", r["scenario"], r.get("run"), r.get("failure_reason") or "a step failed or timed out")
                for r in failed
            ),
        )
    return lines
