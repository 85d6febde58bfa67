"""`orchard run` refuses to start when its claude workers could not work at all: a refused key (401), a
model that does not exist (404), an endpoint nothing answers at. Pre-flight sends one real test request
through the CLI, inside the worker's sandbox; the CLI's own message is the reason, and nothing in the lab
is touched. (Before the test request, a key that was set counted as "logged in" and every worker failed
in turn.)"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.agents import clis
from tests.agents.endpoint import ScriptedEndpoint
from tests.agents.labs import CLAUDE, agent_env, orchard, small_lab
from tests.helpers import slow_but
from tests.lab.loop_support import snapshot


@contextmanager
def closed_port() -> Iterator[str]:
    """An address on loopback where nothing listens (bound, never listening: a connect is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


CASES = {
    "refused-key": ("claude-refused-key.toml", "(auth): claude: Invalid API key · Fix external API key"),
    "no-such-model": ("claude-no-such-model.toml", "(model): claude: There's an issue with the selected model "
                                                   "(claude-no-such-model)"),
    # through the egress proxy (network = "api"), which answers 502 "orchard: cannot reach ..."
    "unreachable": (None, "(unreachable): claude: "),
}


@pytest.mark.parametrize("case", slow_but(list(CASES), "refused-key"))
def test_run_refuses_to_start_with_the_cli_own_message(
    tmp_path: Path, endpoint: Callable[[str], ScriptedEndpoint], case: str
) -> None:
    clis.claude()
    script, expected = CASES[case]
    with closed_port() as nowhere:
        server = endpoint(script) if script else None
        env = agent_env(server.url if server else nowhere)
        launcher = {**CLAUDE, "model": "claude-no-such-model"} if case == "no-such-model" else CLAUDE
        root = small_lab(tmp_path, env, launcher=launcher)
        before = snapshot(root)
        result = orchard("run", root, env=env)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stdout + result.stderr
    assert lines[0].startswith("orchard: error: launcher 'claude': a test request through `claude`, run as its "
                               "worker runs it, failed ")
    assert expected in lines[0] and lines[0].endswith("no hypothesis was touched")
    assert snapshot(root) == before
    assert not (root / "logs" / "shorter-alpha.log").exists()
    if server is not None:  # the endpoint got the test request (its own short system prompt), no worker's
        asked = [r.asked for r in server.requests() if r.asked is not None]
        assert asked and all("You check that this connection works." in a.system for a in asked)
