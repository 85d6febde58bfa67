"""The lab notebook: JOURNAL.md, LEADERBOARD.md, backlog.md, and when the lab stops FINAL_REPORT.md and report.html.

A colleague reading them the next morning sees exactly what lab.db says. A
running lab keeps its `Notebook` up to date one change at a time: the new
events appended to JOURNAL.md, LEADERBOARD.md drawn again only after an
event that can move it, backlog.md when the backlog changed; each file is
otherwise replaced atomically, so a crash mid-write leaves the previous
version intact (and the next run's first update writes JOURNAL.md whole).
FINAL_REPORT.md and report.html are rendered with LEADERBOARD.md from one
snapshot (`view.LabView`, the dashboard's own), through the formatters
JOURNAL.md prints with: their numbers agree with it to the digit.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from orchard.lab.db.state import LabState
from orchard.lab.judge.verdict_view import effect_cells, markdown_head, markdown_table, score_text, short_commit
from orchard.lab.notebook import backlog_file, pages, view
from orchard.lab.notebook.best_single import best_single_lines
from orchard.lab.notebook.journal import appended, render_events, render_journal
from orchard.lab.notebook.judge_host_report import judge_host_lines
from orchard.lab.notebook.leaderboard import LeaderRow, leaderboard
from orchard.lab.notebook.spending import spending_lines
from orchard.lab.notebook.view import ExperimentView, LabView
from orchard.lab.records.db import JournalEvent, Unrecognized
from orchard.lab.records.events import Event, EventKind
from orchard.lab.records.judgment import Decision, JudgmentEntry
from orchard.lab.records.measured_events import FinalVerdictTaken
from orchard.lab.text import inline
from orchard.lab.workers.sandbox.sandbox import UNSANDBOXED_NOTE, SandboxMode
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.units import quantity

NEXT_BACKLOG = 6  # hypotheses the final report recommends
EMPTY_BACKLOG = "- the backlog is empty: run `orchard plan` or `orchard backlog add`"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def board(state: LabState) -> tuple[LeaderRow, ...]:
    """The leaderboard's rows as lab.db holds them now (with the final verdict once the lab stopped)."""
    final = view.final_verdict(state.events_of(FinalVerdictTaken))
    return leaderboard(state, None if final is None else final.verdict)


def render_leaderboard(rows: Sequence[LeaderRow]) -> str:
    """Each metric's best change with its own paired effect, and main against the start once the lab stopped."""
    lines = ["# Leaderboard", "",
             ("Per metric: the landed change with the best paired effect, and main at the end "
              "against main at the start (one paired verdict, when the lab stops)."), "",
             ("| metric | direction | baseline (start) | best change | its effect [interval] | main vs start "
              "[interval] | floor |"), "|---|---|---:|---|---:|---:|---:|"]
    for row in rows:
        change = "-" if row.effect is None else f"`{row.by}` ({short_commit(row.commit)})"
        lines.append("| " + " | ".join([inline(row.metric), f"{row.direction} is better",
                                         quantity(row.baseline, row.metric), change,
                                         *effect_cells(row.effect, row.final)]) + " |")
    return "\n".join(lines) + "\n"


def final_lines(lab: LabView) -> list[str]:
    """Main at the end against main at the start, as one paired verdict (never a ratio of unpaired medians)."""
    lines = ["## Main at the end against main at the start", ""]
    final = lab.final
    if final is None:
        return [*lines, "Not measured yet: the lab measures it when it stops."]
    if not final.moved or final.verdict is None:
        return [*lines, f"Main did not move from `{short_commit(final.start)}`: nothing to compare."]
    summary = (f"One paired verdict of main `{short_commit(final.end)}` against main at the start "
               f"`{short_commit(final.start)}` (same suite, same lock, interleaved pairs): "
               f"{markdown_head(final.verdict)}.")
    return [*lines, summary, "", *markdown_table(final.verdict)]


def _via(e: ExperimentView) -> str:
    """Which launcher ran the experiment (hypotheses may name their own)."""
    return f" via `{e.launcher}`" if e.launcher else ""


def _landing_state(e: ExperimentView) -> str:
    """Merged only when the merge is reachable in the target repository; otherwise say what it is."""
    if not e.merge_commit:
        return "branch kept, not merged"
    merged = f"`{short_commit(e.merge_commit)}`"
    if e.published is None or not e.published.reachable:
        why = "not published yet" if e.published is None else e.published.error
        return f"merged in the lab's clone as {merged}, NOT reachable in the target: {inline(why)}"
    reverted = f", then reverted as `{short_commit(e.reverted)}`" if e.reverted else ""
    return f"merged as {merged}{reverted}, on `{e.published.branch}` in the target"


def _unsandboxed(lab: LabView) -> list[str]:
    """A lab whose workers ran without bubblewrap says so at the top of its report, not only in its journal."""
    return [f"**{UNSANDBOXED_NOTE}.**", ""] if lab.sandbox == SandboxMode.NONE else []


def _against_best(lab: LabView) -> list[str]:
    """The lab's result beside its best single attempt (measured by `orchard finalize`)."""
    verdict = None if lab.final is None else lab.final.verdict
    metric = "" if lab.review is None or lab.review.best is None else lab.review.best.metric
    wins = sum(1 for e in lab.experiments if e.decision == Decision.LAND and e.merge_commit and not e.reverted)
    return best_single_lines(lab.review, None if verdict is None else verdict.metrics,
                             "-" if verdict is None else verdict.verdict, lab.directions.get(metric), wins)


def render_final_report(lab: LabView) -> str:
    def decided(decision: Decision) -> list[ExperimentView]:
        return [e for e in lab.experiments if e.decision == decision]

    landed, killed, iterated = decided(Decision.LAND), decided(Decision.KILL), decided(Decision.ITERATE)
    lines = ["# Final report", "", f"Stopped: {inline(lab.stopped or 'the lab has not stopped')}.", "",
             f"{len(lab.experiments)} experiments: {len(landed)} landed, {len(killed)} killed, "
             f"{len(iterated)} iterated.", "", *_unsandboxed(lab), *final_lines(lab), "", *_against_best(lab), "",
             "## Landed changes", ""]
    lines += [f"- `{e.name}` on `{e.branch}`{_via(e)} ({_landing_state(e)}): " + inline("; ".join(e.reasons))
              for e in landed] or ["- none"]
    where = lab.publication
    if where is not None:
        lines += ["", "## In your repository", "",
                  f"Wins are published to `{where.repo}` as `{where.prefix}<experiment>` branches and `{where.ref}`"
                  + ("." if where.into_user_main else
                     f" (your `{where.main}` is checked out there and never pushed to). To see and take them:"),
                  "", "```", *where.commands(), "```"]
    if lab.launcher_failures:
        lines += ["", "## Launcher failures (the hypotheses went back to the backlog)", ""]
        lines += [f"- `{f.experiment}` (hypothesis `{f.hypothesis}`): {inline(f.reason)}"
                  for f in lab.launcher_failures]
    lines += ["", "## Killed hypotheses", ""]
    lines += [f"- `{e.name}`{'' if e.name == e.hypothesis else f' (hypothesis `{e.hypothesis}`)'}{_via(e)}: "
              + inline("; ".join(e.reasons)) for e in killed] or ["- none"]
    if iterated:
        lines += ["", "## Sent back to the backlog (ITERATE)", ""]
        lines += [f"- `{e.name}`: " + inline("; ".join(e.reasons)) for e in iterated]
    lines += ["", "## Recommended next backlog", ""]
    lines += [f"- `{b.id}` (score {score_text(b.score)}, {b.lane}{b.note}): {inline(b.title)}"
              for b in lab.backlog[:NEXT_BACKLOG]] or [EMPTY_BACKLOG]
    if lab.judge_hosts:
        lines += ["", *judge_host_lines(lab.judge_hosts)]
    if lab.spending:
        lines += ["", *spending_lines(lab.spending, lab.ran_s)]
    return "\n".join(lines) + "\n"


# events after which the leaderboard may read otherwise (a win landing, main measured, the final verdict)
BOARD_EVENTS = frozenset({EventKind.LAB_START, EventKind.REBASE, EventKind.LAND, EventKind.MERGE,
                          EventKind.MAIN_CHECK, EventKind.REVERT, EventKind.FINAL_VERDICT})


def moves_board(event: JournalEvent[Event | Unrecognized]) -> bool:
    """Whether the leaderboard may read otherwise after this event (a judgment only when it is a LAND)."""
    if isinstance(event.event, JudgmentEntry):
        return event.event.decision == Decision.LAND
    return event.kind in BOARD_EVENTS


class Notebook:
    """A running lab's notebook, brought up to date after each change without drawing it all again."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.journaled: tuple[int, int] | None = None  # the last event in JOURNAL.md, and the file's size then
        self.backlog = ""

    def update(self, state: LabState) -> None:
        journal = self.ws.root / "JOURNAL.md"
        size = journal.stat().st_size if journal.exists() else -1
        if self.journaled is None or size != self.journaled[1]:  # first update, or someone else wrote it
            events = state.events()
            write_atomic(journal, render_events(events))
            moved = True
        else:
            events = state.events(after=self.journaled[0])
            with journal.open("a", encoding="utf-8") as out:
                out.write(appended(events))
            moved = any(moves_board(e) for e in events)
        last = events[-1].id if events else (self.journaled or (0, 0))[0]
        self.journaled = (last, journal.stat().st_size)
        if moved:
            write_atomic(self.ws.root / "LEADERBOARD.md", render_leaderboard(board(state)))
        text = backlog_file.render(state)
        if text != self.backlog:
            write_atomic(self.ws.root / "backlog.md", text)
            self.backlog = text


def write_notebook(ws: Workspace, state: LabState, *, final: bool = False) -> None:
    """Render every record from lab.db into the workspace (with FINAL_REPORT.md and report.html when `final`)."""
    write_atomic(ws.root / "JOURNAL.md", render_journal(state))
    snapshot = view.build(ws, state, live=False)
    write_atomic(ws.root / "LEADERBOARD.md", render_leaderboard(snapshot.leaderboard))
    write_atomic(ws.root / "backlog.md", backlog_file.render(state))
    if final:
        write_atomic(ws.root / "FINAL_REPORT.md", render_final_report(snapshot))
        write_atomic(ws.root / "report.html", pages.report_html(snapshot))
