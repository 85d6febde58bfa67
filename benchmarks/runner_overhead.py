"""How much time orchard's runner adds around a command that does nothing.

Times `/bin/true` in one session: orchard's `process.run` (the elapsed_ms it
records, and the wall time of the whole call as its caller pays it: how an
unconfined measured run was timed before the timer started it), a bare
`subprocess.run` without and with captured output (perf_counter around the
call), and a measured run as a verdict makes it, started by the timer
(`bench/sandbox/own_timing.py`): unconfined (`--no-confine`) and confined (bubblewrap,
the timer inside; as a verdict runs them, fresh in their side's sandbox where
orchard is root), each the elapsed_ms it records and the whole call, all
interleaved run by run; and hyperfine without a shell (`-N`, its own per-run
times from `--export-json`) as one batch per repetition. Each
repetition is 100 runs per method after a short warm-up and holds the
machine-wide measurement lock.

    .venv/bin/python benchmarks/runner_overhead.py [--runs 100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from orchard import process
from orchard.bench.lock import MeasurementLock
from orchard.bench.machine import machine_facts
from orchard.bench.sandbox.confinement import UNCONFINED, RunConfinement, confine_runs
from orchard.bench.sandbox.environment import isolated_env
from orchard.bench.sandbox.own_timing import own_timing
from orchard.bench.sandbox.run_sandbox import Sandboxes

COMMAND = ["/bin/true"]
WARMUP = 5
RECORDED = "orchard runner, recorded elapsed_ms"
CALL = "orchard runner, whole run() call"
UNCONFINED_RECORDED = "measured run unconfined (timer), recorded elapsed_ms"
UNCONFINED_CALL = "measured run unconfined (timer), whole call"
CONFINED_RECORDED = "orchard runner confined, recorded elapsed_ms"
UNCONFINED_BATCH = "measured run unconfined (timer), back to back, recorded elapsed_ms"
CONFINED_BATCH = "measured run confined, back to back, recorded elapsed_ms"
CONFINED_CALL = "orchard runner confined, whole call"
BARE = "subprocess.run, no pipes"
CAPTURE = "subprocess.run, capture_output=True"


def timed(call: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter_ns()
    result = call()
    return (time.perf_counter_ns() - started) / 1e6, result


SIDE = Sandboxes()  # the confined runs' side, as a verdict's workbench holds it


def measured_run(env: dict[str, str], confinement: RunConfinement, root: Path) -> process.Capture:
    """One run of COMMAND as `measure.observe` runs a scenario: started by the timer, in its sandbox if confined."""
    with own_timing(root) as timing:
        argv = confinement.wrap(COMMAND, binary=Path(COMMAND[0]), suite_dir=root, root=root, results_file=None,
                                loopback=False, timing=timing, sandboxes=SIDE)
        return timing.own(process.run(argv, cwd=root, env=confinement.env(env), pass_fds=timing.fds))


def in_process_runs(runs: int, env: dict[str, str], rng: random.Random, root: Path) -> dict[str, list[float]]:
    """orchard's runner and bare subprocess.run, interleaved run by run in a shuffled order.

    Interleaving puts every method under the same momentary load: on a
    shared machine, batches taken one after another differ more than the
    methods do.
    """
    calls: dict[str, Callable[[], object]] = {
        CALL: lambda: process.run(COMMAND, env=env),
        BARE: lambda: subprocess.run(COMMAND, env=env, check=True),
        CAPTURE: lambda: subprocess.run(COMMAND, env=env, check=True, capture_output=True),
        UNCONFINED_CALL: lambda: measured_run(env, UNCONFINED, root),
        CONFINED_CALL: lambda: measured_run(env, confinement, root),
    }
    confinement = confine_runs(True, reads=[root])
    recorded = {CALL: RECORDED, UNCONFINED_CALL: UNCONFINED_RECORDED, CONFINED_CALL: CONFINED_RECORDED}
    times: dict[str, list[float]] = {**{name: [] for name in recorded.values()}, **{name: [] for name in calls}}
    for index in range(WARMUP + runs):
        order = list(calls)
        rng.shuffle(order)
        for name in order:
            elapsed, result = timed(calls[name])
            if index < WARMUP:
                continue
            times[name].append(elapsed)
            if isinstance(result, process.Capture):
                assert result.returncode == 0
                times[recorded[name]].append(result.elapsed_ms)
    return times


def batch_runs(runs: int, env: dict[str, str], root: Path) -> dict[str, list[float]]:
    """Measured runs back to back, unconfined then confined, the time each records: as hyperfine runs its batch,
    and as a campaign's runs follow one another (nothing else run between them to cool the caches)."""
    confinement = confine_runs(True, reads=[root])
    found: dict[str, list[float]] = {}
    for name, confining in ((UNCONFINED_BATCH, UNCONFINED), (CONFINED_BATCH, confinement)):
        recorded = [measured_run(env, confining, root).elapsed_ms for _ in range(WARMUP + runs)]
        found[name] = recorded[WARMUP:]
    return found


def hyperfine_runs(runs: int, env: dict[str, str], hyperfine: str) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="orchard-overhead-") as tmp:
        export = Path(tmp) / "hyperfine.json"
        subprocess.run(
            [hyperfine, "-N", "--warmup", str(WARMUP), "--runs", str(runs), "--style", "none",
             "--export-json", str(export), " ".join(COMMAND)],
            env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        (result,) = json.loads(export.read_text())["results"]
        return [t * 1000.0 for t in result["times"]]


def p90(values: list[float]) -> float:
    return float(np.percentile(values, 90))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs per method per repetition")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions")
    parser.add_argument("--seed", type=int, default=1, help="seed of the interleaving order")
    args = parser.parse_args()
    hyperfine = shutil.which("hyperfine")
    if hyperfine is None:
        sys.exit("hyperfine is not installed (apt-get install -y hyperfine); it is needed for the comparison only")
    version = subprocess.run([hyperfine, "--version"], capture_output=True, text=True).stdout.strip()
    env = isolated_env()
    rng = random.Random(args.seed)
    hyperfine_name = f"{version} -N"
    names = [RECORDED, CALL, UNCONFINED_RECORDED, UNCONFINED_CALL, CONFINED_RECORDED, CONFINED_CALL, UNCONFINED_BATCH,
             CONFINED_BATCH, BARE, CAPTURE, hyperfine_name]
    per_rep: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    paired: dict[str, list[float]] = {BARE: [], CAPTURE: []}  # per-repetition median of per-round ratios
    lock = MeasurementLock("benchmarks/runner_overhead.py")
    print(f"machine: {machine_facts().describe()}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {os.getloadavg()[0]:.1f}")
    print(f"{args.repeats} repetitions x {args.runs} runs of {' '.join(COMMAND)} per method, warm-up {WARMUP}; "
          f"in-process methods interleaved run by run (order seed {args.seed}), hyperfine's batch "
          "before or after them in alternate repetitions")
    root = Path(tempfile.mkdtemp(prefix="orchard-overhead-"))
    root.chmod(0o755)
    for rep in range(args.repeats):
        with lock:
            if rep % 2:
                measured = in_process_runs(args.runs, env, rng, root) | batch_runs(args.runs, env, root)
                measured[hyperfine_name] = hyperfine_runs(args.runs, env, hyperfine)
            else:
                fine = hyperfine_runs(args.runs, env, hyperfine)
                measured = {**in_process_runs(args.runs, env, rng, root), **batch_runs(args.runs, env, root),
                            hyperfine_name: fine}
        for name in names:
            per_rep[name].append((statistics.median(measured[name]), p90(measured[name])))
        for name in paired:
            ratios = (r / b for r, b in zip(measured[RECORDED], measured[name], strict=True))
            paired[name].append(statistics.median(ratios))
        print(f"  repetition {rep + 1}: lock wait {lock.last_wait_ms:.0f} ms; medians "
              + ", ".join(f"{statistics.median(measured[name]):.3f}" for name in names) + " ms")
    SIDE.close()
    shutil.rmtree(root, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}; lock waits {lock.total_wait_ms / 1000:.1f}s in total")
    print()
    print("| method | median ms (median of repetitions) | p90 ms | repetition medians |")
    print("| --- | ---: | ---: | --- |")
    summary = {}
    for name, reps in per_rep.items():
        med = statistics.median(m for m, _ in reps)
        tail = statistics.median(p for _, p in reps)
        summary[name] = med
        print(f"| {name} | {med:.3f} | {tail:.3f} | {', '.join(f'{m:.3f}' for m, _ in reps)} |")
    reference = {"hyperfine": summary[hyperfine_name], "bare subprocess.run": summary[BARE],
                 "subprocess.run with capture": summary[CAPTURE]}
    print()
    for label, value in reference.items():
        print(f"ratio to {label}: " + "; ".join(f"{name} {summary[name] / value:.2f}" for name in names[:8]))
    print(f"confinement's cost per run (confined whole call - unconfined whole call, both timed by the timer): "
          f"{summary[CONFINED_CALL] - summary[UNCONFINED_CALL]:.3f} ms")
    for name, ratios in paired.items():
        print(f"paired ratio, orchard recorded elapsed_ms / {name} in the same round: median "
              f"{statistics.median(ratios):.2f} (repetitions: {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
