"""The backlog: hypotheses ranked by impact x confidence / effort.

The loop takes the top open hypothesis of a lane whose scope is disjoint
from every running experiment's (workers get file-disjoint scopes; the lab
owns integration). What the lab learns flows back: a killed hypothesis
lowers its siblings' confidence (same metric, overlapping scope), an
ITERATE adds a sharpened child. `backlog.md` is rendered from lab.db
(`notebook/backlog_file.py`), in the order of `db/ranking.py`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchard.errors import UsageError
from orchard.lab.db.ranking import ranked
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import Opportunity
from orchard.lab.loop.near_duplicates import Refused, sorted_out
from orchard.lab.records.db import HypothesisRecord
from orchard.lab.records.hypothesis import MIN_CONFIDENCE, TEXT_LIMITS, Hypothesis, HypothesisStatus, Lane, slug
from orchard.tomlfile import read_toml

KILL_CONFIDENCE_FACTOR = 0.8  # a sibling of a killed hypothesis keeps 80% of its confidence
ITERATE_CONFIDENCE_FACTOR = 0.9  # a sharpened child starts a little less sure than its parent
SHARPENED = " (sharpened)"


def _literal_prefix(pattern: str) -> str:
    """The part before the first wildcard, its trailing `/` kept: `src/*.py` never reaches `srcx/`."""
    match = re.match(r"[^*?\[]*", pattern)
    return match.group(0) if match else ""


def _globby(entry: str) -> bool:
    return any(ch in entry for ch in "*?[")


def _entries_overlap(a: str, b: str) -> bool:
    """Whether two scope entries (paths, directories or globs) can name a common file."""
    a, b = a.strip("/"), b.strip("/")
    if a == b:
        return True
    if not _globby(a) and not _globby(b):
        return a.startswith(b + "/") or b.startswith(a + "/")
    if _globby(a) and not _globby(b):
        return fnmatch.fnmatchcase(b, a) or _literal_prefix(a).startswith(b + "/") or b.startswith(_literal_prefix(a))
    if _globby(b) and not _globby(a):
        return _entries_overlap(b, a)
    pa, pb = _literal_prefix(a), _literal_prefix(b)
    return pa.startswith(pb) or pb.startswith(pa)  # two globs: conservative


def scopes_overlap(a: Iterable[str], b: Iterable[str]) -> bool:
    """An empty scope means "anything" and overlaps every scope."""
    a, b = list(a), list(b)
    if not a or not b:
        return True
    return any(_entries_overlap(x, y) for x in a for y in b)


def pick(state: LabState, lane: Lane, busy_scopes: Sequence[Sequence[str]],
         skip: Collection[str] = ()) -> HypothesisRecord | None:
    """The best open hypothesis for `lane` (not in `skip`) whose scope avoids every running experiment.

    Exploit lanes take the top of the whole ranking; explore lanes take the
    best hypothesis marked `explore`, falling back to the ranking's tail.
    """
    ordered = ranked(state)

    def fits(record: HypothesisRecord) -> bool:
        return record.id not in skip and not any(scopes_overlap(record.hypothesis.scope, s) for s in busy_scopes)

    # the first that fits, not every one: a fleet's backlog has thousands, checked against every running scope
    if lane == Lane.EXPLORE:
        speculative = next((r for r in ordered if r.hypothesis.lane == Lane.EXPLORE and fits(r)), None)
        return speculative or next((r for r in reversed(ordered) if fits(r)), None)
    exploit = next((r for r in ordered if r.hypothesis.lane == Lane.EXPLOIT and fits(r)), None)
    return exploit or next((r for r in ordered if fits(r)), None)


def experiment_name(record: HypothesisRecord) -> str:
    """The name of the hypothesis's next experiment: its id, then `id-2`, `id-3`... for each new attempt."""
    return record.id if record.attempts == 0 else f"{record.id}-{record.attempts + 1}"


def add(state: LabState, hypothesis: Hypothesis, *, source: str, parent: str | None = None) -> str:
    if state.has_hypothesis(hypothesis.id):
        raise UsageError(f"hypothesis id {hypothesis.id!r} is already in the backlog")
    state.add_hypothesis(hypothesis, source=source, parent=parent)
    return hypothesis.id


def add_all(state: LabState, hypotheses: Sequence[Hypothesis], *, source: str, origin: str,
            metrics: Sequence[str] = (), launchers: Mapping[str, str] | None = None,
            default_launcher: str = "") -> list[Refused]:
    """Add every hypothesis or none; each bad one is named with where it came from. A near-duplicate of an
    earlier hypothesis is refused (near_duplicates.py) and the rest added; when every one is, nothing is, and
    that is the error. Returns the refused ones.

    `metrics` are the suite's metric keys (`scenario/metric`; empty: not
    checked, e.g. a bench with its own verdict script), `launchers` the
    [launchers.NAME] tables of orchard.toml a hypothesis may name (NAME: the
    launcher it runs) and `default_launcher` what [launcher] runs. A hypothesis
    the `patch` launcher would run needs its ready patch now: without one it
    could only fail once a worker starts.
    """
    taken = [h.id for h in hypotheses if state.has_hypothesis(h.id)]
    problems = [f"already in the backlog: {', '.join(taken)}"] if taken else []
    bare = {key.split("/", 1)[-1] for key in metrics}
    problems += [f"{h.id}: metric {h.metric!r} is not in the suite (known: {', '.join(metrics)})"
                 for h in hypotheses if metrics and h.metric not in metrics and h.metric not in bare]
    launchers = launchers or {}
    problems += [f"{h.id}: launcher {h.launcher!r} is not defined (orchard.toml's [launchers.NAME]: "
                 f"{', '.join(launchers) or 'none'})" for h in hypotheses if h.launcher and h.launcher not in launchers]
    runs = {h.id: launchers.get(h.launcher, "") if h.launcher else default_launcher for h in hypotheses}
    problems += [f"{h.id}: runs with the patch launcher but names no `patch` file (a ready diff)"
                 for h in hypotheses if not h.patch and runs[h.id] == "patch"]
    if problems:
        raise UsageError(f"{origin}: {'; '.join(problems)}; nothing was added")
    kept, refused = sorted_out(state, hypotheses)
    if not kept:
        raise UsageError(f"{origin}: nothing was added: {'; '.join(r.reason() for r in refused)}")
    with state.transaction():
        for hypothesis in kept:
            add(state, hypothesis, source=source)
    return refused


def load_file(path: Path) -> list[Hypothesis]:
    """Hypotheses from a TOML file of [[hypothesis]] tables; every problem is named."""
    path = Path(path)
    data = read_toml(path, "hypotheses")
    return parse_tables(data, source=str(path), base=path.parent)


def patch_files_found(hypothesis: Hypothesis, base: Path, source: str) -> Hypothesis:
    """Patch paths made absolute against the directory of the file that named them: an existing file inside
    that directory (a hypothesis file from elsewhere never makes the lab read, say, a key under ~/.ssh)."""
    base = Path(base).resolve()

    def absolute(key: str, path: str | None) -> str | None:
        if path is None:
            return None
        found = (base / path).resolve()
        if not found.is_relative_to(base):
            raise UsageError(f"{source}.{key}: {path!r} is outside the hypotheses file's directory {base}")
        if not found.is_file():
            raise UsageError(f"{source}.{key}: {path!r} is not a file ({found})")
        return str(found)
    return replace(hypothesis, patch=absolute("patch", hypothesis.patch),
                   bench_patch=absolute("bench_patch", hypothesis.bench_patch))


def parse_tables(data: Mapping[str, Any], *, source: str, base: Path | None = None) -> list[Hypothesis]:
    unknown = sorted(set(data) - {"hypothesis"})
    if unknown:
        raise UsageError(f"{source}: unknown top-level key(s) {', '.join(unknown)}; expected [[hypothesis]] tables")
    tables = data.get("hypothesis")
    if not isinstance(tables, list) or not tables:
        raise UsageError(f"{source}: no [[hypothesis]] tables")
    problems: list[str] = []
    hypotheses: list[Hypothesis] = []
    for index, table in enumerate(tables, 1):
        try:
            if not isinstance(table, dict):
                raise UsageError(f"[[hypothesis]] #{index} is not a table")
            hypothesis = Hypothesis.from_dict(table, source=f"[[hypothesis]] #{index}")
            if base is not None:
                hypothesis = patch_files_found(hypothesis, base, f"[[hypothesis]] #{index}")
            hypotheses.append(hypothesis)
        except UsageError as error:
            problems.append(str(error))
    ids = [h.id for h in hypotheses]
    problems += [f"duplicate id {i!r}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    if problems:
        raise UsageError(f"{source}: " + "; ".join(problems))
    return hypotheses


def from_opportunities(items: Sequence[Opportunity], top: int) -> list[Hypothesis]:
    """Hypotheses for the largest gaps: metric and current value filled in, the cause left to a planner."""
    found = []
    for item in items[:top]:
        ratio = item.gap_ratio
        found.append(
            Hypothesis(
                id=slug(f"gap {item.scenario} {item.operation} {item.metric} {item.subject}"),
                title=f"Close the {item.metric} gap of {item.subject} on {item.scenario} "
                      f"{item.operation}"[:TEXT_LIMITS["title"]],
                metric=f"{item.scenario}/{item.metric}",
                current_value=str(item.value),
                change=f"find out why {item.subject} pays {item.value} where {item.comparator} "
                f"pays {item.comparator_value} (where it goes: {item.places() or 'unknown'}) and remove the difference",
                predicted_effect=-min(0.9, ratio / (1 + ratio)) if ratio > 0 else None,
                impact=min(5.0, 1.0 + item.score),
                confidence=0.3,
                effort=3.0,
                lane=Lane.EXPLORE,
            )
        )
    return found


def learn_from_kill(state: LabState, killed: HypothesisRecord) -> list[str]:
    """Lower the confidence of open siblings (same metric, overlapping scope); returns their ids."""
    touched = []
    for record in state.hypotheses(HypothesisStatus.OPEN):
        sibling = record.hypothesis
        if record.id == killed.id or sibling.metric != killed.hypothesis.metric:
            continue
        if scopes_overlap(sibling.scope, killed.hypothesis.scope):
            confidence = max(MIN_CONFIDENCE, round(sibling.confidence * KILL_CONFIDENCE_FACTOR, 4))
            lowered = replace(sibling, confidence=confidence)
            state.update_hypothesis(record.id, hypothesis=lowered)
            touched.append(record.id)
    return touched


def sharpen(state: LabState, parent: Hypothesis, reasons: Sequence[str]) -> Hypothesis:
    """The ITERATE child of `parent`: `<root>-r<n>` with the first free n, a little less confident,
    carrying what the judgment said."""
    root = re.sub(r"-r\d+$", "", parent.id)[:44]
    n = 1
    while state.has_hypothesis(f"{root}-r{n}"):
        n += 1
    return replace(
        parent,
        id=f"{root}-r{n}",
        title=parent.title if parent.title.endswith(SHARPENED)
        else parent.title[:TEXT_LIMITS["title"] - len(SHARPENED)] + SHARPENED,
        confidence=round(parent.confidence * ITERATE_CONFIDENCE_FACTOR, 4),
        notes=(parent.notes + f"\nlearned from {parent.id}: " + "; ".join(reasons)).strip()[-TEXT_LIMITS["notes"]:],
    )


def top_attempted(state: LabState, top: int) -> bool:
    """Whether the `top` best hypotheses of the whole backlog have all been tried."""
    best = ranked(state, tuple(HypothesisStatus))[:top]
    return bool(best) and all(r.status != HypothesisStatus.OPEN for r in best)
