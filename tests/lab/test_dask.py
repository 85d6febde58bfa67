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
from orchard.lab.judge.candidate import collect_candidate
from orchard.lab.loop import backlog
from orchard.lab.records.candidate import Flag
from orchard.lab.records.events import ExperimentHost, ExperimentStarted
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judgment import Decision, JudgmentEntry, Rule
from orchard.lab.records.worker import WorkerCheckout
from orchard.lab.records.worker_output import CheckoutReading, RemoteRun
from orchard.lab.workers.dask.remote import RemoteExperiment, lab_id, remove_scratch, run_experiment, scratch_dir
from orchard.lab.workers.dask.serving import RepositoryServer, ServedRepositories
from orchard.lab.workers.jobs.job import JobResult
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import assert_nothing_left, first_experiments, git, stop_process_groups, wait_for
from tests.lab.lab_helpers import lab_events as events
from tests.lab.loop_support import FINISHED

DASK = Path(sys.executable).with_name("dask")
HOG_CAP_MB = 20  # the demo's worker directory holds a few MB
HOG_SLEEP_S = 600
HOG = f"head -c {2 * HOG_CAP_MB}M /dev/zero > hog.bin && sleep {HOG_SLEEP_S}; " + FINISHED  # only the cap ends it


def orchard(*args: str, mark: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    return subprocess.Popen([sys.executable, "-m", "orchard", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = 900) -> str:
    output, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, output
    return output


def decisions(root: Path) -> dict[str, tuple[str | None, str | None, tuple[str, ...]]]:
    """Each hypothesis's decision, the rule behind it, and the files its candidate changed (its first experiment:
    whether a kill is revisited depends on when the win merged)."""
    return {h: (e.decision, e.judgment.rule if e.judgment else None,
                tuple(e.candidate.changed_files) if e.candidate else ()) for h, e in first_experiments(root).items()}


def _judged_reasons(root: Path) -> dict[str, tuple[str | None, str | None, tuple[str, ...]]]:
    """Each hypothesis's decision, the rule behind it, and its reasons (its first experiment)."""
    return {h: (e.decision, e.judgment.rule if e.judgment else None, tuple(e.reasons))
            for h, e in first_experiments(root).items()}


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


def add_command_hypothesis(ws: Workspace, name: str, template: str, metric: str, scope: str,
                           **workers: object) -> None:
    """One more hypothesis, run by a `command` launcher of its own (named after it) with `template`; one more
    attempted before the lab stops; and any other [workers] keys."""
    data = config_module.to_dict(config_module.load(ws.config_path))
    data.setdefault("launchers", {})[name] = {"name": "command", "template": template}
    data["stop"]["top_attempted"] = data["stop"]["top_attempted"] + 1
    data["workers"].update(workers)
    config_file.write(config_module.from_dict(data), ws.config_path)
    state = LabState.open(ws.root)
    try:
        with state.transaction():
            backlog.add(state, Hypothesis(metric=metric, change=name, id=name, scope=(scope,), launcher=name),
                        source="user")
    finally:
        state.close()


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
    hosts = events(tmp_path / "dask", ExperimentHost)
    # where each ran is journaled (a revisited kill's second experiment too)
    assert {e.experiment for e in hosts} == {e.experiment for e in events(tmp_path / "dask", ExperimentStarted)}
    assert {e.event.host for e in hosts} == {socket.gethostname()}
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
    # the patch worker, once the test has killed a dask worker: caught running, however long placing both takes (a
    # 20 s sleep let the first end first on a loaded machine); in a directory of its own that the sandbox's uid may
    # enter and read (pytest's tmp_path is 0700: as root, `orchard run` refuses a launcher there, naming it)
    slow_python = tmp_path / "tools" / "slow-python"
    release = slow_python.with_name("release")
    slow_python.parent.mkdir(mode=0o755)
    slow_python.write_text(f"#!/bin/sh\nuntil [ -e {release} ]; do sleep 0.2; done\nexec {sys.executable} \"$@\"\n")
    slow_python.chmod(0o755)
    use_cluster(ws, dask_workers=2)
    config_file.write(config_module.load(ws.config_path).replace("launcher", executable=str(slow_python)),
                        ws.config_path)
    proc = orchard("run", str(ws.root), mark=mark)
    try:
        wait_for(lambda: len(events(ws.root, ExperimentHost)) == 2 or proc.poll() is not None,
                 "both experiments placed", limit_s=300)
        assert proc.poll() is None, proc.communicate()[0]
        victim = events(ws.root, ExperimentHost)[0]
        os.kill(_listening_pid(victim.event.address, mark), signal.SIGKILL)
        release.touch()
        output = finish(proc)
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    requeued = [e for e in events(ws.root, ExperimentHost) if e.event.requeued_from]
    assert [(e.experiment, e.event.requeued_from) for e in requeued] == [
        (victim.experiment, victim.event.address)], output
    assert "was lost; re-queued" in output
    found = {h: decision[:2] for h, decision in decisions(ws.root).items()}
    assert found == {"terse-report": ("LAND", None), "top-ten-default": ("KILL", "gates-absolute")}
    assert Counter(e.experiment for e in events(ws.root, JudgmentEntry)) == Counter(hypotheses)  # none twice
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
        add_command_hypothesis(ws, "disk-hog", HOG, "report/wall_ms", "wordfreq/report.py",
                               max_checkout_mb=HOG_CAP_MB)
        output = finish(orchard("run", str(ws.root), mark=mark))
        found = {h: decision[:2] for h, decision in decisions(ws.root).items()}
        assert found == {"terse-report": ("LAND", None), "tokenize-regex": ("KILL", "scope-kept"),
                         "disk-hog": ("KILL", None)}, output
        (reason,) = [r for h, (_, _, reasons) in _judged_reasons(ws.root).items() if h == "disk-hog" for r in reasons]
        assert reason.startswith(f"the experiment was stopped: DiskLimit: on dask worker {socket.gethostname()} ")
        assert f"over [workers] max_checkout_mb ({HOG_CAP_MB} MB)" in reason, reason
        placed = events(ws.root, ExperimentHost)
        assert {e.experiment for e in placed} == {*hypotheses, "disk-hog"}
        # every experiment ran in the CLI worker's process (or the process it forked for the task)
        worker_pids = {worker.pid, *(p.pid for p in psutil.Process(worker.pid).children(recursive=True))}
        assert {_listening_pid(e.event.address, mark) for e in placed} <= worker_pids, output
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

    def run(name: str, served: ServedRepositories) -> JobResult:
        return run_experiment(RemoteExperiment(lab_id(ws.root), name, "w1", hypothesis, ws.target_base(),
                                               ws.bench_base(), served, config))

    try:
        with RepositoryServer("git-daemon", ws.root, ws.reference_target, ws.bench_dir) as first:
            assert run("first", first).reason is None
        # the lab was killed (its scratch copy stays); its next run serves on another port, never the old one
        with socket.socket() as old_port:  # bound, never listening: a connection there is refused
            old_port.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the old connections' TIME_WAIT
            old_port.bind(("127.0.0.1", int(first.target.split(":")[2].split("/")[0])))
            with RepositoryServer("git-daemon", ws.root, ws.reference_target, ws.bench_dir) as second:
                outcome = run("second", second)
        assert outcome.reason is None and outcome.remote is not None, outcome.reason
        assert outcome.remote.fetched_from == second.target and "worked" in outcome.remote.log_tail
    finally:
        remove_scratch(lab_id(ws.root))
    assert_no_scratch(ws.root)


def test_the_lab_trusts_the_patch_not_what_a_remote_worker_says_about_it(tmp_path: Path) -> None:
    ws = make_demo(tmp_path / "lab", workers=1, only=["terse-report"])
    base = ws.target_base()
    hypothesis = Hypothesis(metric="report/wall_ms", change="x", id="narrow", scope=("wordfreq/report.py",))
    experiment = Experiment("narrow", hypothesis, WorkerCheckout(ws.worker("w1"), base, ws.bench_base()))
    patch = ("diff --git a/tests/test_x.py b/tests/test_x.py\nnew file mode 100644\n--- /dev/null\n"
             "+++ b/tests/test_x.py\n@@ -0,0 +1 @@\n+assert True\n"
             "diff --git a/wordfreq.egg-info/PKG-INFO b/wordfreq.egg-info/PKG-INFO\nnew file mode 100644\n"
             "--- /dev/null\n+++ b/wordfreq.egg-info/PKG-INFO\n@@ -0,0 +1 @@\n+Name: wordfreq\n")
    sent = RemoteRun("elsewhere", "tcp://10.0.0.9:4000", CheckoutReading(target_head=base, patch=patch),
                     report_text="{not json", log_tail="claims: all in scope\n")
    result = JobResult("narrow", 0, None, False, False, "t", 1.0, ws.log_path("narrow"), remote=sent)
    candidate = collect_candidate(ws, experiment, result, make_launcher(ws.config.launcher))
    assert candidate.changed_files == ["tests/test_x.py"]  # read from the patch; its build output left out
    assert "egg-info" not in candidate.patch
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


def test_a_dask_host_reads_a_hostile_checkout_as_the_lab_does(tmp_path: Path) -> None:
    """A report that is a link is never followed on the worker's host (it was: the host's /etc/passwd came back as
    the report's text), and the worker's .git config (fsmonitor) never runs there."""
    ran = tmp_path / "hook-ran"
    ws = make_demo(tmp_path / "lab", workers=1, only=["terse-report"])
    attack = (f"printf '#!/bin/sh\\necho \"$0 $*\" >> {ran}\\n' > .git/evil-hook && chmod +x .git/evil-hook && "
              "git config core.fsmonitor \"$PWD/.git/evil-hook\" && echo '# terse' >> wordfreq/report.py && "
              "ln -s /etc/passwd {report}")
    config = ws.config.replace("launcher", name="command", template=attack)
    hypothesis = Hypothesis(metric="report/wall_ms", change="x", id="terse-report", scope=("wordfreq/report.py",))
    served = ServedRepositories(str(ws.reference_target), str(ws.bench_dir))
    try:
        result = run_experiment(RemoteExperiment(lab_id(ws.root), "hostile", "w1", hypothesis, ws.target_base(),
                                                 ws.bench_base(), served, config))
    finally:
        remove_scratch(lab_id(ws.root))
    assert result.exit_code == 0 and result.remote is not None, result.remote
    assert not ran.exists(), ran.read_text()
    assert result.remote.report_text is None and "symlink" in (result.remote.report_unreadable or "")
    experiment = Experiment("hostile", hypothesis, WorkerCheckout(ws.worker("w1"), ws.target_base(), ws.bench_base()))
    candidate = collect_candidate(ws, experiment, result, make_launcher(config.launcher))
    assert candidate.changed_files == ["wordfreq/report.py"] and candidate.flags == [Flag.REPORT_UNREADABLE]


SETTLED_BY_RULE = {Rule.HARNESS, Rule.SCOPE, Rule.TESTS, Rule.TESTS_KEPT, Rule.GATES}  # their reasons hold no estimate


def _as_an_sdist(ws: Workspace) -> None:
    """The demo's target as a PyPI sdist is (texttable's): its egg-info tracked, and a build that rewrites it
    (and adds a file beside it), in every checkout the build runs in: a worker's, the judge's."""
    target = ws.reference_target
    (target / "wordfreq.egg-info").mkdir()
    (target / "wordfreq.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: wordfreq\n")
    (target / "wordfreq.egg-info" / "SOURCES.txt").write_text("wordfreq/__init__.py\n")
    makefile = target / "Makefile"
    makefile.write_text(makefile.read_text().replace(
        "\tchmod +x build/wordfreq\n",
        "\tchmod +x build/wordfreq\n\tdate +%s%N >> wordfreq.egg-info/PKG-INFO\n"
        "\tls wordfreq > wordfreq.egg-info/SOURCES.txt\n\techo wordfreq > wordfreq.egg-info/top_level.txt\n"))
    git(target, "add", "-A")
    git(target, "commit", "-qm", "as released: the egg-info tracked")
    git(target, "push", "-q", "origin", "HEAD:main")


def _judged(root: Path) -> dict[str, tuple[str | None, str | None, list[str], tuple[str, ...], str, tuple[str, ...]]]:
    """Each hypothesis's decision, rule, reasons, and its candidate's flags, patch and changed files (its first
    experiment)."""
    return {h: (e.decision, e.judgment.rule if e.judgment else None, list(e.reasons),
                tuple(e.candidate.flags) if e.candidate else (), e.candidate.patch if e.candidate else "",
                tuple(e.candidate.changed_files) if e.candidate else ()) for h, e in first_experiments(root).items()}


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two labs' measurements on a shared machine
def test_a_lab_whose_build_rewrites_tracked_outputs_decides_alike_on_both_executors(tmp_path: Path,
                                                                                    mark: str) -> None:
    hypotheses = ["terse-report", "top-ten-default", "tokenize-regex"]
    local = make_demo(tmp_path / "local", workers=2, executor="subprocess", only=hypotheses)
    remote = make_demo(tmp_path / "dask", workers=2, only=hypotheses)
    use_cluster(remote, dask_workers=2)
    for ws in (local, remote):
        _as_an_sdist(ws)
        finish(orchard("run", str(ws.root), mark=mark))
    mine, theirs = _judged(local.root), _judged(remote.root)
    assert mine.keys() == theirs.keys() == set(hypotheses)
    for hypothesis, (decision, rule, reasons, flags, patch, changed) in mine.items():
        other = theirs[hypothesis]
        assert (flags, patch, changed) == other[3:], f"{hypothesis}: the collectors disagree"
        assert not any("egg-info" in path for path in changed), changed
        by_noise = {decision, other[0]} <= {Decision.KILL, Decision.ITERATE} and Rule.FLOOR in {rule, other[1]}
        if by_noise:
            assert Decision.LAND not in (decision, other[0]), hypothesis
            continue
        assert (decision, rule) == other[:2], f"{hypothesis}: {reasons} / {other[2]}"
        if rule in SETTLED_BY_RULE:
            assert reasons == other[2], hypothesis
    assert theirs["terse-report"][0] == Decision.LAND and theirs["tokenize-regex"][1] == Rule.SCOPE
    assert_nothing_left(mark, None)
    assert_no_scratch(remote.root)


@pytest.mark.slow
def test_a_dask_host_stops_a_worker_over_max_checkout_mb_and_says_why(tmp_path: Path) -> None:
    """The host measures the worker it runs as the lab measures its own (`[workers] max_checkout_mb`): a worker
    that fills its checkout is stopped there, long before its own end, its checkout removed and the reason sent
    back (the lab KILLs it with it: test_a_cli_dask_worker_runs_experiments_from_the_served_repositories)."""
    ws = make_demo(tmp_path / "lab", workers=1, only=["terse-report"])
    config = ws.config.replace("launcher", name="command", template=HOG).replace("workers", max_checkout_mb=HOG_CAP_MB)
    hypothesis = Hypothesis(metric="report/wall_ms", change="x", id="terse-report", scope=("wordfreq/report.py",))
    served = ServedRepositories(str(ws.reference_target), str(ws.bench_dir))
    try:
        result = run_experiment(RemoteExperiment(lab_id(ws.root), "hog", "w1", hypothesis, ws.target_base(),
                                                 ws.bench_base(), served, config))
        assert not (scratch_dir(lab_id(ws.root)) / "worker-w1").exists()  # its disk freed at once
    finally:
        remove_scratch(lab_id(ws.root))
    assert result.remote is not None and result.cancelled and result.duration_s < HOG_SLEEP_S, result
    assert result.remote.over_cap is not None and f"max_checkout_mb ({HOG_CAP_MB} MB)" in result.remote.over_cap
    assert result.remote.reading.patch == ""  # nothing of its checkouts read: it is KILLed for its size
    assert "max_checkout_mb" in result.remote.log_tail and "killing the worker's processes" in result.remote.log_tail


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_where_each_experiment_ran_is_journaled_past_the_schedulers_event_log(
        tmp_path: Path, mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler keeps only the last `low-level-log-length` events of a topic (1,000 by default): the lab read
    that log by count, so past it no placement was journaled (here, with 2 kept, only the first two)."""
    monkeypatch.setenv("DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH", "2")  # the lab's own LocalCluster
    ws = make_demo(tmp_path / "lab", workers=1, only=["tokenize-regex"])
    use_cluster(ws, dask_workers=1)
    names = [f"no-change-{index}" for index in range(3)]  # the lab stops after 3 KILLs in a row
    for name in names:  # each ends at once with its report and no change: KILLed unjudged, nothing to measure
        add_command_hypothesis(ws, name, FINISHED, "report/wall_ms", "wordfreq/report.py")
    output = finish(orchard("run", str(ws.root), mark=mark))
    placed = events(ws.root, ExperimentHost)
    assert sorted(e.experiment for e in placed) == sorted(["tokenize-regex", *names]), output
    assert "Runs on host" in (ws.root / "JOURNAL.md").read_text()
    assert_nothing_left(mark, None)
    assert_no_scratch(ws.root)
