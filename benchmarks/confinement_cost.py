"""What confining a measured run costs: the same run unconfined, in a bubblewrap sandbox of its own (as before
issue 33), started fresh in its side's sandbox (`bench/sandbox/run_sandbox.py`, what verdicts do now where orchard is
root), and the same under a lab's default `[workers]` limits (what a lab's verdicts do: a process budget, a pids
cgroup, among them).

Two scenarios: `/bin/true` (the sandbox's whole fixed cost) and the demo's
`report` scenario (the wordfreq report on the suite's large corpus, built from
the embedded demo target with `make`). Runs go through orchard's own
`measure.observe`: for each mode, the row's `elapsed_ms` and `cpu_ms` as a
verdict records them (confined: the program's own, timed inside its
sandbox) and the wall time of the whole `observe` call (what a verdict
pays per run, the sandbox's set-up included). The four modes alternate run
by run (so momentary load hits them alike), after a warm-up, holding the
machine-wide measurement lock. Prints the medians per mode and repeat, the
per-run cost of each confined mode (its whole call minus the unconfined
one), and the load average before and after.

    .venv/bin/python benchmarks/confinement_cost.py [--runs 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import orchard.demo
from orchard.bench.lock import MeasurementLock
from orchard.bench.machine import machine_facts
from orchard.bench.measuring.measure import RunSpec, Workbench, observe, workbench
from orchard.bench.sandbox.confinement import UNCONFINED, confine_runs
from orchard.bench.suites.suite import Scenario, Suite
from orchard.bench.suites.suite_reader import load_suite
from orchard.lab.config.sections import WorkersConfig

WARMUP = 3
WHAT = ("elapsed", "cpu", "call")
MODES = ("unconfined", "own", "side", "lab")
TRUE_SUITE = """[suite]
name = "true"

[[scenario]]
name = "true"
command = ["{bin}"]

[[metric]]
name = "wall_ms"
"""


def demo(root: Path) -> tuple[Suite, Path]:
    """The demo's suite (in a copy readable by the sandbox uid) and its built wordfreq."""
    source = Path(orchard.demo.__file__).parent
    shutil.copytree(source / "target", root / "target")
    shutil.copytree(source / "bench", root / "bench")
    subprocess.run(["make", "-s", "build"], cwd=root / "target", check=True, capture_output=True)
    return load_suite(root / "bench" / "suite.toml"), root / "target" / "build" / "wordfreq"


def series(bench: Workbench, scenario: Scenario, binary: Path, runs: int) -> dict[tuple[str, str], list[float]]:
    """Per (mode, what): recorded elapsed_ms and cpu_ms, and the whole call's ms; the modes alternating run by run."""
    modes = {"unconfined": dataclasses.replace(bench, confinement=UNCONFINED),
             "own": dataclasses.replace(bench, confinement=confine_runs(True), sandboxes=None),
             "side": dataclasses.replace(bench, confinement=confine_runs(True)),
             "lab": dataclasses.replace(bench, confinement=confine_runs(True, limits=WorkersConfig().limits()))}
    out: dict[tuple[str, str], list[float]] = {(mode, what): [] for mode in modes for what in WHAT}
    spec = RunSpec("baseline", {"name": "baseline"}, 0, {}, {"wall_ms"})
    for index in range(WARMUP + runs):
        for mode, variant in (list(modes.items()) if index % 2 else reversed(modes.items())):
            started = time.perf_counter_ns()
            observation = observe(variant, scenario, binary, spec)
            call_ms = (time.perf_counter_ns() - started) / 1e6
            assert observation.ok, (mode, observation.failure)
            if index >= WARMUP:
                for what, value in zip(WHAT, (observation.row["elapsed_ms"], observation.row["cpu_ms"], call_ms),
                                       strict=True):
                    out[mode, what].append(float(value))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    note = confine_runs(True).note
    print(machine_facts().describe())
    print(note)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        (root / "true.toml").write_text(TRUE_SUITE)
        demo_suite, wordfreq = demo(root)
        cases = [(load_suite(root / "true.toml"), "true", Path("/bin/true")), (demo_suite, "report", wordfreq)]
        modes = "unconfined / own sandbox / side's sandbox / side's, a lab's limits"
        print(f"| scenario | repeat | elapsed_ms {modes} | cpu_ms {modes} | whole call ms {modes} "
              "| cost per run ms, own / side's / lab's |")
        print("| --- | --- | --- | --- | --- | --- |")
        for suite, name, binary in cases:
            scenario = next(s for s in suite.scenarios if s.name == name)
            with workbench(suite) as bench:
                for repeat in range(1, args.repeats + 1):
                    with MeasurementLock("orchard benchmarks/confinement_cost.py"):
                        times = series(bench, scenario, binary, args.runs)
                    med = {key: statistics.median(values) for key, values in times.items()}
                    cells = [" / ".join(f"{med[mode, what]:.2f}" for mode in MODES) for what in WHAT]
                    costs = " / ".join(f"{med[mode, 'call'] - med['unconfined', 'call']:+.2f}" for mode in MODES[1:])
                    print(f"| {name} | {repeat} | {' | '.join(cells)} | {costs} |")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; {args.runs} runs per mode "
          f"and repeat after {WARMUP} warm-up runs")


if __name__ == "__main__":
    main()
