"""One experiment as one dask task: what runs on the dask worker, and what it sends back.

`run_experiment` is the task. On whatever machine dask picked, it keeps a
scratch copy of the lab (`<tmp>/orchard-dask-<lab>/`, laid out like a
workspace), fetches the lab's served repositories into it, gives the worker
slot clean checkouts at the recorded bases, renders the prompt there and
runs the launcher exactly as a local worker runs it (the subprocess
executor's wrapper, timeout and whole-tree kill), setting the worker up
and reading its checkouts afterwards with the lab's own functions
(`worker_setup.prepare`, `checkout_reader.read_checkout`). It returns the
`JobResult` of that run with a `RemoteRun`: the reading (patch, bench
state), the report's text, the log's tail, the prompt, timings and the
host. None of it is trusted by the lab: the judge applies the patch to its
own clean checkout, and the lab's one collector filters the patch and works
out the changed files, the scope and every flag (`candidate.candidate_from`).
A failure to set up (the clone, a full disk) is the host's, never the
hypothesis's (`host_failed`). `host_problem` is what the lab's start runs on
every dask worker: reach to the served repositories, git, the sandbox.

Several experiments may run at once on one host (one dask worker with
`agent=2`, or several dask workers): the shared references are updated
under a file lock, and each experiment has its own worker slot. A dask
worker that died mid-experiment leaves its launcher's processes behind;
the next experiment on that slot and host kills them first (their pid and
start time are recorded), and `remove_scratch` kills and removes all of it
when the lab stops.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from filelock import FileLock

from orchard.errors import UsageError
from orchard.lab.config.orchard_toml import Config
from orchard.lab.config.sections import WorkersConfig
from orchard.lab.records.build import CheckName
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.worker import WorkerCheckout
from orchard.lab.records.worker_output import RemoteRun, Timings
from orchard.lab.workers.dask.serving import GIT_DAEMON, ServedRepositories
from orchard.lab.workers.executors.subprocess import SubprocessExecutor
from orchard.lab.workers.jobs.job import JobResult
from orchard.lab.workers.jobs.process_tree import kill_tree
from orchard.lab.workers.launchers.launchers import launcher_for
from orchard.lab.workers.sandbox import sandbox
from orchard.lab.workers.worker_run.checkout_reader import never_the_change, read_checkout
from orchard.lab.workers.worker_run.worker_setup import prepare
from orchard.lab.workers.workspace import checkout_size
from orchard.lab.workers.workspace.builds import candidate_step, hash_build, placeholders
from orchard.lab.workers.workspace.report import read_report
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.scratch import Owner

LOG_TAIL_CHARS = 200_000  # of the worker's log, sent back to the lab
EVENT_TOPIC = "orchard-experiments"  # dask's event log: where each attempt started
REACH_TIMEOUT_S = 30.0  # for one `git ls-remote` of a served repository from a dask worker
WATCH_S = 0.2  # how often the running launcher is polled


@dataclass(frozen=True)
class RemoteExperiment:
    """Everything a dask worker needs to run one experiment, and nothing it may not see."""

    lab_id: str
    name: str
    worker: str  # the lab's worker slot (w1, w2, ...)
    hypothesis: Hypothesis
    target_base: str
    bench_base: str
    repositories: ServedRepositories
    config: Config
    patch_text: str | None = None  # the hypothesis's ready patch (patch launcher)
    bench_patch_text: str | None = None
    lab_root: str = ""  # the lab's workspace: hidden from the launcher on a host that shares its file system


def lab_id(workspace_root: Path) -> str:
    """Names the lab's scratch directory on every dask worker."""
    return hashlib.sha256(str(Path(workspace_root).resolve()).encode()).hexdigest()[:12]


def scratch_dir(lab: str) -> Path:
    return Path(tempfile.gettempdir()) / f"orchard-dask-{lab}"


def judge_scratch(lab: str, address: str) -> Path:
    """A judge host's own copy of the lab (its checkouts, baselines, lab.db of caches), one per dask worker."""
    return Path(tempfile.gettempdir()) / f"orchard-judge-{lab}-{hashlib.sha256(address.encode()).hexdigest()[:8]}"


def _git(cwd: Path | None, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def sync(source: str, dest: Path, commit: str) -> None:
    """Clone `source` into `dest`, or fetch into an existing clone, until `commit` is there.

    An existing clone is pointed at `source` first: a lab that was killed
    left its scratch copy, and its next run serves on another port.
    """
    if not (dest / ".git").exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git(None, "clone", "--quiet", "--no-checkout", source, str(dest))
    else:
        _git(dest, "remote", "set-url", "origin", source)
        _git(dest, "fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*")
    _git(dest, "checkout", "--quiet", "--force", "--detach", commit)


def _prepare(ws: Workspace, spec: RemoteExperiment) -> None:
    """The references at the experiment's bases, and the baseline binary the worker measures against."""
    sync(spec.repositories.target, ws.reference_target, spec.target_base)
    sync(spec.repositories.bench, ws.bench_dir, spec.bench_base)
    binary = ws.baseline_binary(spec.target_base)
    if binary is None or binary.exists():
        return
    checkout = ws.baseline_dir(spec.target_base)
    shutil.rmtree(checkout, ignore_errors=True)
    ws.target_vcs.clone(str(ws.reference_target), checkout, commit=spec.target_base)
    candidate_step(ws, CheckName.BUILD, ws.config.target.build, checkout, placeholders(ws, checkout, None),
                   checkout.parent / "logs")


def _pid_file(ws: Workspace, slot: str) -> Path:
    return ws.root / f"worker-{slot}.pid"


def _kill_leftover(pid_file: Path) -> None:
    """A launcher left by a dask worker that died mid-experiment (same pid and start time)."""
    if not pid_file.exists():
        return
    pid, _, created = pid_file.read_text().partition(" ")
    pid_file.unlink()
    try:
        launcher = Owner(int(pid), float(created))
    except ValueError:
        return
    if launcher.alive():
        kill_tree(launcher.pid, include_root=True)


def _materialized(ws: Workspace, spec: RemoteExperiment) -> Hypothesis:
    """The hypothesis with its ready patches written into the scratch copy."""

    def written(key: str, text: str | None, original: str | None) -> str | None:
        if text is None:
            return original
        path = ws.root / "patches" / f"{spec.name}.{key}"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return str(path)

    hypothesis = spec.hypothesis
    return replace(hypothesis, patch=written("patch", spec.patch_text, hypothesis.patch),
                   bench_patch=written("bench_patch", spec.bench_patch_text, hypothesis.bench_patch))


def _announce(name: str) -> tuple[str, str]:
    """Record in dask's event log that this attempt of `name` started here (the lab reads it)."""
    from distributed import get_worker

    host = socket.gethostname()
    try:
        worker = get_worker()
    except ValueError:
        return host, ""
    worker.log_event(EVENT_TOPIC, {"experiment": name, "host": host, "address": worker.address})
    return host, worker.address


def _setup_failed(spec: RemoteExperiment, host: str, address: str, ws: Workspace, began: float,
                  error: Exception) -> JobResult:
    """The host could not set the worker up (a clone, a full disk): its failure, reported to the lab."""
    detail = getattr(error, "stderr", "") or ""
    return JobResult(spec.name, None, None, False, False, "", time.monotonic() - began, ws.log_path(spec.name),
                     reason=f"setting up the worker failed: {error} {detail}".strip()[:2000],
                     remote=RemoteRun(host, address, host_failed=True))


def run_experiment(spec: RemoteExperiment) -> JobResult:
    """The dask task: the worker set up from the served repositories, its launcher run, its checkouts read."""
    host, address = _announce(spec.name)
    began = time.monotonic()
    ws = Workspace(scratch_dir(spec.lab_id), spec.config)
    try:
        ws.root.mkdir(parents=True, exist_ok=True)
        for directory in (ws.prompts_dir, ws.logs_dir, ws.judge_dir):
            directory.mkdir(exist_ok=True)
        launcher = launcher_for(spec.config, spec.hypothesis.launcher)  # the one the hypothesis names
        with FileLock(str(ws.root / ".references.lock")):
            _prepare(ws, spec)
        pid_file = _pid_file(ws, spec.worker)
        _kill_leftover(pid_file)
        checkout = WorkerCheckout(ws.worker(spec.worker), spec.target_base, spec.bench_base)
        experiment = Experiment(spec.name, _materialized(ws, spec), checkout)
        built = ws.baseline_binary(spec.target_base)
        prompt = prepare(ws, experiment, launcher,
                         hash_build(built, spec.target_base) if built is not None and built.exists() else None)
        fetched_from = _git(ws.reference_target, "remote", "get-url", "origin")
        job = launcher.job(ws, experiment, hide=(Path(spec.lab_root),) if spec.lab_root else ())
    except Exception as error:  # noqa: BLE001 - any failure here is the host's, reported to the lab
        return _setup_failed(spec, host, address, ws, began, error)
    setup_s = time.monotonic() - began
    with SubprocessExecutor() as executor:
        executor.start(job)
        pid = executor.pids()[spec.name]
        pid_file.write_text(f"{pid} {Owner.of(pid).started}")
        result, over = _watched(executor, spec.name, checkout.worker.root, spec.config.workers.max_checkout_mb)
    pid_file.unlink(missing_ok=True)
    run_s = time.monotonic() - began - setup_s
    log = job.log_path.read_text(encoding="utf-8", errors="replace") if job.log_path.exists() else ""
    if over is not None:  # nothing of its checkouts is read: it is KILLed for its size, and its disk freed at once
        shutil.rmtree(checkout.worker.root, ignore_errors=True)
        return replace(result, remote=RemoteRun(host, address, over_cap=over, log_tail=log[-LOG_TAIL_CHARS:],
                                                timings=Timings(round(setup_s, 3), round(run_s, 3)),
                                                fetched_from=fetched_from))
    reading = read_checkout(ws, experiment, never_the_change(ws, launcher))
    report = read_report(checkout.worker.report_path, spec.name)  # never following a link the worker planted
    timings = Timings(round(setup_s, 3), round(run_s, 3), round(time.monotonic() - began - setup_s - run_s, 3))
    unreadable = report.problems[0] if report.state == "unreadable" and report.problems else None
    return replace(result, remote=RemoteRun(host, address, reading, report_text=report.raw,
                                            report_unreadable=unreadable, log_tail=log[-LOG_TAIL_CHARS:],
                                            prompt=prompt.read_text(encoding="utf-8"), timings=timings,
                                            fetched_from=fetched_from))


def _watched(executor: SubprocessExecutor, name: str, worker_root: Path, cap_mb: int) -> tuple[JobResult, str | None]:
    """The launcher run to its end while its worker's directory is measured every few seconds, as the lab
    measures its local workers (`loop/disk_limits.py`): over `cap_mb`, it is stopped; the reason comes back."""
    over: str | None = None
    measured = time.monotonic()
    while not (ended := executor.poll()):
        if over is None and time.monotonic() - measured >= checkout_size.CHECK_EVERY_S:
            over = checkout_size.over_cap(worker_root, cap_mb)
            measured = time.monotonic()
            if over is not None:
                executor.cancel(name, over)
        time.sleep(WATCH_S)
    return ended[0], over or checkout_size.over_cap(worker_root, cap_mb)  # grown past it since the last look


def host_problem(repositories: ServedRepositories, workers: WorkersConfig) -> str | None:
    """What keeps this dask worker's host from running the lab's experiments, or None (run on each at the start).

    Every experiment would fail the same way on it: the lab's repositories
    out of reach (a git daemon on an address this host cannot reach), no
    git, no working bubblewrap for the configured sandbox.
    """
    hint = (f"[workers] serve_host = {workers.serve_host!r} must be an address of the lab's host that every "
            "dask worker reaches" if workers.serve == GIT_DAEMON else
            "[workers] serve = \"path\" needs the lab's workspace at the same path on every dask worker")
    for url in (repositories.target, repositories.bench):
        try:
            answer = subprocess.run(["git", "ls-remote", "--heads", url], capture_output=True, text=True,
                                    timeout=REACH_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            return f"cannot fetch the lab's repository {url} (no answer within {REACH_TIMEOUT_S:g} s): {hint}"
        except OSError as error:
            return f"cannot run git: {error}"
        if answer.returncode != 0:
            said = " ".join(answer.stderr.split())[:300] or f"exit {answer.returncode}"
            return f"cannot fetch the lab's repository {url} ({said}): {hint}"
    try:
        sandbox.preflight(workers.sandbox)
    except UsageError as error:
        return str(error)
    return None


def remove_scratch(lab: str) -> None:
    """Kill every launcher the lab left on this host and remove its scratch copies, its judges' too (run on each
    dask worker)."""
    root = scratch_dir(lab)
    for pid_file in root.glob("worker-*.pid"):
        _kill_leftover(pid_file)
    shutil.rmtree(root, ignore_errors=True)
    for judge in root.parent.glob(f"orchard-judge-{lab}-*"):
        shutil.rmtree(judge, ignore_errors=True)
