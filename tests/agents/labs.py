"""Small labs whose workers are real agent CLIs talking to the scripted endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.agents import clis
from tests.lab.lab_helpers import ALPHA_TARGET, STDOUT_SUITE, TARGET_FILES, lab_config, make_repo, one_worker

SHORTER_ALPHA = """
[[hypothesis]]
id = "shorter-alpha"
metric = "out/stdout_bytes"
change = "print a shorter alpha"
scope = ["src/alpha.txt"]
"""

# The claude launcher as these labs configure it: the endpoint's address and the CLI's quiet switch reach it.
CLAUDE = {"name": "claude", "pass_env": ["ANTHROPIC_BASE_URL", *clis.CLAUDE_QUIET]}

# None of the tester's own credentials or settings reach orchard.
FOREIGN = ("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "DISABLE_")


def agent_env(url: str, **more: str) -> dict[str, str]:
    """orchard's environment for a lab whose claude workers talk to the endpoint at `url`."""
    ours = {name: value for name, value in os.environ.items() if not name.startswith(FOREIGN)}
    return {**ours, "PATH": f"{clis.NPM_BIN}:{os.environ['PATH']}", "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted", **clis.CLAUDE_QUIET, **more}


def orchard(*args: str | Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def small_lab(directory: Path, env: dict[str, str], *, hypotheses: str = SHORTER_ALPHA,
              launcher: dict[str, Any] | None = None, **sections: dict[str, Any]) -> Path:
    """A one-worker lab on a four-file target whose binary is src/alpha.txt; its backlog holds `hypotheses`."""
    target = make_repo(directory / "target-repo", TARGET_FILES)
    (directory / "suite.toml").write_text(STDOUT_SUITE)
    (directory / "hypotheses.toml").write_text(hypotheses)
    tables: dict[str, Any] = {"workers": one_worker(timeout_minutes=5), "stop": {"top_attempted": 1}, **sections}
    (directory / "orchard.toml").write_text(lab_config(target=ALPHA_TARGET, launcher=launcher or CLAUDE, **tables))
    ws = init_workspace(directory / "ws", str(target), None, directory / "orchard.toml")
    added = orchard("backlog", "add", ws.root, "--file", directory / "hypotheses.toml", env=env)
    assert added.returncode == 0, added.stderr
    return ws.root
