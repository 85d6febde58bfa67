"""The typed journal reads what earlier orchards wrote, and writes what they read.

`tests/data/old-journal/events.json` holds one event of every kind (and one
kind no orchard writes any more) exactly as orchard at bda19fc stored them in
lab.db; `JOURNAL.md` beside it is what that orchard rendered from them, with the two changes made on
purpose since: Markdown escaped as Markdown (`\\<dict>`, not `&lt;dict&gt;`) and numbers in their units
(`64.0 ms`, `1,000`: orchard.units).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.notebook.journal import recorded_rows, render_journal
from orchard.lab.records.db import EVENT_TYPES, Unrecognized
from orchard.lab.records.events import AgentHung, AgentRetried, EventKind, ExperimentHost, LabStopped, SandboxNoted
from orchard.lab.records.hack_findings import Settlement, WinHeld, WinSettled
from orchard.lab.records.judge_host import JudgeHost, JudgeLost, JudgeStarted, JudgeStep
from orchard.lab.records.judgment import JudgmentEntry
from orchard.lab.records.land_steps import MainChecked, Rebased
from orchard.lab.records.revisit_events import Revisited
from orchard.lab.records.steering_events import ExperimentStopped, LimitChanged, Paused, Resumed, StopAsked

OLD = Path(__file__).parent.parent / "data" / "old-journal"
ROWS: list[dict[str, Any]] = json.loads((OLD / "events.json").read_text())


@pytest.fixture
def old_lab(tmp_path: Path) -> LabState:
    """A lab.db whose journal an earlier orchard wrote (its rows inserted as they were stored)."""
    state = LabState(tmp_path / "lab.db")
    with state.transaction():
        for row in ROWS:
            state.db.execute("INSERT INTO events (at, kind, experiment, data) VALUES (?, ?, ?, ?)",
                             (row["at"], row["kind"], row["experiment"], json.dumps(row["data"], sort_keys=True)))
    return state


def test_an_old_journal_renders_as_the_orchard_that_wrote_it_rendered_it(old_lab: LabState) -> None:
    """As a person reads it; the file adds each entry's record line, which `orchard recover` replays."""
    assert render_journal(old_lab, records=False) == (OLD / "JOURNAL.md").read_text()
    old_lab.close()


def test_the_record_lines_of_a_journal_rebuild_its_events(old_lab: LabState, tmp_path: Path) -> None:
    """Every event of every kind, from the file's record lines alone, renders the same journal again."""
    written = render_journal(old_lab)
    rebuilt = LabState(tmp_path / "rebuilt.db")
    with rebuilt.transaction():
        for row in recorded_rows(written):
            rebuilt.db.execute("INSERT INTO events (id, at, kind, experiment, data) VALUES (?, ?, ?, ?, ?)",
                               (row["id"], row["at"], row["kind"], row["experiment"], row["data"]))
    assert len(recorded_rows(written)) == len(ROWS)
    assert render_journal(rebuilt) == written
    rebuilt.close()
    old_lab.close()


def test_old_events_read_back_typed(old_lab: LabState) -> None:
    events = old_lab.events()
    assert [e.kind for e in events] == [row["kind"] for row in ROWS]
    stop = events[-1].event
    assert isinstance(stop, LabStopped) and stop.reason == "the backlog is empty"
    (older,) = [e for e in events if isinstance(e.event, Unrecognized)]  # an older orchard's kind, kept as it was
    assert older.kind == "push-refused" and older.event.data["error"] == "an older orchard's event"
    hosts = old_lab.events_of(ExperimentHost)
    assert [h.event.requeued_from for h in hosts] == [None, "tcp://n1:1"]
    judged = old_lab.events_of(JudgmentEntry)[0].event
    assert judged.usage is not None and judged.usage.cost_usd == 0.12 and judged.patch_sha256 == ""
    rebased = [e.event for e in old_lab.events_of(Rebased)]
    assert [r.lands for r in rebased] == [True, False]
    assert rebased[1].judgment is not None and rebased[1].judgment.reasons == ("gone",)
    checked = old_lab.events_of(MainChecked)[0].event
    assert checked.regressed and checked.verdict is not None and checked.before == {"report/wall_ms": 39.0}
    old_lab.close()


# kinds bda19fc never wrote, each with a record as a later orchard writes it
NEWER = {EventKind.AGENT_RETRY: AgentRetried("h1", "claude", "agent rate-limited: 429", 60.0, 1, "logs/e1.log"),
         EventKind.AGENT_HUNG: AgentHung("h1", "claude", "agent hung: no result", 0.0, 2, None),
         EventKind.SANDBOX_NOTE: SandboxNoted("the judge's build step has the network ([target] build_network)"),
         EventKind.JUDGE_HOST: JudgeStarted(JudgeHost("judge-a", "tcp://10.0.0.2:4001"), JudgeStep.CONFIRM),
         EventKind.JUDGE_LOST: JudgeLost(JudgeHost("judge-a", "tcp://10.0.0.2:4001"), JudgeStep.CONFIRM, "gone"),
         EventKind.HELD: WinHeld(("cache-write at a.py:5: db = shelve.open(CACHE)",)),
         EventKind.SETTLED: WinSettled(Settlement.LAND, "alice"),
         EventKind.STOP_ASKED: StopAsked(False, "alice"),
         EventKind.STOPPED: ExperimentStopped("h1", False, "alice"),
         EventKind.PAUSE: Paused("alice"),
         EventKind.RESUME: Resumed("alice", (LimitChanged("max_cost_usd", 5.0, 20.0),)),
         EventKind.REVISIT: Revisited("h1", "h1", "e2", "the win e2 changed src/a.c, which it was about")}


def test_the_newer_kinds_read_back_what_they_write() -> None:
    for kind, record in NEWER.items():
        assert record.kind == kind and EVENT_TYPES[kind] is type(record)
        assert type(record).from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_every_kind_has_one_record_that_writes_the_json_it_reads() -> None:
    assert set(EVENT_TYPES) == set(EventKind)
    assert {row["kind"] for row in ROWS} - {"push-refused"} == set(EventKind) - set(NEWER)
    for row in ROWS:
        record = EVENT_TYPES.get(row["kind"])
        if record is None:
            continue
        written = json.loads(json.dumps(record.from_dict(row["data"]).to_dict(), sort_keys=True, default=str))
        if record is JudgmentEntry:  # what a judgment entry adds now: the hash of the patch it judged
            written.pop("patch_sha256")
            written = {k: v for k, v in written.items() if k in row["data"]}
        assert written == row["data"], row["kind"]
