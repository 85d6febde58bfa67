"""The research loop end to end on the embedded demo, and its resume after SIGKILL.

Whole lab runs of several minutes each: the slow tier (`make test-slow`).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import libtmux
import pytest

from orchard.demo.make import make_demo
from orchard.jsonlines import read_jsonl
from orchard.lab.db.state import LabState
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.events import ExperimentStarted
from orchard.lab.records.judgment import JudgmentEntry
from orchard.lab.records.lab_start import LabStart
from orchard.lab.records.land_steps import Merged, Rebased
from orchard.lab.workers.workspace.workspace import Workspace
from tests.agents.demo_lab import broken_tries
from tests.lab.lab_helpers import assert_nothing_left, first_experiments, git, wait_for
from tests.lab.lab_helpers import lab_events as events

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def orchard(*args: str, mark: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    return subprocess.Popen([sys.executable, "-m", "orchard", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


def records(root: Path) -> dict[str, ExperimentRecord]:
    """Each hypothesis's first experiment (a kill revisited after a win has a later one; the merge counts below
    say no revisit landed)."""
    return first_experiments(root)


def decisions(root: Path) -> dict[str, tuple[str, str, list[str]]]:
    return {name: (e.decision, e.judgment and e.judgment.rule, e.reasons) for name, e in records(root).items()}


def test_demo_walks_every_decision_path(tmp_path: Path, mark: str) -> None:
    root = tmp_path / "demo"
    proc = orchard("demo", "--workspace", str(root), "--executor", "tmux", mark=mark)
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output
    found = decisions(root)
    # two wins land: one on time, one on output size (tokens), both merged
    assert found["count-with-dict"][0] == "LAND" and "wall_ms improved" in " ".join(found["count-with-dict"][2])
    assert found["terse-report"][0] == "LAND" and "stdout_bytes improved" in " ".join(found["terse-report"][2])
    # five kills, each for its own reason
    # the broken change never lands: KILLed for its red tests, or ITERATEd ("fix correctness") when noise let its
    # ~2% PASS, and then its children likewise (tests/agents/demo_lab.py)
    tried = broken_tries(records(root))
    assert found["top-ten-default"][:2] == ("KILL", "gates-absolute")
    assert found["tokenize-regex"][:2] == ("KILL", "scope-kept")
    # its bench patch is refused by the sandbox (the bench clone is read-only): the worker fails, nothing is
    # tampered, and its harmless target change is judged on its own (no effect: never a LAND)
    assert found["read-whole-file"][0] != "LAND"
    assert "bench patch did not apply" in (root / "logs" / "read-whole-file.log").read_text()
    # a null effect is never a LAND, whatever the noise of the moment, and its reason says why: no effect shown
    # beyond the noise floor (KILL), or an estimate noise carried beyond it (ITERATE, not landed)
    # (the last of the seven by rank: a child of the broken change may take its place in the demo's top 7)
    if "single-write" in found:
        decision, rule, reasons = found["single-write"]
        assert (decision, rule) in {("KILL", "no-claim-below-floor"), ("ITERATE", None)}, found["single-write"]
        assert ("noise floor" if decision == "KILL" else "promising but unclear, not landed") in reasons[0], reasons
    else:
        assert len(tried) > 1, sorted(found)
    # a worker whose patch builds and passes its tests reports done: none is told to run a step its sandbox
    # cannot (the workspace is hidden from it)
    for name in ("count-with-dict", "terse-report", "top-ten-default", "tokenize-regex", "single-write"):
        if name not in found:
            continue  # single-write, when a child of the broken change took its place
        assert "(status done)" in (root / "logs" / f"{name}.log").read_text(), name
    # the second win was rebased onto the first's merge and judged again before its own merge
    rebased = [e for e in events(root, Rebased) if e.event.needed]
    assert len(rebased) == 1 and len(events(root, Merged)) == 2
    origin_log = git(root / "origin" / "target.git", "log", "--format=%s", "main")
    assert origin_log.count("lab: merge") == 2
    journal = (root / "JOURNAL.md").read_text()
    for text in ("**LAND**", "**KILL**", "left its scope", "quality gate information_recall",
                 "noise floor", "tests failed", "rebase", "flagged implausible", "(held-out)"):
        assert text in journal, text
    report = (root / "FINAL_REPORT.md").read_text()
    assert "## Landed changes" in report and "## Killed hypotheses" in report
    # what it cost: `patch` workers run no model (said so, not left blank), and the time of each kept win
    cost = report.split("## What it cost")[1]
    ran = {e.experiment for e in events(root, ExperimentStarted)}  # an ITERATE's child too, and a revisit
    assert f"| `patch` | {len(ran)} | 2 | $0 (no agent: no model involved) | - |" in cost
    assert re.search(r"\| \$0 \(no agent: no model involved\) \| [\d.,]+ (s|min) \|$", cost, re.MULTILINE), cost
    assert "of wall time per kept win." in cost
    assert "report/wall_ms" in (root / "LEADERBOARD.md").read_text()
    page = (root / "report.html").read_text()
    assert "id='main-report-wall-ms'" in page and "id='experiments-report-wall-ms'" in page
    # the workers start while the verdict calibrates (their agents, builds and tests take no lock), and no
    # verdict's measured run starts before the calibration's last one ended
    assert events(root, ExperimentStarted)[0].at < events(root, LabStart)[0].at
    calibration, verdicts = _measured_ns(root, "calibrate"), _measured_ns(root, "verdict")
    assert calibration and verdicts and max(end for _, end in calibration) < min(start for start, _ in verdicts)
    ws = Workspace.open(root)
    assert_nothing_left(mark, ws.tmux_socket)
    assert not list(Path(tempfile.gettempdir()).glob(f"{ws.tmux_socket}-*")), "executor files left in /tmp"


def _measured_ns(root: Path, kind: str) -> list[tuple[int, int]]:
    """(start, end) of every measured run of a lab's A/A calibration (`calibrate`) or its verdicts (`verdict`)."""
    return [(int(r["monotonic_start_ns"]), int(r["monotonic_end_ns"]))
            for path in (root / "results" / kind).glob("*.jsonl") for r in read_jsonl(path)
            if r.get("step_kind") == "measured"]


HYPOTHESES = ["terse-report", "count-with-dict", "top-ten-default"]


def _status(root: Path) -> list[str]:
    try:
        connection = sqlite3.connect(f"file:{root / 'lab.db'}?mode=ro", uri=True, timeout=5)
        try:
            return [row[0] for row in connection.execute("SELECT status FROM experiments")]
        finally:
            connection.close()
    except sqlite3.Error:
        return []


def _kill_when(root: Path, mark: str, wanted: str) -> None:
    """Start `orchard run`, SIGKILL it the moment an experiment reaches `wanted`."""
    proc = orchard("run", str(root), mark=mark)
    try:
        wait_for(lambda: wanted in _status(root) or proc.poll() is not None, f"status {wanted}", limit_s=600)
        assert proc.poll() is None, f"the lab ended before any experiment was {wanted}: {proc.stdout.read()}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()


def test_resume_after_sigkill_loses_and_doubles_nothing(tmp_path: Path, mark: str) -> None:
    ws = make_demo(tmp_path / "lab", workers=3, executor="tmux", only=HYPOTHESES)
    root = ws.root
    _kill_when(root, mark, "running")  # during the workers
    server = libtmux.Server(socket_name=ws.tmux_socket)
    assert server.is_alive(), "the workers' tmux server must outlive a killed orchard"
    _kill_when(root, mark, "judging")  # during a verdict
    _kill_when(root, mark, "landing")  # between the judgment and the landing
    proc = orchard("run", str(root), mark=mark)
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output

    found = decisions(root)
    assert set(found) == set(HYPOTHESES)
    assert found["terse-report"][0] == "LAND" and found["count-with-dict"][0] == "LAND"
    assert found["top-ten-default"][:2] == ("KILL", "gates-absolute")
    judged = Counter(e.experiment for e in events(root, JudgmentEntry))
    assert all(count == 1 for count in judged.values()), judged  # nothing judged twice
    assert Counter(e.experiment for e in events(root, Merged)) == Counter({"terse-report": 1, "count-with-dict": 1})
    merges = git(root / "origin" / "target.git", "log", "--format=%s", "main").count("lab: merge")
    assert merges == 2  # nothing landed twice
    state = LabState.open(root)
    try:
        assert all(h.attempts >= 1 for h in state.hypotheses())
        assert len(state.experiments()) == len(HYPOTHESES)  # no experiment lost or duplicated
    finally:
        state.close()
    assert_nothing_left(mark, ws.tmux_socket)
    assert not list(Path(tempfile.gettempdir()).glob(f"{ws.tmux_socket}-*")), "executor files left in /tmp"


def test_the_bench_own_verdict_command_is_recorded_and_mapped(tmp_path: Path, mark: str) -> None:
    """A bench with its own verdict script (the seed's devloop.py): its word decides, orchard records it."""
    ws = make_demo(tmp_path / "lab", workers=1, executor="subprocess", only=["terse-report"])
    config = ws.config_path.read_text()
    script = tmp_path / "devloop.py"
    script.write_text(
        "import sys\nprint('comparing', sys.argv[1], sys.argv[2])\nprint('verdict: REGRESSED (p99 up)')\n"
    )
    config = config.replace("[bench]\n", f'[bench]\nverdict = "python3 {script} {{baseline}} {{binary}}"\n', 1)
    ws.config_path.write_text(config)
    proc = orchard("run", str(ws.root), mark=mark)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output
    decision, _, reasons = decisions(ws.root)["terse-report"]
    assert decision == "KILL" and "REGRESSED" in " ".join(reasons)
    state = LabState.open(ws.root)
    try:
        judgment = state.experiment("terse-report").judgment
    finally:
        state.close()
    assert judgment is not None and judgment.verdict is not None
    external = judgment.verdict.external
    assert external is not None and "verdict: REGRESSED" in external.output_tail
    assert str(ws.judge_dir) in external.command  # the binary was passed explicitly  # the binary was passed explicitly
