"""A simulated fleet on dask: how many experiments an hour one judge machine, or several, keeps up with.

    python benchmarks/fleet.py [--workers 2,8,32] [--minutes 3] [--scale 0.1] [--verdict-s 20] [--json out.json]
                               [--shared-baseline K] [--judges 1,2,4]

For each fleet size N, this process starts a dask cluster of N workers
(threads of one process, `agent=1` each: the experiments are subprocesses,
so threads are enough to host them) on loopback, and `orchard run` (a
subprocess, `executor = "dask"` on that scheduler, N experiments in
flight, the lab's git daemon serving the repositories) works through a
backlog larger than the run can finish (`--backlog`, default 400: the
loop ranks the whole backlog on every pass, which costs seconds per pass
at thousands of open hypotheses on this machine, a limit of its own). The agent is a stand-in
(`command` launcher) that sleeps a time drawn uniformly from 30-120 s,
then appends one line to a file of its own (disjoint scopes). The judge
is the lab's real judge (clean checkout, patch, tests) whose verdict is
the bench's own command, a sleep of `--verdict-s` under the measurement
lock (a lock file of this run's own), so verdicts are serial, as on a
real judge machine. Every duration is multiplied by `--scale` (default
0.1: 3-12 s agents, 2 s verdicts) to fit a session; the ratios, and so
the saturation point, are those of the unscaled fleet.

The simulated workers run at niceness `--workers-nice` (default 19; 0 as
before 2026-12-02): on a real fleet they are other machines, and here
their setups (fetches, checkouts: seconds each at 128 workers on 2 cores)
would otherwise take the CPU the lab's loop and judges need, so that the
table measured this machine's cores instead of the lab.

After `--minutes` the lab is stopped (SIGTERM: it cleans up like Ctrl-C).
Reported per fleet size, from lab.db and a sampler that reads it every
second: experiments finished by workers and judged, per hour of the
unscaled fleet; the median time a dask worker spent setting up an
experiment (fetch from the git daemon, checkouts, prompt) and collecting
it (diff, report); the workers' idle share (time without an experiment, over
N x the window); the judge's queue (candidates collected and not yet
decided) over time. A judge is saturated when its queue keeps growing:
judged per hour then stays at 3600 / verdict-s whatever N is.

With `--shared-baseline K` the verdict is not the stand-in command but the
bench's own suite (a binary that sleeps, sized so that a campaign of 8
pairs and its warm-up pair takes `--verdict-s`, after the lab's own A/A
calibration) and `[workers] shared_baseline = K`: K = 1 judges every
candidate in a campaign of its own (as before shared-baseline campaigns),
K > 1 lets up to K candidates waiting on the same base share the
baseline's runs. Compare the two in one session.

With `--judges 1,2,4` each fleet size runs once per judge count J. J = 1 is
today's single judge on the lab's machine (the table's default). J >= 2
adds J judge hosts to the same dask cluster (`[workers] judge_hosts = J`):
each a `dask worker` process of its own declaring `judge=1`, with its own
lock file and cache directory, so their stand-in verdicts do not serialize
against each other, as on separate machines; each verdict then runs whole
on one of them (its clean checkout, patch, tests and the sleep), one at a
time per host. Reported besides: the verdicts each judge host started in
the window, and the median real seconds from a verdict's start on its host
to its judgment in lab.db.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TIMINGS = re.compile(r"\b(setup|run|collect) ([0-9.e+-]+) s\b")
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}


def _repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
        if text.startswith("#!"):
            (path / name).chmod(0o755)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "initial"]):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)
    return path


# --shared-baseline K: the verdict is the bench's own suite on a binary that sleeps, sized so that one campaign
# of SUITE_PAIRS pairs (and its warm-up pair) costs --verdict-s; K=1 judges each candidate on its own (today's
# campaigns), K>1 lets up to K candidates waiting on the same base share the baseline's runs.
SUITE_PAIRS = 8
SUITE = """
[suite]
name = "fleet"
runs = {pairs}
min_runs = {pairs}
calibration_runs = {pairs}
confine = false

[[scenario]]
name = "sleep"
command = ["{{bin}}"]

[[metric]]
name = "wall_ms"
floor = 0.05
"""


def _verdict_config(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str], str]:
    """(target files, bench files, [bench] and [target] keys) of the stand-in or the suite's verdict."""
    if not args.shared_baseline:
        return ({"README": "target\n"}, {"bench.py": "print('x')\n"},
                f'[target]\nbinary = "README"\n\n[bench]\nverdict = "sleep {args.verdict_s * args.scale} '
                '&& echo NO-CHANGE"\n')
    run_s = args.verdict_s * args.scale / (2 * (SUITE_PAIRS + 1))
    return ({"README": "target\n", "run.sh": f"#!/bin/sh\nsleep {run_s:.4f}\n"},
            {"suite.toml": SUITE.format(pairs=SUITE_PAIRS)},
            '[target]\nbinary = "run.sh"\n\n[bench]\nsuite = "suite.toml"\n')


def _lab(root: Path, scheduler: str, workers: int, judges: int, args: argparse.Namespace) -> Path:
    target_files, bench_files, verdict = _verdict_config(args)
    target = _repo(root / "target", target_files)
    bench = _repo(root / "bench", bench_files)
    low, high = 30 * args.scale, 120 * args.scale
    agent = f"{sys.executable} -c 'import random, time; time.sleep(random.uniform({low}, {high}))'"
    # a worker that ends without its report is KILLed unjudged: the stand-in writes one, so every candidate
    # reaches the verdict
    report = (r"printf '{{\"schema\": \"orchard.worker-report/1\", \"experiment\": \"%s\", \"status\": \"done\", "
              r"\"summary\": \"done\", \"measurements\": []}}' {experiment} > {report}")
    config = root / "orchard.toml"
    config.write_text(f"""
{verdict}
[workers]
count = {workers}
exploit = {workers}
explore = 0
executor = "dask"
scheduler = "{scheduler}"
judges = 2
judge_hosts = {judges if judges > 1 else 0}
shared_baseline = {max(1, args.shared_baseline)}

[launcher]
name = "command"
template = "{agent} && echo {{experiment}} >> {{experiment}}.txt && {report}"

[stop]
top_attempted = {args.backlog}
idle_loops = {args.backlog}
""")
    metric = "sleep/wall_ms" if args.shared_baseline else "m"  # with a suite, one of its metrics
    hypotheses = root / "hypotheses.toml"
    hypotheses.write_text("".join(
        f'[[hypothesis]]\nid = "h{i}"\nmetric = "{metric}"\nchange = "c"\nsuspected_cause = "x"\n'
        f'scope = ["h{i}.txt"]\n\n'
        for i in range(args.backlog)))
    lab = root / "lab"
    for command in (["init", str(lab), "--target", str(target), "--bench", str(bench), "--config", str(config)],
                    ["backlog", "add", str(lab), "--file", str(hypotheses)]):
        done = subprocess.run([sys.executable, "-m", "orchard", *command], capture_output=True, text=True)
        if done.returncode:  # e.g. more workers than one lab's [workers] count allows
            sys.exit(f"fleet.py: orchard {command[0]} failed: {done.stderr.strip()}")
    return lab


def _sample(db: Path, stop: threading.Event, began: list[float], samples: list[tuple[float, int, int]]) -> None:
    while not stop.is_set():
        try:
            connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            try:
                rows = dict(connection.execute(
                    "SELECT status, count(*) FROM experiments GROUP BY status").fetchall())
            finally:
                connection.close()
            if began:
                queue = rows.get("collected", 0) + rows.get("judging", 0)
                samples.append((time.time() - began[0], queue, rows.get("running", 0) + rows.get("starting", 0)))
        except sqlite3.Error:
            pass
        stop.wait(1.0)


@contextlib.contextmanager
def _judge_hosts(cluster: Any, judges: int, root: Path) -> Iterator[None]:
    """J > 1: J `dask worker` processes on `cluster` declaring `judge=1`, each with a lock file and cache of its
    own (as a machine of its own has), stopped by their process groups."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(judges if judges > 1 else 0):
            own = {"ORCHARD_LOCK_FILE": str(root / f"judge-{index}.lock"),
                   "ORCHARD_CACHE_DIR": str(root / f"judge-{index}-cache")}
            started.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--host",
                 "127.0.0.1", "--nthreads", "1", "--resources", "judge=1", "--no-dashboard", "--no-nanny",
                 "--local-directory", str(root / f"judge-{index}-dask")],
                env={**os.environ, **own}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True))
        if started:
            cluster.wait_for_workers(len(cluster.workers) + len(started), timeout=300)
        yield
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def one_fleet(workers: int, judges: int, args: argparse.Namespace) -> dict[str, Any]:
    from distributed import LocalCluster

    with tempfile.TemporaryDirectory(prefix="orchard-fleet-") as temp, LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
            dashboard_address=None, resources={"agent": 1, "cpu": 1},
            # no memory limit: in-process workers each take the whole process's memory for their own, and at 128
            # workers each one's share of the machine (188 MiB) is below it, so every worker paused
            memory_limit=0) as cluster, _judge_hosts(
            cluster, judges, Path(temp)):
        root = Path(temp)
        _yield_to_the_lab(cluster, args.workers_nice)
        lab = _lab(root, cluster.scheduler_address, workers, judges, args)
        env = {**os.environ, "ORCHARD_LOCK_FILE": str(root / "measurement.lock")}
        log = (root / "run.log").open("w")
        proc = subprocess.Popen([sys.executable, "-m", "orchard", "run", str(lab)], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        stop, began, samples = threading.Event(), [], []
        sampler = threading.Thread(target=_sample, args=(lab / "lab.db", stop, began, samples), daemon=True)
        sampler.start()
        # the window opens when the first experiment starts (after the lab's start and the cluster's)
        while not began and proc.poll() is None:
            if samples or _started(lab / "lab.db"):
                began.append(time.time())
            time.sleep(0.5)
        window = args.minutes * 60
        try:
            time.sleep(window)
        finally:
            stop.set()
            proc.send_signal(signal.SIGTERM)  # the lab cleans up like Ctrl-C, while its cluster still runs
            proc.wait(timeout=600)
            log.close()
        return _summary(lab / "lab.db", began[0], window, workers, samples, args) | {"judges": judges}


def _renice_this_thread(nice: int) -> int:
    """On a dask worker's one executing thread: its niceness (Linux: per thread), inherited by what it starts."""
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    return threading.get_native_id()


def _yield_to_the_lab(cluster: Any, nice: int) -> None:
    """The simulated workers' threads (and the git and agent processes they start) at niceness `nice`: on a real
    fleet they are other machines, so here they should take only the CPU the lab's loop and its judges leave."""
    if not nice:
        return
    with cluster.get_client() as client:
        futures = [client.submit(_renice_this_thread, nice, key=f"renice-{address}", workers=[address],
                                 allow_other_workers=False, pure=False) for address in cluster.scheduler.workers]
        client.gather(futures)


def _started(db: Path) -> bool:
    try:
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return bool(connection.execute("SELECT count(*) FROM experiments").fetchone()[0])
        finally:
            connection.close()
    except sqlite3.Error:
        return False


def _summary(db: Path, began: float, window: float, workers: int, samples: list[tuple[float, int, int]],
             args: argparse.Namespace) -> dict[str, Any]:
    end = began + window
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT started_at, finished_at FROM experiments").fetchall()
        judged = connection.execute("SELECT count(*) FROM events WHERE kind = 'judgment' AND at BETWEEN ? AND ?",
                                    (began, end)).fetchone()[0]
        # a candidate KILLed before its verdict (no report, a timeout) costs the judge nothing: count them apart
        unjudged = connection.execute("SELECT count(*) FROM experiments WHERE reasons LIKE '%is not judged%'"
                                      ).fetchone()[0]
        # J >= 2: verdicts started on each judge host within the window (spread over all J, or not), and how long
        # each took from its start on the host to its judgment in lab.db (real seconds, not scaled; with the wait
        # for the loop's next pass to record it)
        starts = {experiment: (at, json.loads(data)["judge"]["address"]) for experiment, at, data in
                  connection.execute("SELECT experiment, at, data FROM events WHERE kind = 'judge-host' "
                                     "AND at BETWEEN ? AND ? ORDER BY id", (began, end))}
        judgments = dict(connection.execute("SELECT experiment, at FROM events WHERE kind = 'judgment'").fetchall())
    finally:
        connection.close()
    on_host = [judgments[name] - at for name, (at, _) in starts.items() if name in judgments]
    busy = sum(min(finished or end, end) - max(started, began) for started, finished in rows
               if started < end and (finished or end) > began)
    finished = sum(1 for _, done in rows if done is not None and began <= done <= end)
    per_hour = 3600 / window * args.scale  # per hour of the unscaled fleet
    queue = [q for _, q, _ in samples]
    # the log's first line: "[orchard] ran on dask worker ...; timings setup 0.18 s, run 7.2 s, collect 0.03 s"
    timings = [{f"{key}_s": float(value) for key, value in TIMINGS.findall(line)}
               for log in db.parent.glob("logs/*.log")
               if (line := log.read_text(errors="replace").split("\n", 1)[0]).startswith("[orchard] ran on")]
    return {
        "remote_setup_s_median": statistics.median(t["setup_s"] for t in timings) if timings else None,
        "remote_collect_s_median": statistics.median(t["collect_s"] for t in timings) if timings else None,
        "workers": workers, "window_s": window,
        "finished_per_hour": round(finished * per_hour, 1), "judged_per_hour": round(judged * per_hour, 1),
        "killed_unjudged": unjudged,
        "verdicts_per_judge_host": sorted(collections.Counter(host for _, host in starts.values()).values(),
                                          reverse=True),
        "judge_host_verdict_s_median": round(statistics.median(on_host), 2) if on_host else None,
        "idle_share": round(1 - busy / (workers * window), 3),
        "queue_median": statistics.median(queue) if queue else None, "queue_max": max(queue, default=None),
        "queue_at_end": queue[-1] if queue else None,
        "queue_over_time": [(round(t), q) for t, q, _ in samples[:: max(1, len(samples) // 20)]],
    }


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds one_fleet: the lab is stopped, the cluster closed, the temp dir removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="2,8,32")
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--verdict-s", type=float, default=20.0)
    parser.add_argument("--backlog", type=int, default=400,
                        help="hypotheses in the backlog (enough for the window; ranking it is O(n) per loop pass)")
    parser.add_argument("--shared-baseline", type=int, default=0,
                        help="0: the stand-in verdict command; K>=1: the bench's suite, up to K candidates on one "
                             "base measured together (1: each alone, as before shared-baseline campaigns)")
    parser.add_argument("--judges", default="1",
                        help="judge counts to run each fleet size with: 1, the lab's machine; J>=2, J judge hosts "
                             "(dask workers with judge=1, a lock file each)")
    parser.add_argument("--workers-nice", type=int, default=19,
                        help="niceness of the simulated workers' threads and what they start (0: as the lab's)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    judge_counts = [int(j) for j in args.judges.split(",")]
    if args.shared_baseline > 1 and max(judge_counts) > 1:
        parser.error("--judges above 1 goes with no --shared-baseline above 1 (a judge host measures one "
                     "candidate at a time)")
    signal.signal(signal.SIGTERM, _terminate)
    results = []
    for count, judges in itertools.product((int(n) for n in args.workers.split(",")), judge_counts):
        load = os.getloadavg()
        result = one_fleet(count, judges, args) | {"load_at_start": [round(x, 2) for x in load],
                                                   "workers_nice": args.workers_nice}
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "queue_over_time"}), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "results": results},
                                        indent=2))


if __name__ == "__main__":
    main()
