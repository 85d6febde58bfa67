"""Revisiting a kill (issue 34, item 3): a KILLed hypothesis offered again once when a win makes its kill stale.

On main a hypothesis KILLed early stayed killed whatever landed after it. Here a win that changes a file the
killed hypothesis was about, or moves main's value of its metric by more than the effect it was measured at,
puts it back in the backlog once, journaled and shown as revisited; a kill under a rule about the candidate's
honesty (a tampered harness, gaming) never comes back. The slow test runs a whole lab: an idea that changed
nothing measurable on the first main is KILLed, a win rewrites its file, and the revisited idea lands.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchard.cli import cli
from orchard.lab.db.state import LabState
from orchard.lab.landing.land import LandOutcome
from orchard.lab.loop import landed, revisit
from orchard.lab.notebook.journal import render_journal
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus, Lane
from orchard.lab.records.judgment import Decision, Judgment, JudgmentEntry, Rule
from orchard.lab.records.revisit_events import Revisited
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.helpers import orchard
from tests.lab.lab_helpers import (
    ALPHA_TARGET,
    REPORTS,
    STDOUT_SUITE,
    command_launcher,
    git,
    lab_config,
    make_repo,
    one_worker,
)
from tests.lab.loop_support import bare_candidate, metric, verdict_of

METRIC = "out/stdout_bytes"


def _kill(state: LabState, name: str, hypothesis: str, rule: Rule | None, effect: float = 0.0,
          files: tuple[str, ...] = (), floor: float = 0.01, judged: Decision | None = Decision.KILL) -> None:
    """An experiment of `hypothesis` KILLed: the judge's `judged` decision under `rule` (None: a person stopped it
    before any judgment), its verdict measuring `effect` (`floor`)."""
    verdict = verdict_of([metric(METRIC, "no-change", effect, floor=floor)])
    judgment = None if judged is None else Judgment(judged, ("killed",), rule, verdict=verdict)
    state.add_experiment(name, hypothesis, "w1", Lane.EXPLOIT, 1, "base", "bench", ExperimentStatus.DONE)
    state.update_experiment(name, decision=Decision.KILL, judgment=judgment, reasons=["killed"],
                            candidate=bare_candidate(experiment=name, changed_files=list(files)))
    state.update_hypothesis(hypothesis, status=HypothesisStatus.KILLED, attempt=True)
    if judgment is not None:
        state.log(JudgmentEntry.of(judgment, state.hypothesis(hypothesis).hypothesis, None, "none"), name)


def _win(state: LabState, name: str, files: tuple[str, ...], main_value: float | None = None,
         revisits: bool = True) -> str:
    """A win merged into main that changed `files` (main measured at `main_value` after it), in a lab whose
    `[workers] revisit` is `revisits`: what the loop says."""
    state.add_hypothesis(Hypothesis(id=name, metric=METRIC, change=f"win {name}", scope=files), source="user")
    state.update_hypothesis(name, status=HypothesisStatus.LANDED)
    state.add_experiment(name, name, "w1", Lane.EXPLOIT, 1, "base", "bench", ExperimentStatus.LANDING)
    state.update_experiment(name, candidate=bare_candidate(experiment=name, changed_files=list(files)))
    if main_value is not None:
        state.add_measurement("main", f"after-{name}", {METRIC: main_value}, name)
    outcome = LandOutcome(f"lab/{name}", "c0ffee", True, "merge", False, [], published=True)
    return landed.record(state, state.experiment(name), outcome, revisits=revisits)[1]


def _state(tmp_path: Path, *ids_and_scopes: tuple[str, tuple[str, ...]]) -> LabState:
    state = LabState.open(tmp_path)
    state.add_measurement("main", "base", {METRIC: 100.0})
    for hypothesis_id, scope in ids_and_scopes:
        state.add_hypothesis(Hypothesis(id=hypothesis_id, metric=METRIC, change=f"try {hypothesis_id}", scope=scope),
                             source="user")
    return state


def test_a_kill_is_revisited_once_when_a_win_changes_its_file_never_twice(tmp_path: Path) -> None:
    state = _state(tmp_path, ("idea", ("src/a.c",)), ("elsewhere", ("src/b.c",)))
    try:
        _kill(state, "idea", "idea", Rule.FLOOR)
        _kill(state, "elsewhere", "elsewhere", Rule.FLOOR)
        said = _win(state, "first", ("src/a.c",))
        assert "revisited idea: the win first changed src/a.c, which it was about" in said
        assert state.hypothesis("idea").status == HypothesisStatus.OPEN
        assert state.hypothesis("elsewhere").status == HypothesisStatus.KILLED  # its file did not change
        assert [e.event for e in state.events_of(Revisited)] == [
            Revisited("idea", "idea", "first", "the win first changed src/a.c, which it was about")]
        assert "Revisited idea (KILLed in idea)" in render_journal(state)
        _kill(state, "idea-2", "idea", Rule.FLOOR)  # tried again and KILLed again
        assert "revisited" not in _win(state, "second", ("src/a.c",))
        assert state.hypothesis("idea").status == HypothesisStatus.KILLED
        assert len(state.events_of(Revisited)) == 1
    finally:
        state.close()


# docs/loop.md's table of the hard rules, its column "after a win": the kills about the idea against that main
# (no effect, red tests, rows not comparable, a REGRESSED metric or a patch that no longer applied: no rule) ...
ABOUT_THE_IDEA = [Rule.FLOOR, Rule.TESTS, Rule.COMPARABLE, None]
# ... and those about the candidate, whatever main it met: tampering, straying, a refused change, gaming, a
# binary changed or a tree closed while measured (over a limit while measured is a failed exit_status gate)
ABOUT_THE_CANDIDATE = [Rule.HARNESS, Rule.SCOPE, Rule.TESTS_KEPT, Rule.ADMISSIBLE, Rule.GATES, Rule.PLAUSIBLE,
                       Rule.HACK_REVIEW, Rule.DIFFERENTIAL, Rule.REVIEW, Rule.AS_BUILT, Rule.OPEN_TREE]


@pytest.mark.parametrize(("rule", "revisited"), [*((rule, True) for rule in ABOUT_THE_IDEA),
                                                 *((rule, False) for rule in ABOUT_THE_CANDIDATE)])
def test_a_kill_about_the_idea_is_revisited_and_a_kill_about_the_candidate_is_not(
    tmp_path: Path, rule: Rule | None, revisited: bool
) -> None:
    state = _state(tmp_path, ("idea", ("src/a.c",)))
    try:
        _kill(state, "idea", "idea", rule)
        said = _win(state, "win", ("src/a.c",))
        assert state.hypothesis("idea").status == (HypothesisStatus.OPEN if revisited else HypothesisStatus.KILLED)
        assert ("revisited idea" in said) == revisited, said
    finally:
        state.close()


def test_every_rule_is_said_to_be_about_the_idea_or_about_the_candidate() -> None:
    """A new rule must take a side (and docs/loop.md's table say which)."""
    said = [rule for rule in [*ABOUT_THE_IDEA, *ABOUT_THE_CANDIDATE] if rule is not None]
    assert sorted(said) == sorted(Rule)
    assert set(ABOUT_THE_CANDIDATE) == revisit.ABOUT_THE_CANDIDATE


@pytest.mark.parametrize("judged", [None, Decision.LAND], ids=["stop --kill", "review --kill"])
def test_a_persons_kill_is_never_revisited(tmp_path: Path, judged: Decision | None) -> None:
    """A person's kill: `orchard stop --kill` before any judgment, or `orchard review --kill` of a win the hack
    review held (its judgment a LAND)."""
    state = _state(tmp_path, ("idea", ("src/a.c",)))
    try:
        _kill(state, "idea", "idea", None, judged=judged)
        assert "revisited" not in _win(state, "win", ("src/a.c",))
        assert state.hypothesis("idea").status == HypothesisStatus.KILLED
    finally:
        state.close()


def test_a_kill_is_revisited_when_main_moved_more_than_its_measured_effect_and_floor(tmp_path: Path) -> None:
    state = _state(tmp_path, ("small", ("src/a.c",)), ("large", ("src/b.c",)), ("touched", ("src/c.c",)),
                   ("noisy", ("src/e.c",)), ("broke-tests", ("src/f.c",)))
    try:
        _kill(state, "small", "small", Rule.FLOOR, effect=-0.02)
        _kill(state, "broke-tests", "broke-tests", Rule.TESTS, effect=-0.02)
        _kill(state, "large", "large", Rule.FLOOR, effect=-0.5)
        _kill(state, "touched", "touched", Rule.FLOOR, effect=-0.5, files=("src/d.c",))  # its candidate's file
        _kill(state, "noisy", "noisy", Rule.FLOOR, effect=-0.02, floor=0.15)
        said = _win(state, "win", ("src/d.c",), main_value=90.0)  # main -10%: beyond small's -2%, not large's -50%
        assert "revisited small: main moved -10.0% on out/stdout_bytes since it was killed, more than the -2.0% " \
            "it was measured at and its 1.0% floor" in said
        assert "revisited touched: the win win changed src/d.c" in said
        assert state.hypothesis("large").status == HypothesisStatus.KILLED
        assert state.hypothesis("noisy").status == HypothesisStatus.KILLED  # -10% is within its 15% floor
        # a faster main does not mend a change that broke the tests: only a win on its files revisits it
        assert state.hypothesis("broke-tests").status == HypothesisStatus.KILLED
    finally:
        state.close()


def test_status_the_report_and_the_dashboard_mark_a_revisited_hypothesis(tmp_path: Path) -> None:
    target = make_repo(tmp_path / "myproject", {"src/alpha.txt": "alpha 1\n"})
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(lab_config(target=ALPHA_TARGET, workers=one_worker(sandbox="none")))
    ws = init_workspace(tmp_path / "ws", str(target), None, tmp_path / "orchard.toml")
    state = _state(ws.root, ("idea", ("src/alpha.txt",)))
    try:
        _kill(state, "idea", "idea", Rule.FLOOR)
        _win(state, "win", ("src/alpha.txt",))
    finally:
        state.close()
    status = CliRunner().invoke(cli, ["status", str(ws.root), "--json"])
    assert status.exit_code == 0, status.output
    assert [(b["id"], b["revisited"]) for b in json.loads(status.output)["backlog"]] == [("idea", True)]
    assert "idea (0.5, revisited)" in CliRunner().invoke(cli, ["status", str(ws.root)]).output
    assert CliRunner().invoke(cli, ["report", str(ws.root)]).exit_code == 0
    assert "- `idea` (score 0.50, exploit, revisited)" in (ws.root / "FINAL_REPORT.md").read_text()
    assert "exploit, revisited" in (ws.root / "report.html").read_text()  # the dashboard's backlog section


def test_a_lab_with_revisit_off_keeps_its_kills_killed_and_a_wrong_value_is_one_message(tmp_path: Path) -> None:
    """`[workers] revisit = false`: a win on a killed idea's file offers nothing again; `"no"` is refused."""
    target = make_repo(tmp_path / "myproject", {"src/alpha.txt": "alpha 1\n"})
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(lab_config(target=ALPHA_TARGET, workers=one_worker(revisit="no")))
    refused = CliRunner().invoke(cli, ["init", str(tmp_path / "ws"), "--target", str(target),
                                       "--config", str(tmp_path / "orchard.toml")])
    assert refused.exit_code == 2, refused.output
    assert refused.output.count("workers.revisit: expected true or false, got 'no'") == 1
    (tmp_path / "orchard.toml").write_text(
        lab_config(target=ALPHA_TARGET, workers=one_worker(sandbox="none", revisit=False)))
    ws = init_workspace(tmp_path / "ws", str(target), None, tmp_path / "orchard.toml")
    state = _state(ws.root, ("idea", ("src/alpha.txt",)))
    try:
        _kill(state, "idea", "idea", Rule.FLOOR)
        assert "revisited" not in _win(state, "win", ("src/alpha.txt",), revisits=ws.config.workers.revisit)
        assert state.hypothesis("idea").status == HypothesisStatus.KILLED
        assert state.events_of(Revisited) == []
    finally:
        state.close()


def _orchard(*args: str | Path) -> str:
    done = orchard(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr  # the loop's lines go to stderr beside its progress bar


def _shorten_then_rewrite(tmp_path: Path, revisit: bool) -> tuple[Path, str, list[tuple[str, Decision | None]],
                                                                   list[Revisited]]:
    """A lab (`[workers] revisit = revisit`) where `shorten` turns `xx` into `x` and `1` into `2`: on the first
    main (no `xx`) that changes no byte of the output, a NO-CHANGE KILL; after `rewrite` landed `alpha xx`, the
    same change is a win. (the workspace, what the loop said, each experiment's decision, the revisits)"""
    target = make_repo(tmp_path / "myproject", {"src/alpha.txt": "alpha 1 with padding\n", "README": "a target\n"})
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(lab_config(
        target=ALPHA_TARGET, workers=one_worker(timeout_minutes=5, sandbox="none", revisit=revisit),
        launcher=command_launcher("sed -i 's/xx/x/; s/1/2/' {target_dir}/src/alpha.txt" + REPORTS),
        launchers={"rewrite": command_launcher("printf 'alpha xx\\n' > {target_dir}/src/alpha.txt" + REPORTS)},
        stop={"top_attempted": 9, "idle_loops": 99}))
    ws = init_workspace(tmp_path / "ws", str(target), None, tmp_path / "orchard.toml")
    (tmp_path / "hypotheses.toml").write_text(
        f'[[hypothesis]]\nid = "shorten"\nmetric = "{METRIC}"\nchange = "drop one x"\nscope = ["src/alpha.txt"]\n'
        'impact = 5\n\n'
        f'[[hypothesis]]\nid = "rewrite"\nmetric = "{METRIC}"\nchange = "a shorter line"\nscope = ["src/alpha.txt"]\n'
        'impact = 1\nlauncher = "rewrite"\n')
    _orchard("backlog", "add", ws.root, "--file", tmp_path / "hypotheses.toml")
    said = _orchard("run", ws.root)
    state = LabState.open_readonly(ws.root)
    try:
        return ws.root, said, [(e.name, e.decision) for e in state.experiments()], \
            [e.event for e in state.events_of(Revisited)]
    finally:
        state.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_killed_hypothesis_is_revisited_after_a_win_changed_its_file_and_lands(tmp_path: Path) -> None:
    root, said, decided, revisits = _shorten_then_rewrite(tmp_path, revisit=True)
    assert decided == [("shorten", Decision.KILL), ("rewrite", Decision.LAND), ("shorten-2", Decision.LAND)], said
    assert [(r.hypothesis, r.killed_by, r.win) for r in revisits] == [("shorten", "shorten", "rewrite")]
    assert "revisited shorten: the win rewrite changed src/alpha.txt" in said
    assert git(tmp_path / "myproject", "show", "lab/ws/main:src/alpha.txt") == "alpha x\n"
    listed = CliRunner().invoke(cli, ["backlog", "list", str(root), "--all"]).output
    assert "revisited" in next(line for line in listed.splitlines() if "shorten" in line)
    assert "Revisited shorten (KILLed in shorten)" in (root / "JOURNAL.md").read_text()
    assert "revisited" in (root / "backlog.md").read_text()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_with_revisit_off_the_same_lab_leaves_the_kill_killed(tmp_path: Path) -> None:
    root, said, decided, revisits = _shorten_then_rewrite(tmp_path, revisit=False)
    assert decided == [("shorten", Decision.KILL), ("rewrite", Decision.LAND)], said
    assert revisits == [] and "revisited" not in said
    assert git(tmp_path / "myproject", "show", "lab/ws/main:src/alpha.txt") == "alpha xx\n"
    listed = CliRunner().invoke(cli, ["backlog", "list", str(root), "--all"]).output
    assert "killed" in next(line for line in listed.splitlines() if "shorten" in line), listed
