"""Whole labs on the demo target with real Claude Code workers against the scripted endpoint (slow tier).

Three `claude` workers make the demo's changes through the CLI's own tools
(tests/agents/scripts/claude-demo-three.toml) and reach the decisions the
demo's `patch` run reaches: a LAND, a KILL for leaving the scope, a KILL for
failed tests. The journal carries each worker's usage and cost as the CLI
printed it, and FINAL_REPORT totals them.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from orchard.demo.make import make_demo
from orchard.lab.db.state import LabState
from orchard.lab.judge.verdict_view import num
from tests.agents import clis
from tests.agents.demo_lab import broken_tries
from tests.agents.endpoint import ScriptedEndpoint
from tests.agents.labs import CLAUDE, agent_env, orchard
from tests.lab.lab_helpers import first_experiments

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

DEMO_THREE = ["count-with-dict", "tokenize-regex", "longest-word-one-pass"]


def claude_demo(directory: Path, only: list[str], **launcher: Any) -> Path:
    """The demo's workspace with its hypotheses `only`, its workers `claude` (subprocess executor)."""
    ws = make_demo(directory, workers=len(only), executor="subprocess", only=only)
    config = tomllib.loads(ws.config_path.read_text())
    config["launcher"] = {**CLAUDE, **launcher}
    ws.config_path.write_text(tomli_w.dumps(config))
    return ws.root


def last_result(log: Path) -> dict[str, Any]:
    """The CLI's own JSON result object, as printed into the worker's log."""
    lines = [line for line in log.read_text().splitlines() if line.startswith('{"') and '"type":"result"' in line]
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def test_three_claude_workers_reach_the_demo_decisions(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    clis.claude()
    server = endpoint("claude-demo-three.toml")
    env = agent_env(server.url)
    root = claude_demo(tmp_path / "lab", DEMO_THREE)
    result = orchard("run", root, env=env, timeout=1500)
    assert result.returncode == 0, result.stdout + result.stderr

    found = first_experiments(root)  # the broken change's kill may be revisited after the win on its file
    decisions = {h: (e.decision, e.judgment and e.judgment.rule) for h, e in found.items()}
    tried = broken_tries(found)  # KILLed, or ITERATEd when noise let its verdict PASS, and then its child ran
    assert decisions == {"count-with-dict": ("LAND", None), "tokenize-regex": ("KILL", "scope-kept"),
                         **{h: decisions[h] for h in tried}}, {h: e.reasons for h, e in found.items()}
    unmatched = [r for r in server.requests() if r.step is None and r.asked and "# Experiment:" in r.asked.prompt]
    assert unmatched == [], [r.asked.turn for r in unmatched if r.asked]
    journal = (root / "JOURNAL.md").read_text()
    total = 0.0
    for hypothesis, experiment in found.items():
        printed = last_result(root / "logs" / f"{hypothesis}.log")
        assert printed["permission_denials"] == [] and printed["is_error"] is False, printed
        usage = experiment.candidate.usage if experiment.candidate else None
        assert usage is not None and usage.cost_usd == printed["total_cost_usd"] > 0
        assert usage.input_tokens == printed["usage"]["input_tokens"] and usage.turns == printed["num_turns"]
        assert f"cost_usd {num(printed['total_cost_usd'])}" in journal.split(f"judgment · {hypothesis}")[1]
        total += printed["total_cost_usd"]
    report = (root / "FINAL_REPORT.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| `claude` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == [str(len(found)), "1", f"${total:.4f}"]  # an ITERATE's child too
    assert cells[9] == f"${total:.4f}"  # the cost of its one win


def test_orchard_plan_with_claude_adds_valid_hypotheses_and_refuses_an_invalid_plan_with_the_reasons(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    clis.claude()
    server = endpoint("claude-plan.toml")
    env = agent_env(server.url)
    root = claude_demo(tmp_path / "lab", ["count-with-dict"])
    planned = orchard("plan", root, env=env)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    state = LabState.open(root)
    try:
        backlog = {r.id: r.source for r in state.hypotheses()}
    finally:
        state.close()
    assert backlog == {"count-with-dict": "user", "report-join-once": "planner", "reader-no-strip-copy": "planner",
                       "ranked-heapq": "planner"}
    planner = [r.step for r in server.requests() if r.asked and "# Planning:" in r.asked.prompt]
    assert planner == ["plan: read", "plan: write", "plan: done"]
    (log,) = (root / "logs").glob("plan-*.log")
    assert last_result(log)["permission_denials"] == []  # its answer file is outside its checkout: allowed

    refused = orchard("plan", root, env=env)
    assert refused.returncode != 0
    said = " ".join(refused.stderr.split())
    assert "the planner's hypotheses were rejected" in said and "expected 3-6 hypotheses, got 2" in said
    assert "report-join-once: already in the backlog" in said and "cache-everything: no scope" in said
    state = LabState.open(root)
    try:
        assert {r.id for r in state.hypotheses()} == set(backlog)  # nothing of the refused plan was added
    finally:
        state.close()
