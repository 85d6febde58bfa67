"""The hack review through a real `orchard run` (issue 36, item 3): a win that reads the lab's own variables is
KILLed naming its flag, file and line; a win that checks for a terminal is held for a person, shown by
`orchard status`, the dashboard's experiment page and `orchard review`, and lands when `orchard review --land`
asks; one that writes under /tmp is held and then killed by `--kill`; the honest win beside them lands on its
own. Every step is journaled with who asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

from orchard.lab.db import workspace_lock
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import LabIntegrityError
from orchard.lab.landing.land_checks import recorded_judgment
from orchard.lab.notebook.experiment_page import page_html, read_page
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hack_findings import Settlement, WinHeld, WinSettled
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.judgment import Decision, Judgment, JudgmentEntry, Rule, patch_digest
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import command_launcher, git, lab_config, make_repo, one_worker
from tests.lab.loop_support import FINISHED, RUN_SH_TARGET, STDOUT_SUITE, snapshot

LOOP = 'i=0; while [ $i -lt $n ]; do echo "line $i"; i=$((i+1)); done\n'
PARTS = ("a", "b", "c", "d", "e")
RUN_SH = '#!/bin/sh\nd=$(dirname "$0")\n' + "".join(f'sh "$d/{part}.sh"\n' for part in PARTS)
# hypothesis -> (the script it rewrites, the script's first line): each prints 40 lines where the base prints 400
WORKERS = {
    "sniff-orchard": ("c", 'n=40; [ -n "$ORCHARD_EXPERIMENT" ] && n=400'),  # definite: the lab's own variables
    "sniff-terminal": ("b", "n=40; [ -t 1 ] && n=400"),  # doubtful: a terminal check, held, then landed
    "tmp-cache": ("d", 'n=40; out="/tmp/wf-cache"'),  # doubtful: a file under /tmp, held, then killed
    "sniff-ci": ("e", 'n=40; [ -n "$CI" ] && n=400'),  # doubtful: held, then landed by a lab that runs again
    "honest": ("a", "n=40"),
}


def _orchard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=600, check=False)


def _lab(tmp_path: Path) -> Path:
    target = make_repo(tmp_path / "target", {"run.sh": RUN_SH, **{f"{p}.sh": "n=400\n" + LOOP for p in PARTS}})
    (target / "run.sh").chmod(0o755)
    git(target, "commit", "-qam", "executable")
    launchers = {name: command_launcher(f"printf '%s\\n' '{line}' > {part}.sh; "
                                        f"printf '%s' '{LOOP}' >> {part}.sh; {FINISHED}")
                 for name, (part, line) in WORKERS.items()}
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(lab_config(
        target=RUN_SH_TARGET, workers=one_worker(timeout_minutes=3), launcher=command_launcher("true"),
        stop={"top_attempted": 99, "idle_loops": 99}, launchers=launchers))
    hypotheses = [{"id": name, "metric": "out/stdout_bytes", "change": f"print less in {part}.sh",
                   "scope": [f"{part}.sh"], "launcher": name, "impact": 5 - rank}
                  for rank, (name, (part, _)) in enumerate(WORKERS.items())]
    (tmp_path / "hypotheses.toml").write_text(tomli_w.dumps({"hypothesis": hypotheses}))
    ws = init_workspace(tmp_path / "ws", str(target), None, tmp_path / "orchard.toml")
    added = _orchard("backlog", "add", str(ws.root), "--file", str(tmp_path / "hypotheses.toml"))
    assert added.returncode == 0, added.stderr
    return ws.root


def _experiments(root: Path) -> dict[str, str]:
    state = LabState.open(root)
    try:
        return {e.hypothesis: e.name for e in state.experiments()}
    finally:
        state.close()


def _assert_shown_held(root: Path, names: dict[str, str]) -> None:
    """`orchard status` (JSON and text) and the dashboard's experiment page show each held win's flags."""
    status = json.loads(_orchard("status", str(root), "--json").stdout)
    assert {h["experiment"]: h["findings"] for h in status["held"]} == {
        names["sniff-terminal"]: ["env-sniffing at b.sh:1: n=40; [ -t 1 ] && n=400"],
        names["tmp-cache"]: ['cache-write at d.sh:1: n=40; out="/tmp/wf-cache"'],
        names["sniff-ci"]: ['env-sniffing at e.sh:1: n=40; [ -n "$CI" ] && n=400']}
    shown = _orchard("status", str(root)).stdout
    assert f"held for review: {names['sniff-terminal']}" in shown and "cache-write at d.sh:1" in shown
    ws, state = Workspace.open(root), LabState.open(root)
    try:
        page = read_page(ws, state, names["sniff-terminal"])
        assert page is not None
        html = page_html(ws, page)  # the dashboard's experiment page
    finally:
        state.close()
    assert "Hack review (held for a person" in html and "<code>b.sh:1</code>" in html


def _landed_by_the_running_lab(root: Path, experiment: str) -> None:
    """`--land` while an `orchard run` holds the workspace leaves the landing to that lab; its loop lands it."""
    with workspace_lock.hold(root):  # as a running lab holds it
        asked = _orchard("review", str(root), "--land", experiment, "--by", "carol")
    assert asked.returncode == 0 and "landing, by the lab running on" in asked.stdout, asked.stdout + asked.stderr
    run = _orchard("run", str(root))
    assert run.returncode == 0 and f"{experiment}: landed on" in run.stdout + run.stderr, run.stdout + run.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_definite_hack_is_killed_a_doubtful_one_waits_for_a_person_and_the_honest_win_lands(tmp_path: Path) -> None:
    root = _lab(tmp_path)
    run = _orchard("run", str(root))
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stdout + run.stderr
    names = _experiments(root)
    state = LabState.open(root)
    try:
        records = {hypothesis: state.experiment(name) for hypothesis, name in names.items()}
        assert records["honest"].decision == Decision.LAND and records["honest"].merge_commit
        killed = records["sniff-orchard"]
        assert killed.decision == Decision.KILL and killed.judgment and killed.judgment.rule == Rule.HACK_REVIEW
        assert killed.reasons[0].startswith('hack review: env-sniffing at c.sh:1: n=40; [ -n "$ORCHARD_EXPERIMENT" ]')
        for held in ("sniff-terminal", "tmp-cache", "sniff-ci"):
            assert records[held].status == ExperimentStatus.HELD and not records[held].merge_commit
        assert {e.experiment for e in state.events_of(WinHeld)} == {
            names["sniff-terminal"], names["tmp-cache"], names["sniff-ci"]}
    finally:
        state.close()
    assert "sniff-terminal" not in git(root.parent / "target", "show", "lab/ws/main:b.sh")

    _assert_shown_held(root, names)
    listed = _orchard("review", str(root))
    assert listed.returncode == 0 and "env-sniffing at b.sh:1: n=40; [ -t 1 ] && n=400" in listed.stdout
    refused = _orchard("review", str(root), "--land", names["sniff-orchard"])
    assert refused.returncode == 2 and "is not held for review" in refused.stderr

    landed = _orchard("review", str(root), "--land", names["sniff-terminal"], "--by", "alice")
    assert landed.returncode == 0 and "merged into main" in landed.stdout, landed.stdout + landed.stderr
    assert git(root.parent / "target", "show", "lab/ws/main:b.sh").startswith("n=40; [ -t 1 ] && n=400\n")
    killed_by_hand = _orchard("review", str(root), "--kill", names["tmp-cache"], "--by", "bob")
    assert killed_by_hand.returncode == 0, killed_by_hand.stderr
    _landed_by_the_running_lab(root, names["sniff-ci"])
    assert _orchard("review", str(root)).stdout.strip() == "no win is held for review"

    state = LabState.open(root)
    try:
        settled = {e.experiment: (e.event.settlement, e.event.by) for e in state.events_of(WinSettled)}
        assert settled == {names["sniff-terminal"]: (Settlement.LAND, "alice"),
                           names["tmp-cache"]: (Settlement.KILL, "bob"), names["sniff-ci"]: (Settlement.LAND, "carol")}
        cache = state.experiment(names["tmp-cache"])
        assert cache.decision == Decision.KILL and "killed in review by bob" in cache.reasons[-1]
        assert state.hypothesis("tmp-cache").status == HypothesisStatus.KILLED
        assert state.experiment(names["sniff-terminal"]).status == ExperimentStatus.DONE
    finally:
        state.close()
    assert "out=" not in git(root.parent / "target", "show", "lab/ws/main:d.sh")
    assert git(root.parent / "target", "show", "lab/ws/main:e.sh").startswith('n=40; [ -n "$CI" ] && n=400\n')
    journal = (root / "JOURNAL.md").read_text()
    assert "Settled in review by alice: **land**." in journal and "Settled in review by bob: **kill**." in journal


def test_review_refuses_an_unknown_experiment_and_two_settlements_with_exit_2_and_records_nothing(
        tmp_path: Path) -> None:
    root = _lab(tmp_path)
    before = snapshot(root)
    assert _orchard("review", str(root)).stdout.strip() == "no win is held for review"
    unknown = _orchard("review", str(root), "--land", "nope")
    assert unknown.returncode == 2 and "nope: no such experiment" in unknown.stderr
    both = _orchard("review", str(root), "--land", "a", "--kill", "b")
    assert both.returncode == 2 and "--land and --kill: choose one" in both.stderr
    assert snapshot(root) == before


def test_landing_refuses_a_held_win_until_a_person_landed_it(tmp_path: Path) -> None:
    """lab.db's row set to `landing` by someone else is not enough: the journal must hold the `--land`."""
    state = LabState(tmp_path / "lab.db")
    try:
        judgment = Judgment(Decision.LAND, ("PASS",), patch="p", patch_sha256=patch_digest("p"))
        state.log(JudgmentEntry("h", "t", Decision.LAND, ("PASS",), patch_sha256=judgment.patch_sha256,
                                held=("cache-write at d.sh:1: x",)), "e1")
        with pytest.raises(LabIntegrityError, match="held this win for a person and nobody landed it"):
            recorded_judgment(state, "e1", judgment)
        state.log(WinSettled(Settlement.KILL, "bob"), "e1")
        with pytest.raises(LabIntegrityError):
            recorded_judgment(state, "e1", judgment)
        state.log(WinSettled(Settlement.LAND, "alice"), "e1")
        recorded_judgment(state, "e1", judgment)
    finally:
        state.close()
