"""Budgets pause the lab and a higher one resumes it, the spend kept (issue 32, item 2).

On main `orchard run LAB --max-cost-usd N` was "No such option" (only `orchard resume` took a budget), a budget
overspent by far still let every running worker run on to its end, and a Codex worker's cost was "not reported"
(Codex prints tokens, no cost). Now `orchard run` raises the limit through the same code as `orchard resume`,
a budget used past `[stop] hard_cap_factor` times its limit stops the running workers (their hypotheses back
in the backlog, never judged) and the pause says so, and Codex's cost is worked out from its tokens and a price
table orchard.toml may override, shown as estimated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from orchard.errors import UsageError
from orchard.lab.config.orchard_toml import from_dict, load
from orchard.lab.config.sections import LauncherConfig
from orchard.lab.db.running_time import RunClock, add_ran
from orchard.lab.db.state import LabState
from orchard.lab.loop import stop
from orchard.lab.loop.steering import Steering
from orchard.lab.notebook.spending import cost_text
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.events import ExperimentStarted, LabStopped
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus, Lane
from orchard.lab.records.steering_events import LimitChanged, Resumed
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import ALPHA_TARGET, REPORTS, STDOUT_SUITE, command_launcher, lab_config, one_worker
from tests.lab.loop_support import bare_candidate
from tests.lab.test_steering import _Executor, _Lab, _orchard, _workspace

CONFIG = lab_config(target={**ALPHA_TARGET, "repo": "/srv/target"})
PAID = AgentUsage(cost_usd=0.06, input_tokens=1000, output_tokens=50, source="claude")


def _spent(ws: Workspace, state: LabState, usage: AgentUsage = PAID, launcher: str = "") -> None:
    """One experiment done, its agent having spent `usage`."""
    state.add_hypothesis(Hypothesis(id="paid", metric="out/stdout_bytes", change="x", launcher=launcher),
                         source="user")
    state.update_hypothesis("paid", status=HypothesisStatus.KILLED)
    state.add_experiment("paid", "paid", "w1", Lane.EXPLOIT, 1, ws.target_base(), ws.bench_base(),
                         ExperimentStatus.DONE)
    state.update_experiment("paid", candidate=bare_candidate(experiment="paid", usage=usage))
    if launcher:
        state.log(ExperimentStarted("paid", "w1", Lane.EXPLOIT, ws.target_base(), launcher, "x", "log"), "paid")


def test_run_given_a_budget_raises_it_keeps_the_spend_and_runs(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"max_cost_usd": 0.01})
    state = LabState.open(ws.root)
    try:
        _spent(ws, state)
    finally:
        state.close()
    code, said = _orchard("run", ws.root, "--max-cost-usd", "5")
    assert code == 0, said
    assert "(stop.max_cost_usd 0.01 -> 5); spent so far, kept: $0.0600" in said
    assert "stopped: the backlog is empty" in said  # it ran: nothing was left to try
    assert load(ws.config_path).stop.max_cost_usd == 5
    state = LabState.open_readonly(ws.root)
    try:
        assert [e.event.limits for e in state.events_of(Resumed)] == [(LimitChanged("max_cost_usd", 0.01, 5),)]
    finally:
        state.close()


def test_a_bad_budget_given_to_run_is_one_message_and_exit_2_with_orchard_toml_untouched(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"max_cost_usd": 0.01})
    before = ws.config_path.read_text()
    code, said = _orchard("run", ws.root, "--max-wall-minutes", "-5")
    assert code == 2 and "stop.max_wall_minutes" in said and "orchard.toml was left as it was" in said, said
    assert said.count("\n") == 1 and ws.config_path.read_text() == before


@pytest.mark.parametrize(("limits", "cost", "capped"), [
    ({"max_cost_usd": 0.01}, 0.06, "the agent cost, $0.0600, is past 1.5 times its budget of $0.01"),
    ({"max_cost_usd": 0.05}, 0.06, None),  # spent, not past the cap: the running worker finishes
    ({"max_wall_minutes": 60}, 0.0, "the wall time, 100.0 minutes, is past 1.5 times its budget of 60 minutes"),
])
def test_a_budget_past_its_hard_cap_stops_the_running_workers_and_the_pause_says_so(
    tmp_path: Path, limits: dict[str, float], cost: float, capped: str | None
) -> None:
    ws = _workspace(tmp_path, limits)
    state = LabState.open(ws.root)
    try:
        _spent(ws, state, AgentUsage(cost_usd=cost))
        add_ran(state, 100 * 60)
        state.add_hypothesis(Hypothesis(id="h2", metric="out/stdout_bytes", change="y"), source="user")
        state.update_hypothesis("h2", status=HypothesisStatus.RUNNING, attempt=True)
        state.add_experiment("e2", "h2", "w2", Lane.EXPLOIT, 1, ws.target_base(), ws.bench_base(),
                             ExperimentStatus.RUNNING)
        ws.worker("w2").root.mkdir()
        executor = _Executor("e2")
        assert Steering(state, RunClock()).steer(_Lab(ws, state, executor)) is False
        record = state.experiment("e2")
        if capped is None:
            assert (record.status, executor.cancelled) == (ExperimentStatus.RUNNING, [])
            return
        reason = stop.stop_reason(ws, state)
        assert reason is not None and reason.startswith("paused: "), reason
        assert (record.status, record.decision, record.judgment) == (ExperimentStatus.DONE, None, None)
        assert f"stopped by the budget's hard cap ({capped}): never judged" in record.reasons[0]
        assert state.hypothesis("h2").status == HypothesisStatus.OPEN and executor.cancelled == ["e2"]
        assert "past its hard cap ([stop] hard_cap_factor) the 1 running worker(s) were stopped, their hypotheses " \
               "back in the backlog with no attempt counted (h2)" in reason
        flag = "max-cost-usd" if "max_cost_usd" in limits else "max-wall-minutes"
        assert f"`orchard run {ws.root} --{flag} N`" in reason and "the spend so far kept" in reason
    finally:
        state.close()


CODEX_LOG = "\n".join(json.dumps(event) for event in [
    {"type": "thread.started", "thread_id": "t"},
    {"type": "turn.completed", "usage": {"input_tokens": 21000, "cached_input_tokens": 1000, "output_tokens": 400}},
    {"type": "turn.completed", "usage": {"input_tokens": 9000, "cached_input_tokens": 0, "output_tokens": 600}},
])


@pytest.mark.parametrize(("model", "prices", "cost"), [
    ("gpt-5-mini", {}, (29000 * 0.25 + 1000 * 0.025 + 1000 * 2.0) / 1e6),  # orchard's table
    ("", {}, (29000 * 1.25 + 1000 * 0.125 + 1000 * 10.0) / 1e6),  # no model: Codex's own default, its entry
    ("scripted", {"scripted": {"input": 2, "cached_input": 1, "output": 8}}, (29000 * 2 + 1000 * 1 + 1000 * 8) / 1e6),
    ("gpt-5-mini", {"gpt-5-mini": {"input": 0, "cached_input": 0, "output": 0}}, 0.0),
    ("no-such-model", {}, None),  # no price known: not reported, never a guess
])
def test_codex_cost_is_estimated_from_its_tokens_at_its_model_price(
    model: str, prices: dict[str, dict[str, float]], cost: float | None
) -> None:
    config = from_dict({**tomllib.loads(CONFIG), "launcher": {"name": "codex", "model": model}, "prices": prices})
    launcher = make_launcher(config.launcher)
    usage = launcher.priced(launcher.usage(CODEX_LOG), config.prices)
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (30000, 1000, 1000)
    if cost is None:
        assert (usage.cost_usd, cost_text(usage.cost_usd, usage.estimated)) == (None, "not reported")
        return
    assert usage.cost_usd == pytest.approx(cost) and usage.estimated
    assert cost_text(usage.cost_usd, usage.estimated) == ("$0" if cost == 0 else f"${cost:.4f} (estimated)")
    claude = make_launcher(LauncherConfig(name="claude"))
    assert claude.priced(PAID, config.prices) == PAID  # a cost the CLI printed stays as it said


@pytest.mark.parametrize(("table", "said"), [
    ({"input": 1, "cached_input": 0.1, "outptu": 4}, "prices.m.outptu: unknown key; known: input, cached_input, "
                                                     "output"),
    ({"input": 1, "cached_input": 0.1}, "prices.m.output: missing"),
    ({"input": -1, "cached_input": 0.1, "output": 4}, "prices.m.input: -1.0 is below the minimum 0"),
    ({"input": "cheap", "cached_input": 0.1, "output": 4}, "prices.m.input: expected a number, got 'cheap'"),
])
def test_a_bad_price_table_is_refused_naming_the_key(table: dict[str, object], said: str) -> None:
    with pytest.raises(UsageError) as refused:
        from_dict({**tomllib.loads(CONFIG), "prices": {"m": table}})
    assert said in str(refused.value)


def test_nothing_spent_is_0_and_an_estimate_says_so_in_the_status_and_final_report(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"max_cost_usd": 1})
    with ws.config_path.open("a") as config:
        config.write('\n[launchers.codex]\nname = "codex"\n')
    state = LabState.open(ws.root)
    try:
        _spent(ws, state, AgentUsage(cost_usd=0.0023, input_tokens=1200, output_tokens=100, estimated=True), "codex")
    finally:
        state.close()
    code, report = _orchard("report", ws.root)
    assert code == 0, report
    assert "| `codex` | 1 | 0 | $0.0023 (estimated) |" in report
    status = _orchard("status", ws.root)[1]
    assert "spent: $0.0023 (estimated) of agent cost" in status
    assert "max_cost_usd: $1.00 of $1 left ($0.0023 (estimated) spent)" in status
    state = LabState.open(ws.root)
    try:
        state.update_experiment("paid", candidate=bare_candidate(experiment="paid", usage=AgentUsage(cost_usd=0.0)))
    finally:
        state.close()
    report = _orchard("report", ws.root)[1]
    assert "| `codex` | 1 | 0 | $0 |" in report
    assert "spent: $0 of agent cost" in _orchard("status", ws.root)[1]


@pytest.mark.slow  # a whole `orchard run`: two workers, one verdict
def test_in_a_lab_the_hard_cap_stops_the_worker_still_running_and_the_pause_names_it(
    tmp_path: Path, target_repo: Path, standin_bin: Path
) -> None:
    """The stand-in Claude Code reports $0.0123, past 1.5 times a $0.005 budget: the other worker, still running
    (it would sleep ten minutes), is stopped unjudged (on main it ran to its timeout and was judged)."""
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(lab_config(
        target=ALPHA_TARGET, workers={**one_worker(timeout_minutes=15), "count": 2, "exploit": 2},
        launcher={"name": "claude"}, launchers={"sleeper": command_launcher("sleep 600" + REPORTS)},
        stop={"top_attempted": 9, "max_cost_usd": 0.005}))
    (tmp_path / "hypotheses.toml").write_text(
        '[[hypothesis]]\nid = "paid"\nmetric = "out/stdout_bytes"\nchange = "shorter alpha"\nscope = ["src/alpha.txt"]'
        '\nimpact = 5\n\n[[hypothesis]]\nid = "sleeper"\nmetric = "out/stdout_bytes"\nchange = "sleep"\n'
        'scope = ["src/beta.txt"]\nimpact = 4\nlauncher = "sleeper"\n')
    ws = init_workspace(tmp_path / "ws", str(target_repo), None, tmp_path / "orchard.toml")
    env = {**os.environ, "PATH": f"{standin_bin}:{os.environ['PATH']}"}
    for args in (("backlog", "add", ws.root, "--file", tmp_path / "hypotheses.toml"), ("run", ws.root)):
        done = subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                              timeout=900, env=env, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    state = LabState.open_readonly(ws.root)
    try:
        sleeper = next(e for e in state.experiments() if e.hypothesis == "sleeper")
        assert (sleeper.decision, sleeper.judgment) == (None, None), sleeper.reasons
        assert "stopped by the budget's hard cap (the agent cost, $0.0123, is past 1.5 times its budget of " \
               "$0.005)" in sleeper.reasons[0]
        assert state.hypothesis("sleeper").status == HypothesisStatus.OPEN
        reason = state.events_of(LabStopped)[-1].event.reason
    finally:
        state.close()
    assert reason.startswith("paused: the agent cost budget of $0.005 is spent ($0.0123); past its hard cap "), reason
    assert "(sleeper)" in reason
