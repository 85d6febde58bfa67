"""`orchard bench run` measures its subjects confined, as a verdict does (issue 20): no state from run to run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchard.bench.campaigns.suite_run import run_suite
from orchard.bench.suites.suite_reader import load_suite
from orchard.jsonlines import read_jsonl

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# succeeds on its first run only: a later run that finds its counter in $HOME has carried state
COUNTER = '#!/bin/sh\nn=$(cat "$HOME/.runs" 2>/dev/null || echo 0); echo $((n + 1)) > "$HOME/.runs"\nexit "$n"\n'


def test_bench_run_keeps_no_state_from_one_run_to_the_next(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    (tmp_path / "suite.toml").write_text('[suite]\nname = "state"\n\n[[scenario]]\nname = "run"\n'
                                         'command = ["{bin}"]\n\n[[metric]]\nname = "wall_ms"\n')
    subject = tmp_path / "counter.sh"
    subject.write_text(COUNTER)
    subject.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir(mode=0o777)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))  # where an unconfined run's counter would land
        writer = run_suite(load_suite(tmp_path / "suite.toml"), {"s": subject}, runs=3, seed=1,
                           results=tmp_path / "results", progress=lambda _done, _all: None)
    rows = list(read_jsonl(writer.path))
    assert [row["returncode"] for row in rows] == [0, 0, 0], rows
    assert all("+bwrap" in row["env_isolation_version"] for row in rows), rows[0]
