"""Opportunities: the ranked attack list for a subject, from the latest rows.

For every (scenario, operation or phase, metric) that two or more subjects
measured in the newest run of a lane, each subject that is not the best is
compared with the best comparator. Gaps are ranked by `score = weight x
gap_ratio`, where `gap_ratio = (value - best) / max(best, floor)` (the floor
keeps a zero-cost comparator, such as git's absent describe call, from
dividing by zero). Each item says where the gap goes: the subject's parts (flow steps for a
total, commands for a step) beside the comparator's, largest difference first. This is what the lab's backlog generator
consumes (`--json`, schema below).

Rules that keep the list honest:
- Values are medians over the run's repetitions of successful rows only.
- Latency metrics are compared only between rows of the same
  `remote_transport`, and only when the two subjects' ranges do not overlap
  (anything else is noise, not an opportunity). Tool calls, tokens and bytes
  are compared across transports, as the seed harness allows.
- A flow step a subject's flow makes no call for (git's describe) counts as
  zero for that subject: the asymmetry shows up instead of vanishing.
- An item's `note` says what the gap is in the flows' own words: the
  `[notes]` either flow gives for the step (for a total: for its largest
  parts and for every step one flow makes no call for), never only
  `describe`.

JSON (`orchard opportunities --json`):
    {"schema": "orchard.opportunities/1", "results": DIR,
     "sources": [{"lane", "file", "bench_id", "rows"}],
     "weights": {metric: weight}, "floors": {metric: floor},
     "items": [{"rank", "lane", "scenario", "operation", "level" (total|step),
                "metric", "direction" (lower|higher), "subject", "value", "runs",
                "remote_transport", "comparator", "comparator_value",
                "comparator_transport", "gap", "gap_ratio", "weight", "score",
                "where": [{"part", "value", "comparator_value", "share"}],
                "note"}],
     "not_compared": [str]}
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchard.bench.deciding.verdict import Direction
from orchard.bench.results import store
from orchard.bench.results.opportunity import Opportunity, Part, Ranking, Source
from orchard.jsonlines import read_jsonl

METRICS: dict[str, tuple[Direction, float, float, bool]] = {
    # metric: (better direction, weight, floor, is latency)
    "tool_call_count": (Direction.LOWER, 1.0, 1.0, False),
    "estimated_total_tokens": (Direction.LOWER, 1.0, 10.0, False),
    "output_bytes": (Direction.LOWER, 0.25, 100.0, False),
    "elapsed_ms": (Direction.LOWER, 0.5, 1.0, True),
    "snapshots_per_second": (Direction.HIGHER, 1.0, 0.1, True),
    "retry_count": (Direction.LOWER, 0.5, 1.0, False),
}
STEP_METRICS = ("tool_call_count", "estimated_total_tokens", "output_bytes", "elapsed_ms")
AGENT_STEP_KINDS = ("vcs", "edit")
WHERE_PARTS = 4

Cell = tuple[str, str, str, str]  # lane, scenario, operation, level


def _metric(row: Mapping[str, Any], metric: str) -> float | None:
    if metric == "output_bytes":
        parts = [row.get("stdout_bytes"), row.get("stderr_bytes")]
        return None if all(p is None for p in parts) else float(sum(p or 0 for p in parts))
    value = row.get(metric)
    return None if value is None or isinstance(value, bool) else float(value)


def _total_operation(row: Mapping[str, Any]) -> str:
    """Contention totals differ by mode and worker count, core totals by repository: that belongs in the name."""
    if row.get("mode") is not None:
        return f"{row['operation']}[{row['mode']},workers={row.get('workers')}]"
    if row.get("fixture_label") is not None:  # core lane: one cell per generated repository
        return f"{row['operation']}[{row['fixture_label']}]"
    return str(row["operation"])


def _step_part(row: Mapping[str, Any]) -> str:
    if row.get("flow_step") and row.get("phase"):
        return f"{row['phase']}.{row['flow_step']}"
    return str(row.get("operation"))


class _Samples:
    """Per (cell, subject, metric): one value per run, plus breakdown parts per run."""

    def __init__(self) -> None:
        self.values: dict[tuple[Cell, str, str], dict[int, float]] = defaultdict(dict)
        self.parts: dict[tuple[Cell, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.transport: dict[tuple[str, str], str | None] = {}
        self.notes: dict[tuple[str, str], dict[str, str]] = {}  # (scenario, subject) -> the flow's [notes]
        self.empty_steps: dict[tuple[str, str], frozenset[str]] = {}

    def add(self, cell: Cell, subject: str, metric: str, run: int, value: float) -> None:
        key = (cell, subject, metric)
        self.values[key][run] = self.values[key].get(run, 0.0) + value


def _collect(lane: str, lane_rows: Sequence[Mapping[str, Any]]) -> _Samples:
    samples = _Samples()
    good = [row for row in lane_rows if row.get("returncode") == 0 and not row.get("warmup")]
    for row in good:
        samples.transport[(str(row.get("scenario")), str(row.get("subject")))] = row.get("remote_transport")
    totals = [row for row in good if row.get("step_kind") == "total"]
    zero_steps = _add_totals(samples, lane, totals)
    _add_steps(samples, lane, [row for row in good if row.get("step_kind") in AGENT_STEP_KINDS], totals)
    # A step the subject's flow makes no call for is a measured zero, not a gap in the data.
    phases = {cell[2].split(".", 1)[0] for (cell, _, _) in samples.values if cell[3] == "step"}
    for (scenario, subject, run), empty in zero_steps.items():
        for step in empty:
            for phase in phases:
                cell = (lane, scenario, f"{phase}.{step}", "step")
                if any(c == cell for (c, _, _) in samples.values):
                    for metric in STEP_METRICS:
                        samples.values[(cell, subject, metric)].setdefault(run, 0.0)
    return samples


ZeroSteps = dict[tuple[str, str, int], list[str]]  # (scenario, subject, run): the flow's steps without calls


def _add_totals(samples: _Samples, lane: str, totals: Sequence[Mapping[str, Any]]) -> ZeroSteps:
    """Each total row's metrics and flow notes; returns each run's steps without calls."""
    zero_steps: ZeroSteps = {}
    for row in totals:
        cell = (lane, str(row["scenario"]), _total_operation(row), "total")
        run = int(row.get("run") or 0)
        for metric in METRICS:
            value = _metric(row, metric)
            if value is not None:
                samples.add(cell, str(row["subject"]), metric, run, value)
        zero_steps[(str(row["scenario"]), str(row["subject"]), run)] = list(row.get("flow_steps_without_calls") or [])
        samples.empty_steps[(str(row["scenario"]), str(row["subject"]))] = frozenset(
            row.get("flow_steps_without_calls") or ()
        )
        notes = row.get("flow_notes") or {}
        if isinstance(notes, dict) and notes:
            samples.notes[(str(row["scenario"]), str(row["subject"]))] = {str(k): str(v) for k, v in notes.items()}
    return zero_steps


def _add_steps(samples: _Samples, lane: str, steps: Sequence[Mapping[str, Any]],
               totals: Sequence[Mapping[str, Any]]) -> None:
    """Each agent step's metrics, and the step as a part of its run's total."""
    for row in steps:
        part = _step_part(row)
        run = int(row.get("run") or 0)
        subject = str(row["subject"])
        step_cell = (lane, str(row["scenario"]), part, "step")
        for metric in STEP_METRICS:
            value = _metric(row, metric)
            if value is None:
                continue
            samples.add(step_cell, subject, metric, run, value)
            samples.parts[(step_cell, subject, metric)][str(row["operation"])].append(value)
            for total in totals:
                if (
                    total["subject"] == row["subject"]
                    and total["scenario"] == row["scenario"]
                    and total.get("run") == row.get("run")
                ):
                    total_cell = (lane, str(row["scenario"]), _total_operation(total), "total")
                    samples.parts[(total_cell, subject, metric)][part].append(value)


def _separated(mine: Iterable[float], theirs: Iterable[float], direction: Direction) -> bool:
    mine, theirs = list(mine), list(theirs)
    return min(mine) > max(theirs) if direction == Direction.LOWER else max(mine) < min(theirs)


def _step_of(part: str) -> str:
    """The flow's name for a part: `task.snapshot.add` -> `snapshot.add`, `files-1000.status` -> `status`."""
    return part.split(".", 1)[1] if "." in part else part


def _flow_note(notes: Mapping[str, str], step: str) -> str | None:
    """The note for a step, or for the step its command belongs to (`snapshot.add` -> `snapshot`)."""
    while step:
        if step in notes:
            return notes[step]
        step = step.rpartition(".")[0]
    return None


def _note(
    samples: _Samples, cell: Cell, subject: str, comparator: str, where: Sequence[Part]
) -> str | None:
    """What the gap is, in the flows' own words: their `[notes]` for the steps the gap lies in.

    A step item takes the note either flow gives for its step; a total takes
    the notes for its largest parts and for every step one flow makes no
    call for and the other does.
    """
    scenario = cell[1]
    if cell[3] == "step":
        steps = [_step_of(cell[2])]
    else:
        mine = samples.empty_steps.get((scenario, subject), frozenset())
        theirs = samples.empty_steps.get((scenario, comparator), frozenset())
        steps = [_step_of(part.part) for part in where] + sorted(mine ^ theirs)
    said: list[str] = []
    for step in dict.fromkeys(steps):
        for name in (subject, comparator):
            note = _flow_note(samples.notes.get((scenario, name), {}), step)
            if note and f"{name}: {note}" not in said:
                said.append(f"{name}: {note}")
    return " / ".join(said) or None


def _where(samples: _Samples, cell: Cell, subject: str, comparator: str, metric: str, runs: int) -> tuple[Part, ...]:
    mine = samples.parts.get((cell, subject, metric), {})
    theirs = samples.parts.get((cell, comparator, metric), {})
    total = sum(sum(values) for values in mine.values()) or 1.0
    their_runs = max(1, len(samples.values.get((cell, comparator, metric), {})))
    parts = [Part(part, round(sum(values) / max(1, runs), 3),
                  round(sum(theirs[part]) / their_runs, 3) if part in theirs else 0.0, round(sum(values) / total, 3))
             for part, values in mine.items()]
    # Largest share of the gap first, then largest share of the subject's cost.
    parts.sort(key=lambda part: (-(part.value - part.comparator_value), -part.value))
    return tuple(parts[:WHERE_PARTS])


def rank(results: Path) -> Ranking:
    """The opportunities of the newest run of every lane under `results`, largest score first."""
    items: list[Opportunity] = []
    sources: list[Source] = []
    not_compared: list[str] = []
    newest = {path.parent.name: path for path in store.run_files(results)}
    for lane, path in sorted(newest.items()):
        lane_rows = read_jsonl(path)
        sources.append(Source(lane, str(path), path.stem, len(lane_rows)))
        samples = _collect(lane, lane_rows)
        subjects = sorted({subject for (_, subject, _) in samples.values})
        if len(subjects) < 2:
            not_compared.append(
                f"{lane}: only {', '.join(subjects) or 'no subject'} measured successfully in {path.name}; "
                "nothing to compare"
            )
            continue
        by_cell: dict[tuple[Cell, str], dict[str, dict[int, float]]] = defaultdict(dict)
        for (cell, subject, metric), per_run in samples.values.items():
            by_cell[(cell, metric)][subject] = per_run
        for (cell, metric), per_subject in sorted(by_cell.items()):
            items += _gaps(samples, cell, metric, per_subject)
    items.sort(key=lambda item: (-item.score, item.lane, item.scenario, item.operation, item.metric))
    if not sources:
        not_compared.append(f"no lane results under {results}")
    return Ranking(str(results), tuple(sources), {metric: spec[1] for metric, spec in METRICS.items()},
                   {metric: spec[2] for metric, spec in METRICS.items()},
                   tuple(dataclasses.replace(item, rank=index) for index, item in enumerate(items, start=1)),
                   tuple(not_compared))


def _gaps(samples: _Samples, cell: Cell, metric: str,
          per_subject: Mapping[str, Mapping[int, float]]) -> list[Opportunity]:
    """Each subject of one cell and metric that trails its best comparable rival (unranked)."""
    direction, weight, floor, latency = METRICS[metric]
    medians = {subject: statistics.median(runs.values()) for subject, runs in per_subject.items()}
    found = []
    for subject, value in medians.items():
        mine_transport = samples.transport.get((cell[1], subject))
        rivals = {other: other_value for other, other_value in medians.items()
                  if other != subject and (not latency or samples.transport.get((cell[1], other)) == mine_transport)}
        if not rivals:
            continue
        pick = min if direction == Direction.LOWER else max
        comparator = pick(rivals, key=lambda name: rivals[name])
        best = rivals[comparator]
        gap = value - best if direction == Direction.LOWER else best - value
        if gap <= 0 or (latency and not _separated(per_subject[subject].values(), per_subject[comparator].values(),
                                                   direction)):
            continue
        ratio = gap / max(abs(best), floor)
        where = _where(samples, cell, subject, comparator, metric, len(per_subject[subject]))
        found.append(Opportunity(
            lane=cell[0], scenario=cell[1], operation=cell[2], level=cell[3], metric=metric,
            direction=direction, subject=subject, value=round(value, 3), runs=len(per_subject[subject]),
            remote_transport=mine_transport, comparator=comparator, comparator_value=round(best, 3),
            comparator_transport=samples.transport.get((cell[1], comparator)), gap=round(gap, 3),
            gap_ratio=round(ratio, 4), weight=weight, score=round(weight * ratio, 4), where=where,
            note=_note(samples, cell, subject, comparator, where)))
    return found


def render(ranking: Ranking, top: int | None = None) -> str:
    """Plain-text attack list for a terminal."""
    lines = [f"source: {source.lane} {source.file} ({source.rows} rows)" for source in ranking.sources]
    lines += [f"not compared: {reason}" for reason in ranking.not_compared]
    items = ranking.items[:top] if top else ranking.items
    if not items:
        lines.append("no opportunities: no subject trails a comparator on a comparable metric")
        return "\n".join(lines) + "\n"
    lines.append("")
    lines.append(
        f"{'#':>3}  {'score':>7}  {'subject':<10} {'scenario':<26} {'operation':<30} {'metric':<22} "
        f"{'value':>10} {'best (who)':>20}"
    )
    for item in items:
        best = f"{item.comparator_value:g} ({item.comparator})"
        lines.append(
            f"{item.rank:>3}  {item.score:>7.3f}  {item.subject:<10} {item.scenario:<26} "
            f"{item.operation:<30} {item.metric:<22} {item.value:>10g} {best:>20}"
        )
        where = ", ".join(f"{part.part} {part.value:g} vs {part.comparator_value:g}" for part in item.where[:3])
        if where:
            lines.append(f"{'':>14}where: {where}")
        if item.note:
            lines.append(f"{'':>14}note: {item.note}")
    return "\n".join(lines) + "\n"
