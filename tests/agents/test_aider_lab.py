"""A real aider worker in a whole lab on the demo target, through the scripted chat-completions endpoint.

aider 0.86.2 from PyPI, in its own virtualenv, runs inside orchard's sandbox (network = "api" because the
launcher names a base_url), edits with its SEARCH/REPLACE blocks and writes the report orchard put in its
chat; the journal carries the tokens aider printed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agents import clis
from tests.agents.demo_lab import demo_lab, run_lab
from tests.agents.endpoint import ScriptedEndpoint


def aider_launcher(server: ScriptedEndpoint) -> dict[str, object]:
    return {"name": "aider", "model": "openai/scripted", "base_url": f"{server.url}/v1",
            "args": ["--edit-format", "diff", "--no-show-model-warnings"]}


@pytest.mark.slow
def test_one_aider_worker_lands_its_change(tmp_path: Path, endpoint: Callable[..., ScriptedEndpoint]) -> None:
    clis.aider()
    server = endpoint("aider-demo.toml")
    ws = demo_lab(tmp_path / "lab", {"default": aider_launcher(server)}, {"count-with-dict": ""}, workers=1)
    assert ws.config.launcher.network == "api"
    (record,) = run_lab(ws).values()

    log = (ws.logs_dir / f"{record.name}.log").read_text()
    assert record.decision == "LAND", (record.reasons, log)
    # pre-flight's one test request (through the same sandbox and proxy), then the worker's
    assert [r.step for r in server.requests()] == ["test-request", "count-with-dict", "summary"]
    assert "Skipping edits" not in log and "Applied edit to wordfreq/count.py" in log
    # no model list from GitHub, no update check: the egress proxy was asked for the endpoint only (it says each
    # refusal), and aider did not say it failed to fetch anything
    assert "[orchard egress]" not in log and "raw.githubusercontent.com" not in log, log
    printed = re.findall(r"^Tokens: (\S+) sent, (\S+) received\.", log, re.MULTILINE)
    usage = record.candidate.usage if record.candidate else None
    assert printed == [("4.1k", "260")] and usage is not None, log
    assert (usage.input_tokens, usage.output_tokens, usage.turns) == (4100, 260, 1)
