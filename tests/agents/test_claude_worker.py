"""The real Claude Code as a lab's worker, against the scripted model endpoint.

One `claude` worker, one hypothesis: orchard renders its prompt and launch
line, the real CLI runs inside orchard's sandbox with a scratch HOME, makes
the change through its own Read, Edit, Bash and Write tools, and the change
is judged like any other. What the CLI sent (the rendered prompt, the tools
offered) is read back from the endpoint's log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from orchard.lab.state import LabState
from orchard.lab.workspace_init import init_workspace
from tests.agents import clis
from tests.agents.endpoint import ScriptedEndpoint
from tests.lab.lab_helpers import ALPHA_TARGET, TARGET_FILES, lab_config, make_repo, one_worker

SUITE = """
[suite]
name = "agents"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "out"
command = ["cat", "{bin}"]

[[metric]]
name = "stdout_bytes"
floor = 0.0
"""

HYPOTHESIS = """
[[hypothesis]]
id = "shorter-alpha"
metric = "out/stdout_bytes"
change = "print a shorter alpha"
scope = ["src/alpha.txt"]
"""

# None of the tester's own credentials or settings reach orchard.
FOREIGN = ("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "DISABLE_")


def agent_env(server: ScriptedEndpoint, **more: str) -> dict[str, str]:
    """orchard's environment for a lab whose claude workers talk to `server`."""
    ours = {name: value for name, value in os.environ.items() if not name.startswith(FOREIGN)}
    return {**ours, "PATH": f"{clis.NPM_BIN}:{os.environ['PATH']}", "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted", **clis.CLAUDE_QUIET, **more}


def orchard(*args: str | Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def test_one_claude_worker_edits_builds_reports_and_its_change_lands(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint]
) -> None:
    claude = clis.claude()
    server = endpoint("claude-one-edit.toml")
    target = make_repo(tmp_path / "target-repo", TARGET_FILES)
    (tmp_path / "suite.toml").write_text(SUITE)
    (tmp_path / "hypotheses.toml").write_text(HYPOTHESIS)
    (tmp_path / "orchard.toml").write_text(lab_config(
        target=ALPHA_TARGET, workers=one_worker(timeout_minutes=5),
        launcher={"name": "claude", "pass_env": ["ANTHROPIC_BASE_URL", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"]},
        stop={"top_attempted": 1}))
    ws = init_workspace(tmp_path / "ws", str(target), None, tmp_path / "orchard.toml")
    env = agent_env(server)
    assert orchard("backlog", "add", ws.root, "--file", tmp_path / "hypotheses.toml", env=env).returncode == 0
    result = orchard("run", ws.root, env=env)
    assert result.returncode == 0, result.stdout + result.stderr

    state = LabState.open(ws.root)
    try:
        (experiment,) = state.experiments()
    finally:
        state.close()
    log = (ws.logs_dir / "shorter-alpha.log").read_text()
    assert experiment.decision == "LAND", (experiment.reasons, log)
    answered = [r.step for r in server.requests() if r.path == "/v1/messages"]
    assert answered == ["read", "edit", "build", "report", "done"], answered
    final = json.loads(next(line for line in log.splitlines() if line.startswith("{") and '"result"' in line))
    assert final["permission_denials"] == [] and final["is_error"] is False and final["num_turns"] == 5
    first = server.requests()[0] if server.requests()[0].asked else server.requests()[1]
    assert first.asked is not None and "# Experiment: shorter-alpha" in first.asked.prompt
    assert {"Read", "Edit", "Write", "Bash"} <= set(first.asked.tools)
    usage = experiment.candidate.usage if experiment.candidate else None
    assert usage is not None and usage.turns == 5 and usage.cost_usd == final["total_cost_usd"] > 0
    assert usage.input_tokens == final["usage"]["input_tokens"]
    assert str(claude)  # the pinned CLI ran: its own version is in the result's model usage
