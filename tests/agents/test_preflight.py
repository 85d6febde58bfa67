"""`orchard run` refuses to start when its codex or aider workers could not work at all: a refused key (401),
a model that does not exist (404). As for claude (test_claude_preflight.py), pre-flight sends one real test
request through the CLI, inside the worker's sandbox (network = "api": through the egress proxy); the CLI's
own message is the reason, and nothing in the lab is touched. (Before, only claude had a test request: a
codex or aider lab with a bad key burnt its backlog one hypothesis at a time.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agents import clis
from tests.agents.demo_lab import agent_env
from tests.agents.endpoint import ScriptedEndpoint
from tests.agents.labs import orchard, small_lab
from tests.lab.loop_support import snapshot


def codex(url: str, model: str) -> dict[str, Any]:
    return {"name": "codex", "model": model, "base_url": f"{url}/v1"}


def aider(url: str, model: str) -> dict[str, Any]:
    return {"name": "aider", "model": f"openai/{model}", "base_url": f"{url}/v1", "args": ["--no-show-model-warnings"]}


CLIS: dict[str, tuple[Callable[[], Path], Callable[[str, str], dict[str, Any]], str, str]] = {
    # the CLI, its launcher table, and what pre-flight says for a refused key and for a missing model
    "codex": (clis.codex, codex, "(auth): codex: unexpected status 401 Unauthorized: Incorrect API key provided",
              "(model): codex: unexpected status 404 Not Found: The model `no-such-model` does not exist"),
    "aider": (clis.aider, aider, "(auth): aider: AuthenticationError: AuthenticationError: OpenAIException - "
                                 "Incorrect API key provided",
              # litellm turns the 404 into a BadRequestError: the kind is "other", the refusal the same
              "(other): aider: BadRequestError: OpenAIException - The model `no-such-model` does not exist or you do "
              "not have access to it."),
}


@pytest.mark.slow
@pytest.mark.parametrize("cli", list(CLIS))
def test_run_refuses_a_bad_key_and_a_missing_model_with_the_cli_own_message(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint], cli: str
) -> None:
    installed, launcher, refused_key, no_model = CLIS[cli]
    installed()
    server = endpoint("openai-refused-key.toml")
    env = agent_env()
    for case, model, expected in (("key", "scripted", refused_key), ("model", "no-such-model", no_model)):
        root = small_lab(tmp_path / case, env, launcher=launcher(server.url, model))
        before = snapshot(root)
        result = orchard("run", root, env=env)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1, result.stdout + result.stderr
        assert lines[0].startswith(f"orchard: error: launcher '{cli}': a test request through `{cli}`, run as its "
                                   "worker runs it, failed "), lines[0]
        assert expected in lines[0] and lines[0].endswith("no hypothesis was touched"), lines[0]
        assert snapshot(root) == before
        assert not (root / "logs" / "shorter-alpha.log").exists()
    asked = [r.asked for r in server.requests() if r.asked is not None]
    assert asked and all("Answer with the one word: ready" in a.prompt for a in asked)  # no worker's prompt
    assert {a.model for a in asked} == {"scripted", "no-such-model"}
