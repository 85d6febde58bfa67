"""One sandbox cannot starve another (issue 31, item 3): two labs started together on one machine, each with a
worker that holds nearly all of `[workers] processes` while the honest worker beside it is built and judged; both
honest wins land. On main the budget was the rlimit of the one sandbox uid every sandbox shares: the honest
judge build failed ("Resource temporarily unavailable") and was KILLed "does not build from clean"."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

from orchard import sandbox_pids
from orchard.lab.records.judgment import Decision
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import (
    assert_nothing_left,
    assert_revisits_killed,
    command_launcher,
    lab_config,
    make_repo,
    one_worker,
    tried_by_hypothesis,
)
from tests.lab.test_anti_gaming import HONEST, SECRET, SUITE, TEST, TOOL, TOOL_TARGET, VISIBLE
from tests.lab.test_gaming_battery import REPORT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
              pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes share one uid only when orchard is root")]

PROCESSES = 40
# holds all but a few of its budget for a minute (what the honest worker and its judge take), then finishes; in a
# file of its own, so that the honest worker (scope tool.sh) starts beside it, not after it (overlapping scopes never
# run together: the honest one waited out the hog's minute, and ran when nothing held any process)
HOG = ("i=0; while [ $i -lt 34 ]; do sleep 600 & i=$((i+1)); done; sleep 60; printf 'held\\n' >> notes.txt")
SCOPES = {"hog": "notes.txt", "honest": "tool.sh"}
WORKERS = {"hog": HOG, "honest": f"echo {base64.b64encode(HONEST.encode()).decode()} | base64 -d > tool.sh"}


def _lab(root: Path) -> Path:
    target = make_repo(root / "target", {"tool.sh": TOOL, "tests/test_tool.py": TEST, "tests/data.txt": "word\n",
                                         "notes.txt": ""})
    bench = make_repo(root / "bench", {"suite.toml": SUITE, "fixtures/visible.txt": VISIBLE,
                                       "fixtures/hidden/secret.txt": SECRET, ".gitignore": "results/\n"})
    (root / "orchard.toml").write_text(lab_config(
        target=TOOL_TARGET, workers=one_worker(count=2, exploit=2, timeout_minutes=5, processes=PROCESSES),
        launcher=command_launcher("true"), stop={"top_attempted": 99, "idle_loops": 99},
        launchers={name: command_launcher(f"{line}; {REPORT}") for name, line in WORKERS.items()}))
    (root / "hypotheses.toml").write_text(tomli_w.dumps({"hypothesis": [
        {"id": name, "metric": "visible/stdout_bytes", "change": name, "launcher": name, "scope": [SCOPES[name]],
         "impact": 5 if name == "hog" else 1} for name in WORKERS]}))
    ws = init_workspace(root / "ws", str(target), str(bench), root / "orchard.toml")
    added = subprocess.run([sys.executable, "-m", "orchard", "backlog", "add", str(ws.root), "--file",
                            str(root / "hypotheses.toml")], capture_output=True, text=True, timeout=120, check=False)
    assert added.returncode == 0, added.stderr
    return ws.root


def test_two_labs_each_with_a_worker_holding_its_processes_both_land_their_honest_wins(
        tmp_path: Path, mark: str) -> None:
    if sandbox_pids.own_directory() is None:
        pytest.skip("no writable pids cgroup hierarchy here: the budget is the uid's rlimit")
    roots = [_lab(tmp_path / name) for name in ("one", "two")]
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    runs = [subprocess.Popen([sys.executable, "-m", "orchard", "run", str(root)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True) for root in roots]
    outputs = [run.communicate(timeout=1000)[0] for run in runs]
    for run, output in zip(runs, outputs, strict=True):
        assert run.returncode == 0 and "Traceback" not in output, output
    for root in roots:
        runs = tried_by_hypothesis(root)  # each one's first experiment; a revisit of the hog is KILLed too
        outcome = {name: (tried.first.decision, " ".join(tried.first.reasons)) for name, tried in runs.items()}
        assert outcome["honest"][0] == Decision.LAND, outcome
        assert outcome["hog"][0] == Decision.KILL, outcome
        assert_revisits_killed(runs, ["hog"])
    assert_nothing_left(mark, None)
