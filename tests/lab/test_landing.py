"""Landing into a user's own (non-bare) repository, as recorded steps that survive SIGKILL anywhere.

The target is a working copy with `main` checked out, as `orchard init
--target ~/src/myproject` makes it. The lab publishes `lab/<lab>/<experiment>`
branches and `lab/<lab>/main` there (`lab/ws/...` here), never the user's
checked-out branch, and a lab killed at any landing step resumes at the
first step not recorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchard.errors import UsageError
from orchard.lab.db.state import LabState
from orchard.lab.judge.ladder import judge
from orchard.lab.landing import land as landing
from orchard.lab.landing import publication
from orchard.lab.loop import backlog
from orchard.lab.loop.lab import Lab
from orchard.lab.loop.start import start
from orchard.lab.notebook import files as records
from orchard.lab.notebook import view
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.events import LabStopped
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judgment import Decision, JudgmentEntry
from orchard.lab.records.land_steps import LandStep, MainPublished
from orchard.lab.records.measured_events import FinalVerdictTaken
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.helpers import slow_but
from tests.lab.lab_helpers import git, lab_config
from tests.lab.loop_support import OLD, RUN_SH_TARGET, STDOUT_SUITE, WIN, bare_candidate

# The "sneaky" win prints 4,000 lines when it runs from a baseline build directory
# (judge/base-*), so main measured after its merge regresses.
SNEAKY = 'n=40; case "$0" in */base-*) n=4000;; esac\ni=0; while [ $i -lt $n ]; do echo "line $i"; i=$((i+1)); done\n'

CONFIG = lab_config(target=RUN_SH_TARGET)

NORMAL_STEPS = list(LandStep)[:-2]  # land, rebase, confirm, push, merge, publish, main-check
REVERT_STEPS = list(LandStep)[-2:]  # revert, publish-revert


def _patch(new: str) -> str:
    old_lines, new_lines = OLD.splitlines(), new.splitlines()
    body = "".join(f"-{line}\n" for line in old_lines) + "".join(f"+{line}\n" for line in new_lines)
    return f"--- a/run.sh\n+++ b/run.sh\n@@ -1,{len(old_lines) + 1} +1,{len(new_lines) + 1} @@\n #!/bin/sh\n{body}"


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    return make_user_repo(tmp_path)


def make_user_repo(tmp_path: Path) -> Path:
    """The user's own project: a working copy with `main` checked out, run.sh printing 400 lines."""
    repo = tmp_path / "myproject"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "run.sh").write_text("#!/bin/sh\n" + OLD)
    (repo / "run.sh").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    return repo


def _lab(tmp_path: Path, user_repo: Path, win: str = WIN) -> tuple[Workspace, LabState]:
    ws, state, candidate = candidate_in_a_lab(tmp_path, user_repo, win)
    base = candidate.target_base
    judgment = judge(ws, state, "shorter", candidate, base, ws.bench_base())
    assert judgment.decision == Decision.LAND, judgment.reasons
    state.update_experiment("shorter", status="landing", judgment=judgment, decision="LAND",
                            reasons=judgment.reasons)
    state.log(JudgmentEntry("shorter", "shorter", judgment.decision, judgment.reasons,
                            patch_sha256=judgment.patch_sha256), "shorter")
    return ws, state


def candidate_in_a_lab(tmp_path: Path, user_repo: Path, win: str) -> tuple[Workspace, LabState, Candidate]:
    """A lab on the user's project with experiment `shorter` collected from a worker that made run.sh `win`."""
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(CONFIG)
    ws = init_workspace(tmp_path / "ws", str(user_repo), None, tmp_path / "orchard.toml")
    state = LabState.open(ws.root)
    publication.check_publication(ws, state)
    base = ws.target_base()
    backlog.add(state, Hypothesis(id="shorter", metric="out/stdout_bytes", change="print less",
                                  scope=("run.sh",)), source="user")
    state.add_experiment("shorter", "shorter", "w1", "exploit", 1, base, ws.bench_base(), "judging")
    candidate = bare_candidate(scope=["run.sh"], patch=_patch(win), target_base=base)
    state.update_experiment("shorter", candidate=candidate)
    return ws, state, candidate


def _land(ws: Workspace, state: LabState) -> landing.LandOutcome:
    record = state.experiment("shorter")
    assert record.judgment is not None
    return landing.land(ws, state, record, record.judgment, state.hypothesis("shorter").hypothesis)


KILLER = """
import os, signal, sys
from pathlib import Path
from orchard.lab.landing import land as landing
from orchard.lab.landing import publication
from orchard.lab.db.state import LabState
from orchard.lab.workers.workspace.workspace import Workspace

step = sys.argv[2]
original = LabState.log
def log(self, event, experiment=None):
    if event.kind == step:  # the step's action is done; SIGKILL before it is recorded
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, event, experiment)
LabState.log = log
ws = Workspace.open(Path(sys.argv[1]))
state = LabState.open(ws.root)
record = state.experiment("shorter")
landing.land(ws, state, record, record.judgment, state.hypothesis("shorter").hypothesis)
"""


def _kill_at(ws: Workspace, step: str) -> None:
    result = subprocess.run([sys.executable, "-c", KILLER, str(ws.root), step], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ), check=False)
    assert result.returncode == -signal.SIGKILL, f"never reached {step}: {result.stderr[-2000:]}"


def _step_counts(state: LabState) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in state.events():
        if event.kind in landing.STEP_KINDS:
            counts[event.kind] = counts.get(event.kind, 0) + 1
    return counts


def _assert_reachable(user_repo: Path, outcome: landing.LandOutcome) -> None:
    assert outcome.merged and outcome.published
    assert outcome.merge_commit is not None
    # the user's checked-out main is untouched; the win is one `git merge lab/ws/main` away
    assert git(user_repo, "rev-parse", "main") == git(user_repo, "rev-parse", "HEAD")
    assert git(user_repo, "log", "--format=%s", "main").strip() == "initial"
    assert git(user_repo, "rev-parse", "lab/ws/main").strip() == outcome.merge_commit
    assert git(user_repo, "rev-parse", "--verify", "lab/ws/shorter").strip() == outcome.commit
    assert git(user_repo, "status", "--porcelain") == ""


@pytest.mark.slow
def test_a_win_reaches_a_non_bare_repository_as_lab_main(tmp_path: Path, user_repo: Path) -> None:
    ws, state = _lab(tmp_path, user_repo)
    outcome = _land(ws, state)
    _assert_reachable(user_repo, outcome)
    assert _step_counts(state) == dict.fromkeys(NORMAL_STEPS, 1)
    state.log(LabStopped("test"))
    report = records.render_final_report(view.build(ws, state, live=False))
    assert f"merged as `{outcome.merge_commit[:10]}`, on `lab/ws/main` in the target" in report
    assert f"git -C {user_repo} merge lab/ws/main" in report
    # the printed command really brings the win in
    git(user_repo, "merge", "-q", "lab/ws/main")
    assert (user_repo / "run.sh").read_text().count("\n") == 1 + len(WIN.splitlines())
    state.close()


@pytest.mark.parametrize("step", slow_but(NORMAL_STEPS, "merge"))  # each a real judge and landing
def test_a_kill_at_each_landing_step_resumes_at_the_first_step_not_done(
    tmp_path: Path, user_repo: Path, step: str
) -> None:
    ws, state = _lab(tmp_path, user_repo)
    _kill_at(ws, step)
    outcome = _land(ws, state)
    _assert_reachable(user_repo, outcome)
    assert _step_counts(state) == dict.fromkeys(NORMAL_STEPS, 1)  # each step once: nothing doubled or skipped
    lab_main = git(ws.reference_target, "log", "--merges", "--format=%H", "main").split()
    assert lab_main == [outcome.merge_commit]  # merged once
    state.close()


@pytest.mark.parametrize("step", slow_but(["main-check", *REVERT_STEPS]))  # fast tier: the merge kill above
def test_a_kill_while_reverting_resumes_and_publishes_the_revert(
    tmp_path: Path, user_repo: Path, step: str
) -> None:
    ws, state = _lab(tmp_path, user_repo, win=SNEAKY)
    _kill_at(ws, step)
    outcome = _land(ws, state)
    assert outcome.merged and outcome.reverted
    assert _step_counts(state) == dict.fromkeys(NORMAL_STEPS + REVERT_STEPS, 1)
    reverts = git(ws.reference_target, "log", "--format=%s", "main").splitlines()
    assert sum(line.startswith("lab: revert") for line in reverts) == 1
    # the user's repository has the revert too: lab/ws/main holds the original code
    assert git(user_repo, "show", "lab/ws/main:run.sh") == "#!/bin/sh\n" + OLD
    state.close()


def test_a_target_that_refuses_is_named_at_the_start_with_the_fix(tmp_path: Path, user_repo: Path) -> None:
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(CONFIG)
    ws = init_workspace(tmp_path / "ws", str(user_repo), None, tmp_path / "orchard.toml")
    state = LabState.open(ws.root)
    git(user_repo, "checkout", "-q", "-b", "lab/ws/main")  # the branch the lab publishes to is checked out
    with pytest.raises(UsageError) as caught:
        publication.check_publication(ws, state)
    assert "lab/ws/main is checked out" in str(caught.value) and f"git -C {user_repo} switch main" in str(caught.value)
    git(user_repo, "checkout", "-q", "main")
    hook = user_repo / ".git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'error: policy forbids pushes here' >&2\necho 'second line' >&2\nexit 1\n")
    hook.chmod(0o755)
    git(user_repo, "branch", "-q", "-D", "lab/ws/main")
    with pytest.raises(UsageError) as caught:
        publication.check_publication(ws, state)
    message = str(caught.value)
    assert str(user_repo) in message and "bare clone" in message
    assert "error: policy forbids pushes here" in message
    assert "\n" not in message and "second line" not in message and "remote:" not in message
    state.close()


@pytest.mark.slow
def test_a_publication_refused_after_the_start_is_never_reported_merged(tmp_path: Path, user_repo: Path) -> None:
    ws, state = _lab(tmp_path, user_repo)
    hook = user_repo / ".git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'policy: the lab may not publish today' >&2\necho 'second line' >&2\nexit 1\n")
    hook.chmod(0o755)
    outcome = _land(ws, state)
    assert outcome.merged and not outcome.published
    note = next(n for n in outcome.notes if "NOT reachable" in n)
    assert "\n" not in note and len(note) < 400
    state.update_experiment("shorter", status="done", decision="LAND", branch=outcome.branch,
                            merge_commit=outcome.merge_commit, reasons=outcome.notes)
    state.log(LabStopped("test"))
    report = records.render_final_report(view.build(ws, state, live=False))
    assert "merged as" not in report and "NOT reachable in the target" in report
    publish = state.events_of(MainPublished)[0].event
    assert publish.reachable is False and publish.error and "\n" not in publish.error
    assert json.loads(state.meta("publication") or "{}")["ref"] == "lab/ws/main"
    state.close()


@pytest.mark.slow
def test_the_final_numbers_are_one_paired_verdict_of_main_at_the_end_against_the_start(
    tmp_path: Path, user_repo: Path
) -> None:
    ws, state = _lab(tmp_path, user_repo)
    lab = Lab(ws, state, say=lambda _: None)
    start(ws, state, say=lambda _: None)
    outcome = _land(ws, state)
    assert outcome.merged
    lab.finish("the test stops it")
    final = state.events_of(FinalVerdictTaken)
    assert len(final) == 1 and final[0].event.moved is True
    assert final[0].event.end == outcome.merge_commit == ws.target_base()
    verdict = final[0].event.verdict
    assert verdict is not None and verdict.verdict == "PASS"
    (metric,) = verdict.metrics
    assert metric.effect is not None
    effect = f"{metric.effect:+.2%}"
    report = (ws.root / "FINAL_REPORT.md").read_text()
    assert "## Main at the end against main at the start" in report and "**PASS**" in report
    assert "baseline to final" not in report
    board = (ws.root / "LEADERBOARD.md").read_text()
    row = next(line for line in board.splitlines() if line.startswith("| out/stdout_bytes"))
    assert "`shorter`" in row and row.count(effect) >= 1  # main vs start: the paired effect, with its interval
    assert f"{metric.floor:.2%}" in row
    # a finished lab run again: no second stop entry, no second final verdict
    lab.finish("the test stops it")
    assert len(state.events_of(LabStopped)) == 1 and len(state.events_of(FinalVerdictTaken)) == 1
    state.close()
