"""A running lab's notebook, brought up to date one change at a time, reads exactly as one rendered whole."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchard.lab.db.state import LabState
from orchard.lab.notebook import backlog_file
from orchard.lab.notebook import files as records
from orchard.lab.notebook.journal import render_journal
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.events import LabStopped
from orchard.lab.records.judgment import Decision, JudgmentEntry
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.loop_support import add_hypotheses, metric, verdict_of
from tests.lab.test_state_records import _judged, fill


def _inode(path: Path) -> int:
    return path.stat().st_ino


def test_each_update_appends_the_journal_and_redraws_only_what_moved(
        make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        fill(state)
        notebook = records.Notebook(ws)
        notebook.update(state)
        journal, board = ws.root / "JOURNAL.md", ws.root / "LEADERBOARD.md"
        first = (_inode(journal), _inode(board), board.read_text())
        add_hypotheses(state, {"id": "flat", "scope": ["wordfreq/cli.py"]})
        state.log(JudgmentEntry("flat", "flat", Decision.KILL, ("no effect beyond the noise floor",),
                                usage=AgentUsage(cost_usd=0.2)), "flat")
        notebook.update(state)
        assert journal.read_text() == render_journal(state)  # appended, to the byte what a whole render writes
        assert _inode(journal) == first[0], "the journal was rewritten, not appended"
        assert _inode(board) == first[1], "a KILL moved nothing on the leaderboard, yet it was drawn again"
        assert (ws.root / "backlog.md").read_text() == backlog_file.render(state)
        # a better win moves the leaderboard: drawn again, as a whole render draws it
        add_hypotheses(state, {"id": "better", "scope": ["wordfreq/tokenize.py"]})
        better = verdict_of([metric("report/wall_ms", "improved", -0.60, baseline=64.0, floor=0.05)])
        _judged(state, "better", "LAND", better, better.reasons, cost=0.1)
        notebook.update(state)
        assert _inode(board) != first[1] and board.read_text() != first[2]
        assert board.read_text() == records.render_leaderboard(records.board(state))
        assert "`better`" in board.read_text() and "-60.00%" in board.read_text()
        # a journal someone else wrote meanwhile (`orchard report`) is written whole again, never appended twice
        records.write_notebook(ws, state)
        state.log(LabStopped("the test stops it"))
        notebook.update(state)
        assert journal.read_text() == render_journal(state)
        assert journal.read_text().count("· stop") == 2
    finally:
        state.close()


def test_a_new_run_writes_the_journal_whole_first(make_workspace: Callable[..., Workspace]) -> None:
    """A crash mid-append leaves a torn entry: the next run's first update replaces the file."""
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        fill(state)
        (ws.root / "JOURNAL.md").write_text("# Lab journal\n\n## torn entr")
        records.Notebook(ws).update(state)
        assert (ws.root / "JOURNAL.md").read_text() == render_journal(state)
    finally:
        state.close()
