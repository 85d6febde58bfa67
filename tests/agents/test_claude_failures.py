"""Agent failures mid-run, with the real Claude Code against a scripted endpoint, each with the outcome a user
needs (slow tier: whole `orchard run`s).

- a rate limit (429) is not a KILL: the hypothesis goes back, waits, and lands on its next attempt;
- an overloaded service (529, 503) on every request pauses the lab after `[stop] launcher_failures` in a row,
  and `orchard status` says why, with the backlog untouched;
- a stream that stops sending before the model said anything: the worker times out, the hypothesis goes back
  (the endpoint's fault, not the idea's), the journal says "agent got no answer", and the next attempt lands;
- a turn limit or a refusal: KILL with the agent's own words;
- `[stop] max_cost_usd`: the lab stops at the first experiment whose reported cost crosses it.
Claude Code retries a 429 or 529 itself (up to 10 times, minutes apart): the workers here get
CLAUDE_CODE_MAX_RETRIES=0, so each failure reaches orchard at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.records.events import AgentRetried, LabStopped
from tests.agents import clis
from tests.agents.endpoint import ScriptedEndpoint
from tests.agents.labs import CLAUDE, SHORTER_ALPHA, agent_env, orchard, small_lab
from tests.lab.lab_helpers import lab_events, one_worker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NO_RETRIES = {**CLAUDE, "pass_env": [*CLAUDE["pass_env"], "CLAUDE_CODE_MAX_RETRIES"]}
TWO = """
[[hypothesis]]
id = "shorter-alpha"
metric = "out/stdout_bytes"
change = "print a shorter alpha"
scope = ["src/alpha.txt"]
impact = 5

[[hypothesis]]
id = "shorter-beta"
metric = "out/stdout_bytes"
change = "print a shorter beta"
scope = ["src/beta.txt"]
impact = 1
"""


def run_lab(tmp_path: Path, server: ScriptedEndpoint, *, launcher: dict[str, Any] = NO_RETRIES,
            hypotheses: str | None = None, **sections: dict[str, Any]) -> Path:
    clis.claude()
    env = agent_env(server.url, CLAUDE_CODE_MAX_RETRIES="0")
    root = small_lab(tmp_path, env, launcher=launcher, hypotheses=hypotheses or SHORTER_ALPHA, **sections)
    result = orchard("run", root, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return root


def experiments(root: Path) -> dict[str, tuple[str | None, list[str]]]:
    state = LabState.open(root)
    try:
        return {e.name: (e.decision, e.reasons) for e in state.experiments()}
    finally:
        state.close()


def test_a_rate_limit_sends_the_hypothesis_back_and_it_lands_on_the_next_attempt(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    server = endpoint("claude-rate-limited-once.toml")
    root = run_lab(tmp_path, server, workers=one_worker(timeout_minutes=5, retry_minutes=0.02))
    found = experiments(root)
    assert found["shorter-alpha"][0] is None  # not judged: no KILL for "changed nothing"
    assert found["shorter-alpha"][1] == ["agent rate-limited: claude: API Error: Request rejected (429) · "
                                         "Number of request tokens has exceeded your per-minute rate limit "
                                         f"(endpoint {server.url})"]
    assert found["shorter-alpha-2"][0] == "LAND"
    (retry,) = lab_events(root, AgentRetried)
    assert retry.event.wait_s == 1.2 and retry.event.in_a_row == 1


@pytest.mark.parametrize(("script", "said"), [
    ("claude-overloaded.toml", "claude: API Error: 529 Overloaded"),
    ("claude-unavailable.toml", "claude: API Error: 503 Service Unavailable"),
])
def test_an_overloaded_service_pauses_the_lab_and_status_says_why(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint], script: str, said: str
) -> None:
    server = endpoint(script)
    root = run_lab(tmp_path, server, hypotheses=TWO, stop={"top_attempted": 2, "launcher_failures": 2},
                   workers=one_worker(timeout_minutes=5, retry_minutes=0.01))
    found = experiments(root)
    assert len(found) == 2 and all(decision is None for decision, _ in found.values()), found
    state = LabState.open(root)
    try:
        assert {r.id: r.status for r in state.hypotheses()} == {"shorter-alpha": "open", "shorter-beta": "open"}
        stopped = state.events_of(LabStopped)[-1].event.reason
    finally:
        state.close()
    assert stopped.startswith("paused after 2 agent failures in a row (last: agent overloaded: " + said)
    status = orchard("status", root, env=agent_env(server.url))
    assert "stopped: paused after 2 agent failures in a row" in " ".join(status.stdout.split())


def test_a_stream_that_stops_sending_before_the_model_said_anything_is_the_endpoint_fault(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    server = endpoint("claude-hangs-once.toml")
    root = run_lab(tmp_path, server, workers=one_worker(timeout_minutes=0.5, retry_minutes=0.01))
    found = experiments(root)
    assert found["shorter-alpha"][0] is None
    assert found["shorter-alpha"][1][0].startswith(f"agent got no answer: {server.url} sent nothing from its model "
                                                   "(the worker timed out after 0.5 minutes")
    assert found["shorter-alpha-2"][0] == "LAND"
    assert "agent got no answer" in (root / "JOURNAL.md").read_text()


@pytest.mark.parametrize(("script", "args", "said"), [
    ("claude-max-turns.toml", ["--max-turns", "2"], "claude: Reached maximum number of turns (2)"),
    ("claude-refusal.toml", [], "claude: API Error: Opus 5.5's safeguards flagged this message"),
])
def test_a_turn_limit_or_a_refusal_is_a_kill_with_the_agent_own_words(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint], script: str, args: list[str], said: str
) -> None:
    root = run_lab(tmp_path, endpoint(script), launcher={**NO_RETRIES, "args": args})
    decision, reasons = experiments(root)["shorter-alpha"]
    assert decision == "KILL", reasons
    assert reasons[0].startswith("the worker did not finish: exited non-zero and wrote no report (" + said)


def test_the_cost_budget_stops_the_lab_at_the_first_experiment_that_crosses_it(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    root = run_lab(tmp_path, endpoint("claude-one-edit.toml"), launcher=CLAUDE, hypotheses=TWO,
                   stop={"top_attempted": 2, "max_cost_usd": 0.01})
    assert list(experiments(root)) == ["shorter-alpha"]  # shorter-beta never started
    stopped = lab_events(root, LabStopped)[-1].event.reason
    assert stopped == (f"paused: the agent cost budget of $0.01 is spent ($0.0580); `orchard run {root} "
                       "--max-cost-usd N` (or [stop] max_cost_usd in orchard.toml) raises it and resumes, the spend so "
                       "far kept")
