"""One bad worker output ends that experiment, never the lab (issue 9).

Hostile `command` workers run through a real `orchard run`: one deletes its
own checkout, one its checkout's `.git`, one writes a 50 MB file in its
scope, one plants a file where the judge builds its candidate, one makes
its binary a directory (the measured step cannot start), one fills
its disk (a real, small tmpfs under the worker's directory, when this test
may mount one). Each is KILLed with its own reason in lab.db and the
journal, the lab finishes every other experiment, and `orchard run` on the
same workspace again (the resume) does not crash.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.records.events import ExperimentFailed, LabStopped
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.helpers import slow_but
from tests.lab.lab_helpers import (
    ALPHA_TARGET,
    REPORTS,
    STDOUT_SUITE,
    assert_revisits_killed,
    command_launcher,
    first_experiments,
    lab_config,
    one_worker,
    small_tmpfs,
    tried_by_hypothesis,
    wait_for,
)

KILL_AT = "ORCHARD_TEST_KILL_AT"  # orchard SIGKILLs itself there (lab/loop/lab.py)

# (id, the worker's command, its scope); ranked in this order (impact 5 down to 1)
HOSTILE = {
    "wipe-checkout": "rm -rf {target_dir}",
    "wipe-git": "printf 'b\\n' > {target_dir}/src/beta.txt; rm -rf {target_dir}/.git",
    "fifty-megabytes": "head -c 52428800 /dev/zero | tr '\\0' a > {target_dir}/src/gamma.txt",
    "plant-in-judge": "printf 'b\\n' > {target_dir}/src/beta.txt; mkdir -p {workspace}/judge; "
                      "touch {workspace}/judge/{experiment}",
    "binary-not-a-file": "rm {target_dir}/src/alpha.txt; mkdir {target_dir}/src/alpha.txt; "
                         "touch {target_dir}/src/alpha.txt/x",
}


def _hypotheses(hostile: dict[str, str]) -> str:
    tables = []
    for rank, (name, _command) in enumerate([*hostile.items(), ("good", "")]):
        launcher = f'launcher = "{name}"\n' if name != "good" else ""
        tables.append(f'[[hypothesis]]\nid = "{name}"\nmetric = "out/stdout_bytes"\nchange = "{name}"\n'
                      f'scope = ["src/"]\nimpact = {max(1, 5 - rank)}\n{launcher}')
    return "\n".join(tables)


def _config(hostile: dict[str, str], executor: str = "subprocess") -> str:
    """The lab, with each hostile worker's launcher; every one writes a finished worker's report after its act."""
    return lab_config(
        target=ALPHA_TARGET,
        # unconfined on purpose: these workers do what a worker without bubblewrap can (the sandbox stops most
        # of it, tests/lab/test_sandbox.py), and the lab must survive it anyway
        workers=one_worker(executor=executor, timeout_minutes=3, sandbox="none"),
        launcher=command_launcher("printf 'alpha\\n' > {target_dir}/src/alpha.txt" + REPORTS),
        stop={"top_attempted": 9, "idle_loops": 99},
        launchers={name: command_launcher(command + REPORTS) for name, command in hostile.items()},
    )


def _orchard(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=900, check=False)


def _lab(tmp_path: Path, target_repo: Path, hostile: dict[str, str], executor: str = "subprocess") -> Path:
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(_config(hostile, executor))
    (tmp_path / "hypotheses.toml").write_text(_hypotheses(hostile))
    ws = init_workspace(tmp_path / "ws", str(target_repo), None, tmp_path / "orchard.toml")
    added = _orchard("backlog", "add", ws.root, "--file", tmp_path / "hypotheses.toml")
    assert added.returncode == 0, added.stderr
    return ws.root


def _outcomes(root: Path) -> dict[str, tuple[str, str | None, str]]:
    """Per hypothesis: its first experiment's status, decision and reasons (a "no effect" kill in src/ is revisited
    after the good win lands there: `assert_revisits_killed`)."""
    return {name: (e.status, e.decision, "; ".join(e.reasons)) for name, e in first_experiments(root).items()}


def _errors(root: Path) -> dict[str, str]:
    state = LabState.open(root)
    try:
        return {e.event.hypothesis: e.event.reason for e in state.events_of(ExperimentFailed)}
    finally:
        state.close()


def _run_and_resume(root: Path) -> None:
    first = _orchard("run", root)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Traceback" not in first.stderr
    again = _orchard("run", root)  # the resume meets every record the hostile workers left
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Traceback" not in again.stderr


@pytest.mark.slow  # a whole `orchard run` and its resume, real verdicts (the fast tier: the disk-full lab below)
def test_hostile_outputs_kill_their_own_experiment_and_the_lab_finishes_the_rest(
    tmp_path: Path, target_repo: Path
) -> None:
    root = _lab(tmp_path, target_repo, HOSTILE)
    _run_and_resume(root)
    outcomes = _outcomes(root)
    assert set(outcomes) == {*HOSTILE, "good"}, "every experiment ran, the good one after the hostile ones"
    for name in HOSTILE:
        status, decision, _ = outcomes[name]
        assert (status, decision) == ("done", "KILL"), (name, outcomes[name])
    errors = _errors(root)
    assert "could not be collected" in errors["wipe-checkout"]
    # collection reads the worker's files through the judge's own clone: a missing .git changes nothing
    assert "wipe-git" not in errors and "no effect beyond the noise floor" in outcomes["wipe-git"][2]
    assert "could not be judged" in errors["plant-in-judge"] and "FileExistsError" in errors["plant-in-judge"]
    assert "could not be judged: IsADirectoryError" in errors["binary-not-a-file"], "its binary is a directory"
    assert "patch over [target] max_patch_kb" in outcomes["fifty-megabytes"][2]
    assert outcomes["good"][1] == "LAND", outcomes["good"]
    assert_revisits_killed(tried_by_hypothesis(root), HOSTILE)
    assert (root / "lab.db").stat().st_size < 5 * 1024 * 1024, "the 50 MB file is not in lab.db"
    journal = (root / "JOURNAL.md").read_text()
    assert journal.count("· experiment-error ·") == 3
    report = (root / "FINAL_REPORT.md").read_text()
    assert "`wipe-checkout` via `wipe-checkout`: the experiment could not be collected" in report


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs under the judge's directory, where collection copies a worker's change into its own
    clone: a disk a worker's output can really fill."""
    with small_tmpfs(tmp_path / "ws" / "judge", "4m") as mount_point:
        yield mount_point


@pytest.mark.slow
def test_a_worker_that_fills_its_disk_is_killed_and_the_lab_goes_on(
    tmp_path: Path, target_repo: Path, small_disk: Path
) -> None:
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    hostile = {"fill-disk": "head -c 8000000 /dev/urandom > {target_dir}/src/noise.bin"}
    (tmp_path / "orchard.toml").write_text(_config(hostile))
    (tmp_path / "hypotheses.toml").write_text(_hypotheses(hostile))
    # the workspace exists already (the mount point is in it): lay it out around the mount
    ws = init_workspace(tmp_path / "fresh", str(target_repo), None, tmp_path / "orchard.toml")
    for child in ws.root.iterdir():
        if child.name == small_disk.name:  # onto the mount, not into it
            for grandchild in child.iterdir():
                shutil.move(str(grandchild), small_disk / grandchild.name)
        else:
            shutil.move(str(child), tmp_path / "ws" / child.name)
    root = tmp_path / "ws"
    assert _orchard("backlog", "add", root, "--file", tmp_path / "hypotheses.toml").returncode == 0
    _run_and_resume(root)
    outcomes = _outcomes(root)
    assert outcomes["fill-disk"][:2] == ("done", "KILL"), outcomes
    assert "the disk is full" in _errors(root)["fill-disk"], _errors(root)
    assert outcomes["good"][1] == "LAND", outcomes["good"]
    assert_revisits_killed(tried_by_hypothesis(root), hostile)


@pytest.mark.parametrize("when", slow_but(["still-running", "ended"], "still-running"))
@pytest.mark.parametrize("executor", slow_but(["subprocess", "tmux"], "subprocess"))
@pytest.mark.slow
def test_an_orchard_killed_between_launching_a_worker_and_recording_it_never_starts_a_second_one(
    tmp_path: Path, target_repo: Path, executor: str, when: str
) -> None:
    """The worker is still running when orchard resumes (it is adopted), or it ended meanwhile (collected)."""
    if executor == "tmux" and shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    starts, go = tmp_path / "starts.log", tmp_path / "go"
    if when == "ended":
        go.touch()
    hostile = {"slow": f"echo started >> {starts}; while [ ! -e {go} ]; do sleep 0.1; done; "
                       "printf 'alpha\\n' > {target_dir}/src/alpha.txt"}
    root = _lab(tmp_path, target_repo, hostile, executor)
    socket = Workspace.open(root).tmux_socket
    resume: subprocess.Popen[str] | None = None
    try:
        killed = subprocess.run([sys.executable, "-m", "orchard", "run", str(root)], capture_output=True, text=True,
                                timeout=900, check=False, env={**os.environ, KILL_AT: "after-launch"})
        assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
        assert _outcomes(root)["slow"][0] == "starting", "killed after the launch, before RUNNING was recorded"
        resume = subprocess.Popen([sys.executable, "-m", "orchard", "run", str(root)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        if when == "still-running":
            wait_for(lambda: _outcomes(root)["slow"][0] == "running", "the resumed lab to take the worker on")
            go.touch()
        output, _ = resume.communicate(timeout=900)
        assert resume.returncode == 0, output
    finally:
        if resume is not None and resume.poll() is None:
            resume.kill()
            resume.wait()
        go.touch()
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)
    assert starts.read_text().splitlines() == ["started"], "one worker, started once"
    assert _outcomes(root)["slow"][:2] == ("done", "LAND"), _outcomes(root)


@pytest.mark.slow  # a whole `orchard run` and its resume, real verdicts
def test_a_worker_that_breaks_its_worker_directory_re_queues_the_next_launch(
    tmp_path: Path, target_repo: Path
) -> None:
    """The worker's directory made a file: collection fails (KILL), the next launch on that worker fails
    (its hypothesis goes back to the backlog, not retried in this run); a resume after the repair runs it.
    (A checkout left a dangling symlink no longer breaks the next launch: every experiment gets fresh clones.)"""
    root = _lab(tmp_path, target_repo, {"dangling": "rm -rf {workspace}/worker-w1; echo x > {workspace}/worker-w1"})
    first = _orchard("run", root)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stdout + first.stderr
    outcomes, errors = _outcomes(root), _errors(root)
    assert outcomes["dangling"][:2] == ("done", "KILL") and "could not be collected" in errors["dangling"]
    assert outcomes["good"][:2] == ("done", None) and "could not be launched" in errors["good"], (outcomes, errors)
    state = LabState.open(root)
    try:
        assert state.hypothesis("good").status == "open", "re-queued, not killed"
        assert "needs a launcher that failed" in state.events_of(LabStopped)[-1].event.reason
    finally:
        state.close()
    (root / "worker-w1").unlink()  # the repair
    again = _orchard("run", root)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _outcomes(root)["good"][:2] == ("done", "LAND")


@pytest.mark.slow  # a whole `orchard run` with real verdicts
def test_a_worker_that_prints_a_huge_log_costs_orchard_no_memory_for_it(tmp_path: Path, target_repo: Path) -> None:
    """Collection reads the end of a worker's log (where the exit line and an agent's result are), not all of it:
    a worker that prints 300 MB leaves orchard's peak memory where it was."""
    root = _lab(tmp_path, target_repo, {"loud": "head -c 300000000 /dev/zero | tr '\\0' x; echo; "
                                                 "printf 'b\\n' > {target_dir}/src/beta.txt"})
    peak = subprocess.run(
        [sys.executable, "-c", "import resource, subprocess, sys; "
         "done = subprocess.run([sys.executable, '-m', 'orchard', 'run', sys.argv[1]], capture_output=True); "
         "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)", str(root)],
        capture_output=True, text=True, timeout=900, check=True).stdout.split()
    assert peak[0] == "0"
    assert (root / "logs" / "loud.log").stat().st_size > 300_000_000
    assert int(peak[1]) < 300 * 1024, f"peak RSS {int(peak[1]) // 1024} MB"  # KiB: the log alone was 300 MB
    assert _outcomes(root)["loud"][:2] == ("done", "KILL")
    assert_revisits_killed(tried_by_hypothesis(root), ["loud"])
