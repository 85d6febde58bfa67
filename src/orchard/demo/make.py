"""`orchard demo`: a whole lab on the embedded wordfreq target, no network, no model.

The demo makes two git repositories from the templates (a bare `target.git`
the lab pushes its branches and merges to, and the `bench`), creates a
workspace on them configured for the `patch` launcher, fills the backlog from
`hypotheses.toml`, and runs the loop until every hypothesis was tried.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from orchard.demo import BENCH, BINARY, HYPOTHESES, TARGET, copy_template
from orchard.errors import UsageError
from orchard.lab.config import orchard_toml as config_module
from orchard.lab.config.sections import ExecutorKind
from orchard.lab.db.state import LabState
from orchard.lab.loop import backlog
from orchard.lab.workers.sandbox import sandbox
from orchard.lab.workers.workspace.workspace import Workspace

IGNORES = {"target": "build/\n__pycache__/\n*.pyc\n", "bench": "__pycache__/\n*.pyc\nresults/\n"}
IDENTITY = {"GIT_AUTHOR_NAME": "orchard demo", "GIT_AUTHOR_EMAIL": "demo@orchard.invalid",
            "GIT_COMMITTER_NAME": "orchard demo", "GIT_COMMITTER_EMAIL": "demo@orchard.invalid"}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, **IDENTITY, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})


def _repository(template: Path, directory: Path, kind: str, message: str) -> Path:
    copy_template(template, directory)
    (directory / ".gitignore").write_text(IGNORES[kind])
    _git(directory, "init", "--quiet", "--initial-branch=main")
    _git(directory, "add", "--all")
    _git(directory, "commit", "--quiet", "-m", message)
    return directory


DEMO_UNSANDBOXED = ("the demo runs its workers WITHOUT a sandbox: {why}. Its workers only apply orchard's own "
                    "ready patches; a lab on your own code never falls back like this")


def demo_sandbox() -> tuple[str, str | None]:
    """The demo's `[workers] sandbox`: bubblewrap where it works here, else none, with the line that says so.

    The demo's workers apply orchard's own patches, so it may run anywhere; `orchard run` on a user's lab
    still refuses to start without a working sandbox.
    """
    try:
        sandbox.preflight(sandbox.SandboxMode.BWRAP)
    except UsageError as error:
        return sandbox.SandboxMode.NONE, DEMO_UNSANDBOXED.format(why=str(error).removesuffix(sandbox.HINT).rstrip(": "))
    return sandbox.SandboxMode.BWRAP, None


def default_directory() -> Path:
    return Path.cwd() / f"orchard-demo-{time.strftime('%Y%m%dT%H%M%S')}"


def make_demo(directory: Path, *, workers: int = 3, executor: ExecutorKind = ExecutorKind.AUTO,
              only: Sequence[str] = (), sandbox_mode: str = sandbox.SandboxMode.BWRAP) -> Workspace:
    """Create the demo's repositories and workspace; the backlog holds the demo hypotheses (`only` these ids)."""
    directory = Path(directory).resolve()
    if directory.exists() and any(directory.iterdir()):
        raise UsageError(f"{directory}: exists and is not empty; give --workspace a new directory")
    if workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {workers})")
    origin = directory / "origin"
    origin.mkdir(parents=True)
    work = _repository(TARGET, origin / "target-work", "target", "wordfreq: initial version")
    subprocess.run(["git", "clone", "--quiet", "--bare", str(work), str(origin / "target.git")], check=True,
                   capture_output=True)
    shutil.rmtree(work)
    _repository(BENCH, origin / "bench", "bench", "wordfreq bench: suite, fixtures, harness tests")
    hypotheses = backlog.load_file(HYPOTHESES)
    unknown = sorted(set(only) - {h.id for h in hypotheses})
    if unknown:
        raise UsageError(f"unknown demo hypotheses: {', '.join(unknown)}; known: {', '.join(h.id for h in hypotheses)}")
    if only:
        hypotheses = [h for h in hypotheses if h.id in only]
    explore = 1 if workers > 1 else 0
    # no `[bench] measure`: the judge measures every candidate itself and a worker's own numbers decide
    # nothing; measuring them too would only queue behind the judge's verdicts for the lock
    python = sys.executable
    data = {
        "target": {"repo": str(origin / "target.git"), "build": "make --quiet build", "test": "make --quiet test",
                   "binary": BINARY},
        "bench": {"repo": str(origin / "bench"), "suite": "suite.toml",
                  "test": "python3 -m unittest discover --quiet -s tests",
                  "sweep_every": 2},
        "workers": {"count": workers, "exploit": workers - explore, "explore": explore, "executor": executor,
                    "timeout_minutes": 5.0, "sandbox": str(sandbox_mode)},
        "launcher": {"name": "patch", "executable": python},
        "stop": {"top_attempted": len(hypotheses), "idle_loops": 3},
        "lab": {"author_name": "orchard demo lab", "author_email": "lab@orchard.invalid"},
    }
    config = config_module.from_dict(data, source="orchard demo")
    ws = Workspace.create(directory, config, keep=("origin",))
    state = LabState.open(ws.root)
    try:
        with state.transaction():
            for hypothesis in hypotheses:
                backlog.add(state, hypothesis, source="user")
    finally:
        state.close()
    return ws
