"""The real Claude Code as a lab's worker, against the scripted model endpoint.

One `claude` worker, one hypothesis: orchard renders its prompt and launch
line, the real CLI runs inside orchard's sandbox with a scratch HOME, makes
the change through its own Read, Edit, Bash and Write tools, and the change
is judged like any other. What the CLI sent (the rendered prompt, the tools
offered) is read back from the endpoint's log.

A whole lab with a real CLI (~20 s): the slow tier, beside the claude labs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from tests.agents import clis
from tests.agents.endpoint import ScriptedEndpoint
from tests.agents.labs import agent_env, orchard, small_lab

pytestmark = pytest.mark.slow


def test_one_claude_worker_edits_builds_reports_and_its_change_lands(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    clis.claude()
    server = endpoint("claude-one-edit.toml")
    env = agent_env(server.url)
    root = small_lab(tmp_path, env)
    result = orchard("run", root, env=env)
    assert result.returncode == 0, result.stdout + result.stderr

    state = LabState.open(root)
    try:
        (experiment,) = state.experiments()
    finally:
        state.close()
    log = (root / "logs" / "shorter-alpha.log").read_text()
    assert experiment.decision == "LAND", (experiment.reasons, log)
    worker = [r for r in server.requests() if r.asked is not None and "# Experiment:" in r.asked.prompt]
    assert [r.step for r in worker] == ["read", "edit", "build", "report", "done"]
    final = json.loads(next(line for line in log.splitlines() if line.startswith("{") and '"result"' in line))
    assert final["permission_denials"] == [] and final["is_error"] is False and final["num_turns"] == 5
    first = worker[0].asked
    assert first is not None and "# Experiment: shorter-alpha" in first.prompt
    assert {"Read", "Edit", "Write", "Bash"} <= set(first.tools)
    usage = experiment.candidate.usage if experiment.candidate else None
    assert usage is not None and usage.turns == 5 and usage.cost_usd == final["total_cost_usd"] > 0
    assert usage.input_tokens == final["usage"]["input_tokens"]
