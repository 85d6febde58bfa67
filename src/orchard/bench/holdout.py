"""Held-out inputs: the part of a suite only the judge runs.

A change that special-cases the inputs it can see (a fixture's content, a
scenario's command line) wins on those and nothing else. A suite may hold
some inputs back: scenarios and fixtures marked `holdout = true`, and the
files its `[suite] holdout` globs name. `withhold` turns a checkout of the
bench into the copy a worker gets (those files deleted, the suite rewritten
without them); the full suite, held-out scenarios included, is what the
judge's verdict runs, and `label` marks their metrics in it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from orchard.bench.suite import Suite, load_suite
from orchard.bench.verdict import MetricResult

HELD_OUT = "held-out"  # the note a held-out scenario's metrics carry in a verdict
HEADER = "# This copy of the suite leaves out the held-out inputs: only the lab's judge runs them.\n"


def held_out_files(suite: Suite) -> list[Path]:
    """Every file under the suite's directory that a `[suite] holdout` glob names (`*` also crosses `/`)."""
    root = suite.directory
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if ".git" in path.relative_to(root).parts or not (path.is_file() or path.is_symlink()):
            continue
        if any(fnmatch.fnmatchcase(relative, glob.rstrip("/")) or relative.startswith(glob.rstrip("/") + "/")
               for glob in suite.holdout):
            found.append(path)
    return found


def _visible(tables: Any, hidden: set[str]) -> list[Any]:
    """Metric or gate tables narrowed to visible scenarios; a table left with none is dropped."""
    kept = []
    for table in tables if isinstance(tables, list) else []:
        names = table.get("scenarios") if isinstance(table, dict) else None
        if isinstance(names, list) and names:
            table = {**table, "scenarios": [n for n in names if n not in hidden]}
            if not table["scenarios"]:
                continue
        kept.append(table)
    return kept


def worker_view(suite_path: Path) -> str:
    """The suite's text as a worker sees it: no held-out scenario, fixture or file list."""
    data = tomllib.loads(Path(suite_path).read_text(encoding="utf-8"))
    hidden = {t.get("name") for t in data.get("scenario", []) if t.get("holdout")}
    view: dict[str, Any] = {}
    for key, value in data.items():
        if key == "suite":
            value = {k: v for k, v in value.items() if k != "holdout"}
        elif key in ("scenario", "fixture"):
            value = [{k: v for k, v in t.items() if k != "holdout"} for t in value if not t.get("holdout")]
        elif key in ("metric", "gate"):
            value = _visible(value, hidden)
        view[key] = value
    return HEADER + tomli_w.dumps(view)


def withhold(suite_path: Path | str) -> list[str]:
    """Make the bench checkout holding `suite_path` a worker's copy; the files changed, relative to the suite.

    Held-out files are deleted and the suite file rewritten, only when it
    holds something back: a bench without held-out inputs is left exactly as
    it was (and the answer is empty).
    """
    suite_path = Path(suite_path)
    suite = load_suite(suite_path)
    if not suite.held_out and not suite.holdout and not any(f.holdout for f in suite.fixtures):
        return []
    removed = held_out_files(suite)
    text = worker_view(suite_path)
    for path in removed:
        path.unlink()
    suite_path.write_text(text, encoding="utf-8")
    load_suite(suite_path)  # the worker's copy must itself be a valid suite
    return [path.relative_to(suite.directory).as_posix() for path in removed] + [suite_path.name]


def label(suite: Suite, metrics: Sequence[MetricResult]) -> list[MetricResult]:
    """The verdict's metrics with the held-out scenarios' ones marked as such."""
    hidden = suite.held_out
    return [dataclasses.replace(m, note="; ".join(filter(None, (HELD_OUT, m.note)))) if m.scenario in hidden else m
            for m in metrics]


def is_held_out(metric: MetricResult) -> bool:
    return metric.note.split("; ")[0] == HELD_OUT
