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
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from orchard.bench.deciding.verdict import MetricResult
from orchard.bench.suites.held_files import holds_back, suite_files
from orchard.bench.suites.suite import Suite
from orchard.bench.suites.suite_reader import load_suite

HELD_OUT = "held-out"  # the note a held-out scenario's metrics carry in a verdict
HEADER = "# This copy of the suite leaves out the held-out inputs: only the lab's judge runs them.\n"


def held_out_files(suite: Suite) -> list[Path]:
    """Every file under the suite's directory that a `[suite] holdout` glob names."""
    return [suite.directory / relative for relative in suite_files(suite.directory)
            if holds_back(relative, suite.holdout)]


_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z_]+)\s*\]\]?")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """The suite's lines cut into (table kind, lines) blocks; comments just above a header go with it."""
    blocks: list[tuple[str, list[str]]] = [("", [])]
    pending: list[str] = []
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            blocks.append((header.group(1), [*pending, line]))
            pending = []
        elif line.lstrip().startswith("#") or not line.strip():
            pending.append(line)
        else:
            blocks[-1][1].extend([*pending, line])
            pending = []
    blocks[-1][1].extend(pending)
    return blocks


def _without_holdout_list(lines: list[str]) -> str:
    """The [suite] table's lines without its `holdout = [...]` key (which names what is held back)."""
    kept, depth, dropping = [], 0, False
    for line in lines:
        if not dropping and re.match(r"\s*holdout\s*=", line):
            dropping, depth = True, 0
        if dropping:
            depth += line.count("[") - line.count("]")
            dropping = depth > 0
            continue
        kept.append(line)
    return "".join(kept)


def worker_view(suite_path: Path) -> str:
    """The suite's text as a worker sees it: held-out scenarios and fixtures cut out, comments and all.

    A metric or gate naming held-out scenarios is narrowed to the visible
    ones (rewritten, losing its comments) or dropped when none is left.
    """
    text = Path(suite_path).read_text(encoding="utf-8")
    hidden = {t.get("name") for t in tomllib.loads(text).get("scenario", []) if t.get("holdout")}
    kept = [HEADER]
    for kind, lines in _blocks(text):
        body = "".join(lines)
        table = tomllib.loads(body).get(kind, [{}]) if kind in ("scenario", "fixture", "metric", "gate") else None
        entry: dict[str, Any] = table[0] if isinstance(table, list) and table else {}
        if kind in ("scenario", "fixture") and entry.get("holdout"):
            continue
        if kind == "suite":
            body = _without_holdout_list(lines)
        names = entry.get("scenarios")
        if kind in ("metric", "gate") and isinstance(names, list) and hidden & set(names):
            visible = [name for name in names if name not in hidden]
            if not visible:
                continue
            body = f"[[{kind}]]\n" + tomli_w.dumps({**entry, "scenarios": visible}) + "\n"
        kept.append(body)
    return "".join(kept)


def suite_holds_back(suite_path: Path) -> bool:
    """Whether the suite marks anything held out (a file that is no valid TOML holds nothing back)."""
    try:
        data = tomllib.loads(suite_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    head = data.get("suite")
    tables = [t for key in ("scenario", "fixture") for t in (data.get(key) or [])
              if isinstance(data.get(key), list)]
    return bool(isinstance(head, dict) and head.get("holdout")) or any(
        isinstance(t, dict) and t.get("holdout") for t in tables)


def withhold(suite_path: Path | str) -> list[str]:
    """Make the bench checkout holding `suite_path` a worker's copy; the files changed, relative to the suite.

    Held-out files are deleted and the suite file rewritten, only when it
    holds something back: a bench without held-out inputs is left exactly as
    it was (and the answer is empty).
    """
    suite_path = Path(suite_path)
    if not suite_holds_back(suite_path):
        return []
    suite = load_suite(suite_path)
    removed = held_out_files(suite)
    text = worker_view(suite_path)
    for path in removed:
        path.unlink()
        for parent in path.parents:  # a directory left empty would still name what was there
            if parent == suite.directory or any(parent.iterdir()):
                break
            parent.rmdir()
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
