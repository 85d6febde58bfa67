"""Small Markdown helpers shared by the lanes' summaries."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from orchard.bench.measuring import rows


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


def summarized(all_rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows a summary's tables show: warm-up runs are recorded, not summarized."""
    return [row for row in all_rows if not row.get("warmup")]


def version_cell(row: Mapping[str, Any]) -> str:
    """The subject's version, or what its `--version` did instead."""
    if row.get("subject_version"):
        return str(row["subject_version"])
    return str(row.get("subject_version_error") or "unknown (no binary)")


def subjects_section(all_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Who was measured: each subject's kind, version and binary, as the rows recorded them."""
    first: dict[str, Mapping[str, Any]] = {}
    for row in all_rows:
        first.setdefault(str(row.get("subject")), row)
    if not first:
        return []
    lines = ["", "## Subjects", ""]
    lines += table(
        ("Subject", "Kind", "Version", "Binary"),
        (
            (f"`{name}`", row.get("subject_kind"), version_cell(row), row.get("subject_bin") or "absent")
            for name, row in first.items()
        ),
    )
    return lines


def notes_section(all_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every note of every subject's flow: the asymmetries the flows declare."""
    notes: dict[tuple[str, str], str] = {}
    for row in all_rows:
        for key, note in (row.get("flow_notes") or {}).items():
            notes[(str(row.get("subject")), str(key))] = str(note)
    if not notes:
        return []
    return [
        "",
        "## Flow notes",
        "",
        *[f"- `{subject}` {key}: {note}" for (subject, key), note in sorted(notes.items())],
    ]


def warmup_line(all_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    warm = sorted({str(row.get("subject")) for row in all_rows if row.get("warmup")})
    if not warm:
        return []
    return [
        "",
        f"Warm-up: {', '.join(f'`{name}`' for name in warm)} ran once first (run -1, `warmup: true`); "
        "recorded, not summarized.",
    ]


def skips_and_failures(all_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every skip and failed total, with its reason: nothing absent silently."""
    lines: list[str] = []
    skips = [
        row for row in summarized(all_rows) if rows.is_skip(row) and str(row.get("operation", "")).endswith(".skipped")
    ]
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
                (
                    f"`{r['subject']}`",
                    r["scenario"],
                    "warm-up" if r.get("warmup") else r.get("run"),
                    r.get("failure_reason") or ", ".join(r.get("failed_operations") or []) or "no reason recorded",
                )
                for r in failed
            ),
        )
    return lines
