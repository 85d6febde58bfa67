"""The core lane's Markdown summary: per subject and repository size, the median of each measured command, its
gates and failures."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from orchard.bench.lanes.summary import (
    notes_section,
    skips_and_failures,
    subjects_section,
    summarized,
    table,
    warmup_line,
)
from orchard.bench.measuring import rows

TOTAL = "core.total"  # the metric of a run's total row, which the lane writes and the summary reads


def _median(values: Sequence[Any]) -> float | None:
    numbers = [float(v) for v in values if v is not None and not isinstance(v, bool)]
    return round(statistics.median(numbers), 3) if numbers else None


RESULT_COLUMNS = ("Fixture", "Subject", "Runs", "status ms", "diff ms", "log ms", "show ms", "Total ms", "Tool calls",
                  "Output bytes", "Est. tokens", "Recall", "Pipe", "Deterministic", "Result")


def _result_row(label: str, subject: str, group: Sequence[Mapping[str, Any]]) -> tuple[object, ...]:
    """One fixture and subject in the results table: medians, and the gates over every run."""
    medians = [_median([r.get(key) for r in group]) for key in ("status_ms", "diff_ms", "log_ms", "show_ms",
                                                                 "elapsed_ms", "tool_call_count", "output_bytes",
                                                                 "estimated_total_tokens")]
    return (label, f"`{subject}`", len(group), *medians, min(float(r["information_recall"]) for r in group),
            all(r.get("pipe_compatible_unified") for r in group), all(r.get("determinism") is not False for r in group),
            "pass" if not any(rows.is_failure(r) for r in group) else "FAIL")


def summary(recorded: Sequence[Mapping[str, Any]]) -> str:
    """Per fixture and subject: medians over the measured runs, and the gates over all of them."""
    all_rows = summarized(recorded)
    totals = [row for row in all_rows if row.get("operation") == TOTAL and row.get("information_recall") is not None]
    machine = next((row.get("machine_fingerprint") for row in recorded), None)
    lines = [
        "# Core lane summary",
        "",
        "status, diff, log and show (as each subject's flow spells them) after a typical agent edit",
        "(3 files changed, one of them in two places; 1 added, 1 renamed, 1 deleted) on generated",
        "repositories. Medians over the measured runs. Gates, on every run: information_recall (every",
        "changed path in status and diff, every hunk header in diff), pipe_compatible_unified (the diff",
        "applies with git apply --check on a clean copy), determinism (identical to the warm-up run's output).",
        "",
        f"Machine fingerprint `{machine}`.",
    ]
    lines += warmup_line(recorded)
    lines += subjects_section(recorded)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in totals:
        groups.setdefault((str(row.get("fixture_label")), str(row["subject"])), []).append(row)
    if groups:
        lines += ["", "## Results", ""]
        lines += table(RESULT_COLUMNS, (_result_row(label, subject, group) for (label, subject), group
                                        in sorted(groups.items(), key=lambda item: (_files(item[1]), item[0]))))
    lines += notes_section(all_rows)
    lines += skips_and_failures(recorded)
    return "\n".join(lines) + "\n"


def _files(group: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """Text repositories by size first, then those with binaries."""
    return int(group[0].get("binaries") or 0), int(group[0].get("files") or 0)
