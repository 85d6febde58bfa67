"""Whole labs of real agent CLIs on the demo target (wordfreq), against the scripted model endpoint.

`demo_lab` makes the demo's repositories and workspace (`orchard.demo.make.make_demo`), then gives it the
launchers under test and a backlog of the demo's own hypotheses, each naming the launcher that tries it.
`run_lab` runs `orchard run` as a user would, with only the agents' scripted credentials added to the
environment, and returns each experiment's record.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from orchard.demo import HYPOTHESES
from orchard.demo.make import make_demo
from orchard.lab.config import rendered as config_file
from orchard.lab.config.orchard_toml import from_dict, to_dict
from orchard.lab.db.state import LabState
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.workers.workspace.workspace import Workspace
from tests.agents import clis

PATCHES = HYPOTHESES.parent / "patches"  # inside orchard's package: every sandbox can read it
# None of the tester's own credentials or settings reach orchard.
FOREIGN = ("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "AIDER_", "DISABLE_")
# What the scripted endpoint accepts as a key: any.
KEYS = {"ANTHROPIC_API_KEY": "sk-ant-scripted", "OPENAI_API_KEY": "sk-scripted"}


def demo_lab(directory: Path, launchers: dict[str, dict[str, Any]], backlog: dict[str, str], *,
             workers: int = 2) -> Workspace:
    """The demo lab with `launchers` ([launchers.NAME] tables; "default" is [launcher]) and the demo hypotheses
    named in `backlog` (id -> the launcher that tries it; "" the default), in the demo's own order."""
    ws = make_demo(directory, workers=workers, executor="subprocess", only=tuple(backlog))
    for stale in directory.glob("lab.db*"):  # the demo's backlog, without launchers: replaced below
        stale.unlink()
    data = to_dict(ws.config)
    data["launcher"] = launchers.get("default", data["launcher"])
    data["launchers"] = {name: table for name, table in launchers.items() if name != "default"}
    data["stop"] |= {"top_attempted": len(backlog), "idle_loops": len(backlog) + 1}
    config_file.write(from_dict(data, source="the agents' demo lab"), ws.config_path)
    hypotheses = [dict(table, launcher=backlog[table["id"]]) for table in
                  tomllib.loads(HYPOTHESES.read_text())["hypothesis"] if table["id"] in backlog]
    backlog_file = directory.parent / f"{directory.name}-backlog.toml"
    for table in hypotheses:  # only a `patch` launcher's hypotheses keep their ready patch, beside the file
        patch = table.pop("patch", None)
        if launchers.get(table["launcher"] or "default", data["launcher"])["name"] == "patch" and patch:
            shutil.copyfile(PATCHES / Path(patch).name, directory.parent / Path(patch).name)
            table["patch"] = Path(patch).name
    backlog_file.write_text(tomli_w.dumps({"hypothesis": hypotheses}))
    added = orchard("backlog", "add", directory, "--file", backlog_file, env=agent_env())
    assert added.returncode == 0, added.stdout + added.stderr
    return Workspace.open(directory)


def agent_env(**more: str) -> dict[str, str]:
    """orchard's environment: the tester's, less any agent setting, the installed CLIs first on PATH."""
    ours = {name: value for name, value in os.environ.items() if not name.startswith(FOREIGN)}
    path = f"{clis.NPM_BIN}:{clis.AGENTS / 'bin'}:{os.environ['PATH']}"
    return {**ours, "PATH": path, **KEYS, **more}


def orchard(*args: str | Path, env: dict[str, str], timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def run_lab(ws: Workspace) -> dict[str, ExperimentRecord]:
    """`orchard run` to its end (exit 0 asserted); each experiment's record by hypothesis id."""
    result = orchard("run", ws.root, env=agent_env())
    assert result.returncode == 0, result.stdout + result.stderr
    state = LabState.open(ws.root)
    try:
        return {record.hypothesis: record for record in state.experiments()}
    finally:
        state.close()
