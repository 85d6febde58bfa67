"""The lab as people look at it: one typed snapshot for the dashboard, the reports and `status`.

Everything the live dashboard (`orchard serve`), the static report.html,
LEADERBOARD.md, FINAL_REPORT.md and `orchard status --watch` show is read
here, once, into frozen records: the readers never see lab.db's JSON
columns, so a number is formatted from one value wherever it appears, and
when lab.db's records change shape only this module changes.

Numbers are the journal's: an experiment's effect is the verdict the
journal printed under its judgment, main's steps come from the recorded
main checks (each paired against the previous main) and sweeps (paired
against the lab's first baseline).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from orchard.lab.config.sections import OFFLINE_LAUNCHERS, ExecutorKind
from orchard.lab.db import ranking, running_time, workspace_lock
from orchard.lab.db.paused import paused
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import Direction, LockState, LockStatus, lock_status
from orchard.lab.judge.verdict_view import VerdictView
from orchard.lab.landing.publication import Publication
from orchard.lab.notebook.journal import journal_entry
from orchard.lab.notebook.judge_host_report import JudgeHostAccount, judge_host_accounts
from orchard.lab.notebook.judge_queues import JudgeQueue, judge_queues
from orchard.lab.notebook.leaderboard import LeaderRow, directions, leaderboard
from orchard.lab.notebook.lineage import Lineage, lineage
from orchard.lab.notebook.live import log_tail
from orchard.lab.notebook.main_steps import MainStep, main_steps
from orchard.lab.notebook.spending import Budget, Spending, Spent, budgets, spending
from orchard.lab.records.db import ExperimentRecord, JournalEvent, Unrecognized, of_type
from orchard.lab.records.events import Event, ExperimentHost, ExperimentStarted, LabStopped, LauncherFailed
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.judge_host import JudgeLost, JudgeStarted
from orchard.lab.records.judgment import Decision, JudgmentEntry
from orchard.lab.records.lab_start import LabStart
from orchard.lab.records.land_steps import MainPublished, Reverted
from orchard.lab.records.measured_events import FinalVerdictTaken
from orchard.lab.records.review_branches import REVIEW_KEY, Review
from orchard.lab.workers.workspace.workspace import Workspace

FEED_ENTRIES = 200


@dataclass(frozen=True)
class ExperimentView:
    name: str
    hypothesis: str
    title: str
    worker: str
    lane: str
    status: str
    decision: str | None
    rule: str | None
    reasons: tuple[str, ...]
    started_at: float
    finished_at: float | None
    judged_at: float | None
    verdict: VerdictView | None  # as the journal printed it under the judgment
    branch: str | None
    merge_commit: str | None
    launcher: str = ""  # as its start recorded it (a hypothesis may name its own)
    base: str = ""  # the target commit it started from
    published: Published | None = None  # the push of main after its merge
    reverted: str | None = None  # the revert commit, when main regressed after its merge
    spent: Spent | None = None  # its agent's cost, its worker's, build's and verdict's time, its lock waits
    held: tuple[str, ...] = ()  # a win held for a person: the hack review's findings, each `flag at file:line: ...`


@dataclass(frozen=True)
class Published:
    """Whether a merge reached the target repository, and on which branch (or why not)."""

    branch: str
    reachable: bool
    error: str


@dataclass(frozen=True)
class FinalVerdict:
    """Main at the end against main at the start: one paired verdict, taken when the lab stops."""

    start: str
    end: str
    moved: bool
    verdict: VerdictView | None


@dataclass(frozen=True)
class LauncherFailure:
    experiment: str
    hypothesis: str
    reason: str


@dataclass(frozen=True)
class LockWait:
    at: float
    kind: str
    experiment: str | None
    wait_ms: float


@dataclass(frozen=True)
class Busy:
    """From `at` on, `workers` workers were running an experiment."""

    at: float
    workers: int


@dataclass(frozen=True)
class WorkerView:
    experiment: str
    hypothesis: str
    worker: str
    lane: str
    launcher: str
    status: str
    elapsed_s: float
    host: str
    log: str
    log_tail: tuple[str, ...]


@dataclass(frozen=True)
class BacklogItem:
    id: str
    score: float
    lane: str
    title: str
    revisited: bool = False  # a KILLed hypothesis a win offered again (loop/revisit.py)

    @property
    def note(self) -> str:
        """What every list of the backlog adds after its lane: that it is a revisited kill."""
        return ", revisited" if self.revisited else ""


@dataclass(frozen=True)
class FeedEntry:
    at: float
    kind: str
    experiment: str | None
    text: str  # the entry exactly as JOURNAL.md has it


@dataclass(frozen=True)
class LabView:
    workspace: str
    generated_at: float
    started_at: float | None
    base: str | None
    executor: ExecutorKind
    tmux_socket: str
    worker_slots: int
    baseline: Mapping[str, float]
    floors: Mapping[str, float]
    directions: Mapping[str, Direction]
    workers: tuple[WorkerView, ...]
    lock: LockStatus
    backlog: tuple[BacklogItem, ...]
    leaderboard: tuple[LeaderRow, ...]
    experiments: tuple[ExperimentView, ...]
    main_steps: tuple[MainStep, ...]
    lock_waits: tuple[LockWait, ...]
    busy: tuple[Busy, ...]
    journal: tuple[FeedEntry, ...]
    stopped: str | None
    decisions: Mapping[str, int] = field(default_factory=dict)
    sandbox: str = "bwrap"  # [workers] sandbox: "none" is shown loudly
    limits: str = ""  # the resource limits of every worker and judge step, in one line
    final: FinalVerdict | None = None  # None until the lab stops and measures it
    publication: Publication | None = None  # where wins reach the user
    launcher_failures: tuple[LauncherFailure, ...] = ()
    spending: tuple[Spending, ...] = ()  # per launcher, then in total when there are several
    budgets: tuple[Budget, ...] = ()  # [stop] max_cost_usd and max_wall_minutes, with what is left
    ran_s: float | None = None  # the time `orchard run` worked on the lab, across its runs (db/running_time.py)
    review: Review | None = None  # what `orchard finalize` recorded: review branches, the best single attempt
    paused: str | None = None  # who paused the lab, while a pause is in force (`orchard pause`)
    running: bool = False  # an `orchard run` holds the workspace (before `started_at`: it is calibrating)
    lineage: Lineage | None = None
    judges: tuple[JudgeQueue, ...] = ()  # each judge host's queue, when the lab has judge hosts
    judge_hosts: tuple[JudgeHostAccount, ...] = ()  # each judge host's share of the lab (FINAL_REPORT.md)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metrics(self) -> list[str]:
        """Every metric the lab knows, in a stable order."""
        keys = set(self.baseline)
        for e in self.experiments:
            keys |= {m.key for m in (e.verdict.metrics if e.verdict else ())}
        return sorted(keys)


def _busy(experiments: Sequence[ExperimentView]) -> list[Busy]:
    """Busy workers at every start and end (a running worker's count holds until the next change)."""
    changes: list[tuple[float, int]] = []
    for e in experiments:
        changes.append((e.started_at, 1))
        if e.finished_at is not None:
            changes.append((e.finished_at, -1))
    series, busy = [], 0
    for at, delta in sorted(changes):
        busy += delta
        series.append(Busy(at, busy))
    return series


def final_verdict(events: Sequence[JournalEvent[Event | Unrecognized]]) -> FinalVerdict | None:
    """Main at the end against main at the start, as the journal's last final verdict recorded it."""
    done = of_type(events, FinalVerdictTaken)
    if not done:
        return None
    taken = done[-1].event
    return FinalVerdict(taken.start, taken.end, taken.moved, VerdictView.from_verdict(taken.verdict))


def _spent(ws: Workspace, row: ExperimentRecord, launcher: str, waits: Sequence[LockWait]) -> Spent:
    """What one experiment spent, from its candidate (the agent's usage, the worker's run) and its judgment."""
    kind = ws.config.launchers[launcher].name if launcher in ws.config.launchers else ws.config.launcher.name
    candidate, judgment = row.candidate, row.judgment
    return Spent(launcher=launcher or kind, agent=kind not in OFFLINE_LAUNCHERS,
                 usage=None if candidate is None else candidate.usage,
                 worker_s=0.0 if candidate is None else candidate.duration_s,
                 build_s=0.0 if judgment is None else judgment.build_s,
                 measure_s=0.0 if judgment is None else judgment.measure_s,
                 lock_wait_s=sum(w.wait_ms for w in waits if w.experiment == row.name) / 1000,
                 won=row.decision == Decision.LAND)


def _experiment_views(ws: Workspace, rows: Sequence[ExperimentRecord],
                      events: Sequence[JournalEvent[Event | Unrecognized]], titles: Mapping[str, str],
                      waits: tuple[LockWait, ...]) -> list[ExperimentView]:
    """Each experiment as the journal tells it: its judgment, launcher, publication, revert and spending."""
    judgments = {e.experiment: e for e in of_type(events, JudgmentEntry)}
    # the launcher each experiment ran (a hypothesis may name its own), as its start recorded it
    launchers = {e.experiment: e.event.launcher or ws.config.launcher.name
                 for e in of_type(events, ExperimentStarted)}
    published = {e.experiment: Published(e.event.branch, e.event.reachable, e.event.error or "not published yet")
                 for e in of_type(events, MainPublished)}
    reverts = {e.experiment: e.event.revert for e in of_type(events, Reverted)}
    experiments = []
    for row in rows:
        judged = judgments.get(row.name)
        experiments.append(ExperimentView(
            name=row.name, hypothesis=row.hypothesis, title=titles.get(row.hypothesis, ""),
            worker=row.worker, lane=row.lane, status=row.status, decision=row.decision,
            rule=row.judgment.rule if row.judgment else None, reasons=tuple(row.reasons), started_at=row.started_at,
            finished_at=row.finished_at, judged_at=judged.at if judged else None,
            verdict=VerdictView.from_verdict(judged.event.verdict if judged else None),
            branch=row.branch, merge_commit=row.merge_commit, launcher=launchers.get(row.name, ""),
            base=row.target_base, published=published.get(row.name), reverted=reverts.get(row.name),
            spent=_spent(ws, row, launchers.get(row.name, ""), waits),
            held=tuple(f.describe() for f in row.judgment.findings) if row.judgment and row.judgment.held else ()))
    return experiments


def _worker_views(ws: Workspace, experiments: Sequence[ExperimentView],
                  events: Sequence[JournalEvent[Event | Unrecognized]], now: float,
                  live: bool) -> tuple[WorkerView, ...]:
    """The running experiments, each with where it runs: this machine, or the dask worker its latest attempt
    started on."""
    here = socket.gethostname() if ws.config.workers.executor != ExecutorKind.DASK else "dask cluster (queued)"
    hosts = {e.experiment: e.event.host for e in of_type(events, ExperimentHost)}
    return tuple(
        WorkerView(experiment=e.name, hypothesis=e.hypothesis, worker=e.worker, lane=e.lane,
                   launcher=e.launcher or ws.config.launcher.name, status=e.status,
                   elapsed_s=round(now - e.started_at, 1), host=hosts.get(e.name, here),
                   log=str(ws.log_path(e.name)), log_tail=log_tail(ws.log_path(e.name)) if live else ())
        for e in experiments if e.status in ExperimentStatus.active())


def _backlog(state: LabState) -> tuple[BacklogItem, ...]:
    """The ten best of the backlog, each marked when it is a killed hypothesis offered again."""
    again = ranking.revisited(state)
    return tuple(BacklogItem(r.id, r.hypothesis.score, r.hypothesis.lane, r.hypothesis.title, r.id in again)
                 for r in ranking.ranked(state)[:10])


def build(ws: Workspace, state: LabState, *, now: float | None = None, live: bool = True) -> LabView:
    """The whole snapshot, read in one transaction so every part agrees with every other."""
    now = time.time() if now is None else now
    with state.reading():
        events = state.events()
        rows = state.experiments()
        hypotheses = state.hypotheses()
        backlog = _backlog(state)
        final = final_verdict(events)
        board = leaderboard(state, None if final is None else final.verdict)
        dirs = directions(state)
        started = state.meta("started_at")
        where = json.loads(state.meta("publication") or "{}")
        review = Review.from_json(state.meta(REVIEW_KEY))
    waits = tuple(LockWait(e.at, e.kind, e.experiment, e.event.measured.lock_wait_ms)
                  for e in of_type(events, Event) if e.event.measured is not None)
    experiments = _experiment_views(ws, rows, events, {h.id: h.hypothesis.title for h in hypotheses}, waits)
    start = next((e.event for e in of_type(events, LabStart)), None)
    baseline, floors = ({}, {}) if start is None else (dict(start.baseline), dict(start.floors))
    workers = _worker_views(ws, experiments, events, now, live)
    stops = of_type(events, LabStopped)
    totals = spending([e.spent for e in experiments if e.spent is not None])
    ran = None if not started else running_time.ran_s(state)  # as the stop conditions count it, across runs
    return LabView(
        workspace=str(ws.root), generated_at=now, started_at=float(started) if started else None,
        base=None if start is None else start.base, executor=ws.config.workers.executor,
        sandbox=ws.config.workers.sandbox, limits=ws.config.workers.limits().describe(),
        tmux_socket=ws.tmux_socket, worker_slots=ws.config.workers.count, baseline=baseline,
        floors=floors, directions=dirs, workers=workers,
        lock=lock_status() if live else LockStatus(LockState.NOT_READ, "", None, None, None, ()),
        backlog=backlog, leaderboard=board,
        experiments=tuple(experiments), main_steps=tuple(main_steps(events, baseline, floors)), lock_waits=waits,
        busy=tuple(_busy(experiments)),
        journal=tuple(FeedEntry(e.at, e.kind, e.experiment, "\n".join(journal_entry(e)).strip())
                      for e in events[-FEED_ENTRIES:]),
        stopped=stops[-1].event.reason if stops and not workers else None,
        decisions={d: sum(1 for e in experiments if e.decision == d) for d in Decision},
        final=final, publication=Publication(**where) if where else None,
        launcher_failures=tuple(LauncherFailure(e.experiment or "", e.event.hypothesis, e.event.reason)
                                for e in of_type(events, LauncherFailed)),
        spending=totals, budgets=budgets(ws.config.stop.max_cost_usd, ws.config.stop.max_wall_minutes,
                                         totals[-1] if totals else None, ran),
        ran_s=ran, paused=None if (pause := paused(state)) is None else pause.event.by, review=review,
        running=workspace_lock.holder(ws.root) is not None,
        lineage=lineage(None if start is None else start.base, hypotheses, rows, events),
        judges=tuple(judge_queues(of_type(events, JudgeStarted), [(e.name, e.status) for e in experiments])),
        judge_hosts=tuple(judge_host_accounts(of_type(events, JudgeStarted), of_type(events, JudgeLost), rows)),
    )


def to_json(view: LabView) -> str:
    return json.dumps(view.to_dict(), default=str, sort_keys=True)
