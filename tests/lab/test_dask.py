"""Workers on a dask.distributed cluster: a real LocalCluster, real `dask scheduler` / `dask worker`
CLI processes on loopback, the lab's repositories served by a real `git daemon`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import psutil
import pytest

from orchard.demo.make import make_demo
from orchard.lab.config import orchard_toml as config_module
from orchard.lab.config import rendered as config_file
from orchard.lab.db.state import LabState
from orchard.lab.judge.candidate import from_remote
from orchard.lab.records.candidate import Flag
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judgment import Decision, Rule
from orchard.lab.records.worker import WorkerCheckout
from orchard.lab.workers.launchers import make_launcher
from orchard.lab.workers.remote import (
    RemoteExperiment,
    RemoteOutcome,
    lab_id,
    remove_scratch,
    run_experiment,
    scratch_dir,
)
from orchard.lab.workers.serving import RepositoryServer, ServedRepositories
from orchard.lab.workers.workspace import Workspace
from tests.lab.lab_helpers import assert_nothing_left, git, stop_process_groups, wait_for
from tests.lab.lab_helpers import lab_events as events
from tests.lab.loop_support import FINISHED

DASK = Path(sys.executable).with_name("dask")


def orchard(*args: str, mark: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    return subprocess.Popen([sys.executable, "-m", "orchard", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = 900) -> str:
    output, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, output
    return output


def decisions(root: Path) -> dict[str, tuple[str | None, str | None, tuple[str, ...]]]:
    """Each hypothesis's decision, the rule behind it, and the files its candidate changed."""
    state = LabState.open(root)
    try:
        return {e.hypothesis: (e.decision, e.judgment.rule if e.judgment else None,
                               tuple(e.candidate.changed_files) if e.candidate else ())
                for e in state.experiments()}
    finally:
        state.close()


def assert_same_decisions(local: dict[str, tuple[str | None, str | None, tuple[str, ...]]],
                          remote: dict[str, tuple[str | None, str | None, tuple[str, ...]]]) -> None:
    """Both executors hand the judge the same candidates, so the same decisions follow, except where
    the noise decides: a no-effect change whose estimate lands near its floor is KILLed below the floor
    in one run and ITERATEd in another (the verdict's own noise, not the executor's); it never lands."""
    assert local.keys() == remote.keys()
    for hypothesis, mine in local.items():
        theirs = remote[hypothesis]
        assert mine[2] == theirs[2], f"{hypothesis}: the candidates changed different files"
        by_noise = {mine[0], theirs[0]} <= {Decision.KILL, Decision.ITERATE} and Rule.FLOOR in {mine[1], theirs[1]}
        if by_noise:
            assert Decision.LAND not in (mine[0], theirs[0])
        else:
            assert mine[:2] == theirs[:2], hypothesis


def use_cluster(ws: Workspace, **workers: object) -> None:
    """Point a demo workspace's orchard.toml at a cluster (and any other [workers] keys)."""
    config_file.write(ws.config.replace("workers", executor="dask", **workers), ws.config_path)


def assert_no_scratch(root: Path) -> None:
    assert not scratch_dir(lab_id(root)).exists(), "the lab's scratch copy was left on the dask worker's host"


@pytest.mark.slow
@pytest.mark.timeout(1200)  # measurements on a shared machine; the lab's own waits are bounded
def test_the_demo_on_a_local_cluster_decides_as_the_local_executor(tmp_path: Path, mark: str) -> None:
    finish(orchard("demo", "--workspace", str(tmp_path / "local"), "--executor", "subprocess", mark=mark))
    output = finish(orchard("demo", "--workspace", str(tmp_path / "dask"), "--executor", "dask", mark=mark))
    local, remote = decisions(tmp_path / "local"), decisions(tmp_path / "dask")
    assert_same_decisions(local, remote)
    assert sorted(d for d, _, _ in remote.values() if d != Decision.ITERATE) in (
        ["KILL"] * 5 + ["LAND"] * 2, ["KILL"] * 4 + ["LAND"] * 2)
    hosts = events(tmp_path / "dask", "experiment-host")
    assert {e.experiment for e in hosts} == set(remote)  # where each ran is journaled
    assert {e.data["host"] for e in hosts} == {socket.gethostname()}
    assert "worker ended on" in output and "Runs on host" in (tmp_path / "dask" / "JOURNAL.md").read_text()
    assert git(tmp_path / "dask" / "origin" / "target.git", "log", "--format=%s", "main").count("lab: merge") == 2
    assert_nothing_left(mark, None)
    assert_no_scratch(tmp_path / "dask")


def _listening_pid(address: str, mark: str) -> int:
    """The pid of this test's process listening on a dask worker's address."""
    port = int(address.rsplit(":", 1)[1])
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("ORCHARD_TEST_MARK") != mark:
                continue
            if any(c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in proc.net_connections()):
                return proc.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    raise AssertionError(f"no process of this test listens on {address}")


@pytest.mark.slow
@pytest.mark.timeout(1200)  # measurements on a shared machine; the lab's own waits are bounded
def test_a_dask_worker_killed_mid_experiment_requeues_it_and_nothing_is_lost_or_doubled(
        tmp_path: Path, mark: str) -> None:
    hypotheses = ["terse-report", "top-ten-default"]
    ws = make_demo(tmp_path / "lab", workers=2, only=hypotheses)
    slow_python = tmp_path / "slow-python"  # the patch worker, after 20 s: long enough to be caught running
    slow_python.write_text(f"#!/bin/sh\nsleep 20\nexec {sys.executable} \"$@\"\n")
    slow_python.chmod(0o755)
    use_cluster(ws, dask_workers=2)
    config_file.write(config_module.load(ws.config_path).replace("launcher", executable=str(slow_python)),
                        ws.config_path)
    proc = orchard("run", str(ws.root), mark=mark)
    try:
        wait_for(lambda: len(events(ws.root, "experiment-host")) == 2 or proc.poll() is not None,
                 "both experiments placed", limit_s=300)
        assert proc.poll() is None, proc.communicate()[0]
        victim = events(ws.root, "experiment-host")[0]
        os.kill(_listening_pid(victim.data["address"], mark), signal.SIGKILL)
        output = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    requeued = [e for e in events(ws.root, "experiment-host") if e.data["requeued_from"]]
    assert [(e.experiment, e.data["requeued_from"]) for e in requeued] == [
        (victim.experiment, victim.data["address"])], output
    assert "was lost; re-queued" in output
    found = {h: decision[:2] for h, decision in decisions(ws.root).items()}
    assert found == {"terse-report": ("LAND", None), "top-ten-default": ("KILL", "gates-absolute")}
    assert Counter(e.experiment for e in events(ws.root, "judgment")) == Counter(hypotheses)  # none twice
    state = LabState.open(ws.root)
    try:
        assert len(state.experiments()) == 2 and all(h.attempts == 1 for h in state.hypotheses())
    finally:
        state.close()
    assert_nothing_left(mark, None)
    assert_no_scratch(ws.root)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(1200)  # measurements on a shared machine; the lab's own waits are bounded
def test_a_cli_dask_worker_runs_experiments_from_the_served_repositories(tmp_path: Path, mark: str) -> None:
    port = _free_port()
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    started = []
    try:
        scheduler = subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                      "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        started.append(scheduler)
        worker = subprocess.Popen([str(DASK), "worker", f"tcp://127.0.0.1:{port}", "--host", "127.0.0.1",
                                   "--nthreads", "2", "--resources", "agent=2 cpu=2", "--no-dashboard"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        started.append(worker)
        hypotheses = ["terse-report", "tokenize-regex"]
        ws = make_demo(tmp_path / "lab", workers=2, only=hypotheses)
        use_cluster(ws, scheduler=f"tcp://127.0.0.1:{port}", serve="git-daemon")
        output = finish(orchard("run", str(ws.root), mark=mark))
        found = {h: decision[:2] for h, decision in decisions(ws.root).items()}
        assert found == {"terse-report": ("LAND", None), "tokenize-regex": ("KILL", "scope-kept")}
        placed = events(ws.root, "experiment-host")
        assert {e.experiment for e in placed} == set(hypotheses)
        # every experiment ran in the CLI worker's process (or the process it forked for the task)
        worker_pids = {worker.pid, *(p.pid for p in psutil.Process(worker.pid).children(recursive=True))}
        assert {_listening_pid(e.data["address"], mark) for e in placed} <= worker_pids, output
        # the worker cloned from the lab's git daemon, never from the origin's path
        log = (ws.root / "logs" / "terse-report.log").read_text()
        assert "ran on dask worker" in log
        assert scheduler.poll() is None and worker.poll() is None  # the user's cluster is left running
        assert_no_scratch(ws.root)
    finally:
        stop_process_groups(started)
    assert_nothing_left(mark, None)


def test_the_git_daemon_serves_the_two_repositories_read_only_and_nothing_else(tmp_path: Path) -> None:
    ws = make_demo(tmp_path / "lab", workers=1, only=["terse-report"])
    (ws.root / "worker-w9").mkdir()
    git(ws.root / "worker-w9", "init", "-q")
    server = RepositoryServer("git-daemon", ws.root, ws.reference_target, ws.bench_dir)
    with server as served:
        assert server.process is not None
        daemon = server.process.pid
        assert served.target.startswith("git://127.0.0.1:")
        git(tmp_path, "clone", "-q", served.target, "target-copy")
        git(tmp_path, "clone", "-q", served.bench, "bench-copy")
        assert (tmp_path / "target-copy" / "wordfreq").is_dir()
        push = subprocess.run(["git", "push", "origin", "HEAD:refs/heads/evil"], cwd=tmp_path / "target-copy",
                              check=False, capture_output=True, text=True)
        assert push.returncode != 0  # read-only: no receive-pack
        other = served.target.rsplit("/", 3)[0] + "/worker-w9/.git"
        assert subprocess.run(["git", "ls-remote", other], check=False, capture_output=True).returncode != 0
    assert not psutil.pid_exists(daemon)  # stopped by its pid when the lab stops


def test_a_scratch_copy_left_by_a_killed_lab_fetches_from_the_next_runs_git_daemon(tmp_path: Path) -> None:
    ws = make_demo(tmp_path / "lab", workers=1, only=["terse-report"])
    config = ws.config.replace("launcher", name="command", template="echo worked; " + FINISHED)
    hypothesis = Hypothesis(metric="report/wall_ms", change="x", id="terse-report", scope=("wordfreq/report.py",))

    def run(name: str, served: ServedRepositories) -> RemoteOutcome:
        return run_experiment(RemoteExperiment(lab_id(ws.root), name, "w1", hypothesis, ws.target_base(),
                                               ws.bench_base(), served, config))

    try:
        with RepositoryServer("git-daemon", ws.root, ws.reference_target, ws.bench_dir) as first:
            assert run("first", first).error is None
        # the lab was killed (its scratch copy stays); its next run serves on another port, never the old one
        with socket.socket() as old_port:  # bound, never listening: a connection there is refused
            old_port.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the old connections' TIME_WAIT
            old_port.bind(("127.0.0.1", int(first.target.split(":")[2].split("/")[0])))
            with RepositoryServer("git-daemon", ws.root, ws.reference_target, ws.bench_dir) as second:
                outcome = run("second", second)
        assert outcome.error is None, outcome.error
        assert outcome.fetched_from == second.target and "worked" in outcome.log_tail
    finally:
        remove_scratch(lab_id(ws.root))
    assert_no_scratch(ws.root)


def test_the_lab_trusts_the_patch_not_what_a_remote_worker_says_about_it(tmp_path: Path) -> None:
    ws = make_demo(tmp_path / "lab", workers=1, only=["terse-report"])
    base = ws.target_base()
    hypothesis = Hypothesis(metric="report/wall_ms", change="x", id="narrow", scope=("wordfreq/report.py",))
    experiment = Experiment("narrow", hypothesis, WorkerCheckout(ws.worker("w1"), base, ws.bench_base()))
    patch = ("diff --git a/tests/test_x.py b/tests/test_x.py\nnew file mode 100644\n--- /dev/null\n"
             "+++ b/tests/test_x.py\n@@ -0,0 +1 @@\n+assert True\n")
    outcome = RemoteOutcome("narrow", "elsewhere", "tcp://10.0.0.9:4000", 0, None, False, "t", 1.0, 0.0,
                            target_head=base, patch=patch, report_text="{not json", log_tail="claims: all in scope\n")
    candidate = from_remote(ws, experiment, outcome, make_launcher(ws.config.launcher))
    assert candidate.changed_files == ["tests/test_x.py"]
    assert Flag.SCOPE_VIOLATION in candidate.flags and Flag.REPORT_MALFORMED in candidate.flags
    assert candidate.host == "elsewhere (tcp://10.0.0.9:4000)"
    assert "ran on dask worker elsewhere" in Path(candidate.log_path).read_text()


@pytest.mark.slow
def test_an_unreachable_scheduler_is_one_clear_error(tmp_path: Path, mark: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_demo(tmp_path / "lab", workers=1, only=["terse-report"])
    use_cluster(ws, scheduler=f"tcp://127.0.0.1:{_free_port()}")
    # dask retries a refused connection until its connect timeout (30 s by default): the user's setting, shortened
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "2s")
    proc = orchard("run", str(ws.root), mark=mark)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2, output
    assert "cannot reach the dask scheduler" in output and "Traceback" not in output
    assert_nothing_left(mark, None)
    assert not list(Path(tempfile.gettempdir()).glob(f"orchard-dask-{lab_id(ws.root)}"))
