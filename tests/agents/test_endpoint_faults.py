"""The endpoint's fault is never the hypothesis's: real Claude Code and Codex workers with their own default
retries against an endpoint that fails them (slow tier: whole `orchard run`s).

Each fault sends the hypothesis back to the backlog (never KILLed) and the lab either recovers or pauses after
`[stop] launcher_failures` in a row with one line naming the endpoint and what it answered; docs/lab-workers.md
has the table of faults, what each CLI does on its own and what orchard does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.records.events import LabStopped
from tests.agents import clis
from tests.agents.endpoint import ScriptedEndpoint
from tests.agents.labs import CLAUDE, agent_env, orchard, small_lab
from tests.lab.lab_helpers import lab_events, one_worker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PAUSE = {"top_attempted": 1, "launcher_failures": 2}


def fault(name: str) -> str:
    return f"""
[[hypothesis]]
id = "{name}"
metric = "out/stdout_bytes"
change = "print a shorter alpha"
scope = ["src/alpha.txt"]
"""


def run(tmp_path: Path, server: ScriptedEndpoint, launcher: dict[str, Any], hypotheses: str,
        env: dict[str, str], **sections: dict[str, Any]) -> tuple[Path, dict[str, tuple[str | None, list[str]]]]:
    """`orchard run` on a one-worker lab to its end; each experiment's decision and reasons."""
    root = small_lab(tmp_path, env, launcher=launcher, hypotheses=hypotheses, **sections)
    result = orchard("run", root, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    state = LabState.open(root)
    try:
        return root, {e.name: (e.decision, e.reasons) for e in state.experiments()}
    finally:
        state.close()


def paused(root: Path) -> str:
    """The lab's stop line, asserting its hypothesis is still open (no attempt counted)."""
    state = LabState.open(root)
    try:
        assert {r.status for r in state.hypotheses()} == {"open"}
    finally:
        state.close()
    return lab_events(root, LabStopped)[-1].event.reason


def test_a_silent_endpoint_never_costs_the_hypothesis(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    """Pre-flight answered, then no answer to any worker: on main the second timeout KILLed the hypothesis "timed
    out and wrote no report". Two retries (a short span; the default is tried by the 500 test below)."""
    clis.claude()
    server = endpoint("claude-silent.toml")
    launcher = {**CLAUDE, "pass_env": [*CLAUDE["pass_env"], "CLAUDE_CODE_MAX_RETRIES"]}
    root, found = run(tmp_path, server, launcher, fault("shorter-alpha"),
                      agent_env(server.url, CLAUDE_CODE_MAX_RETRIES="2"), stop=PAUSE,
                      workers=one_worker(timeout_minutes=0.2, retry_minutes=0.01))
    assert [decision for decision, _ in found.values()] == [None, None], found
    stopped = paused(root)
    assert stopped.startswith(f"paused after 2 agent failures in a row (last: agent got no answer: {server.url} "
                              "sent nothing from its model (the worker timed out after 0.2 minutes"), stopped
    report = (root / "FINAL_REPORT.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| `claude` |"))
    assert [c.strip() for c in row.strip("|").split("|")][1:4] == ["2", "0", "$0"]  # nothing spent, not "not reported"


def test_claude_retrying_500s_longer_than_the_worker_timeout_is_not_hung_and_the_lab_recovers(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    """Claude Code's default retries (ten, about three minutes) outlast `timeout_minutes`: on main the worker was
    stopped while retrying, twice, and the hypothesis KILLed. Now its timeout holds the retry span: the first run
    ends on the CLI's own "API Error: 500", the hypothesis goes back, and the next run lands."""
    clis.claude()
    server = endpoint("claude-500-then-recovers.toml")
    root, found = run(tmp_path, server, CLAUDE, fault("shorter-alpha"), agent_env(server.url),
                      stop={"top_attempted": 1, "launcher_failures": 3},
                      workers=one_worker(timeout_minutes=0.25, retry_minutes=0.01))
    decisions = [decision for decision, _ in found.values()]
    assert "KILL" not in decisions and decisions[-1] == "LAND", found
    first = found["shorter-alpha"][1][0]
    assert first.startswith("agent overloaded: claude: API Error: 500") and f"(endpoint {server.url})" in first


@pytest.mark.parametrize(("hypothesis", "said", "words"), [
    ("fault-500", "agent overloaded: codex: ", "We’re currently experiencing high demand"),
    ("fault-429", "agent rate-limited: codex: ", "last status: 429 Too Many Requests"),
    ("fault-silent", "agent got no answer: {url}/v1 sent nothing from its model (the worker timed out", ""),
])
def test_codex_workers_facing_a_failing_endpoint_pause_the_lab_naming_it(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint], hypothesis: str, said: str, words: str
) -> None:
    """Codex's default retries (five reconnects, seconds apart) against 500s, a 429 storm, and an endpoint that
    goes silent after pre-flight. On main a 500 or a 429 was "launcher codex failed" (its words name no status
    orchard read) and the silent endpoint KILLed the hypothesis."""
    clis.codex()
    server = endpoint("codex-faults.toml")
    launcher = {"name": "codex", "model": "scripted", "base_url": f"{server.url}/v1"}
    root, found = run(tmp_path, server, launcher, fault(hypothesis), agent_env(server.url, OPENAI_API_KEY="sk-x"),
                      stop=PAUSE, workers=one_worker(timeout_minutes=0.3, retry_minutes=0.01))
    assert [decision for decision, _ in found.values()] == [None, None], found
    stopped = paused(root)
    assert stopped.startswith(f"paused after 2 agent failures in a row (last: {said.format(url=server.url)}"), stopped
    assert words in stopped  # its own words: whether it gave up, or was stopped while still retrying
    assert f"(endpoint {server.url}/v1)" in stopped or "sent nothing" in stopped


@pytest.mark.parametrize(("script", "failures", "said"), [
    ("claude-overloaded.toml", 2, "agent overloaded: claude: API Error: Repeated 529 Overloaded errors"),
    ("claude-rate-limit-storm.toml", 1, "agent rate-limited: claude: "),
])
def test_claude_with_its_default_retries_facing_529s_or_a_429_storm_pauses_the_lab_naming_the_endpoint(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint], script: str, failures: int, said: str
) -> None:
    """Claude Code gives up on 529s after three tries (seconds: "Repeated 529 Overloaded errors") and retries a
    429 ten times (about three minutes: one run only, `launcher_failures = 1`)."""
    clis.claude()
    server = endpoint(script)
    root, found = run(tmp_path, server, CLAUDE, fault("shorter-alpha"), agent_env(server.url),
                      stop={"top_attempted": 1, "launcher_failures": failures},
                      workers=one_worker(timeout_minutes=0.25, retry_minutes=0.01))
    assert [decision for decision, _ in found.values()] == [None] * failures, found
    stopped = paused(root)
    assert stopped.startswith(f"paused after {failures} agent failures in a row (last: {said}"), stopped
    assert f"(endpoint {server.url})" in stopped
