"""False claims and detection power of orchard's verdict and of peers' rules, on this machine.

A small CPU-bound C program, its work scaled by an argument, is wrapped in
tiny executable scripts: a baseline, an identical copy (A/A), and candidates
doing 1%, 2% and 5% more work (sized on CPU time, which the machine's load
does not change). Every campaign measures one warm-up pair and then a fixed
number of pairs with orchard's own runner, each pair under the machine-wide
measurement lock and in a random order; each run's instructions are counted
in a separate untimed run (perf counters where they work, else cachegrind),
as a suite with `measure = ["instructions"]` does. Each metric (wall_ms,
cpu_ms, instructions) is then judged on the very same samples, as a suite
naming that one metric would be:

- orchard: A/A calibration noise (`calibration.compute` on a 40-pair A/A
  run of the baseline), then the adaptive looks of `campaign.run_verdict`
  (`AdaptivePlan`, `decide_metrics`, `settled`, `overall`): the verdict only
  sees the pairs measured up to the look where it stopped;
- pyperf-like: unpaired Welch t-test, two-sided, 5%;
- Google Benchmark compare.py: unpaired Mann-Whitney U, two-sided, 5%;
- asv: ratio of means beyond a fixed 10% factor;
- criterion: bootstrap 95% interval of the ratio of means entirely beyond a
  fixed 1% noise threshold.

Peers see every pair of the campaign (fixed n, their most favourable case).
Raw samples are kept in results/verdict-power/<stamp>.jsonl; `--reanalyse`
judges such a file again without measuring.

    .venv/bin/python benchmarks/verdict_power.py [--campaigns 100] [--work-ms 20]
    .venv/bin/python benchmarks/verdict_power.py --reanalyse results/verdict-power/<stamp>.jsonl
    .venv/bin/python benchmarks/verdict_power.py --counted [--campaigns 10] [--per-pair 2] [--counted-wall]
    .venv/bin/python benchmarks/verdict_power.py --equal [--campaigns 200] [--seeds 3] [--reanalyse JSONL]

`--counted` runs only its own section: real verdicts (`campaign.run_verdict`,
confined) on a suite judging instructions, A/A and +0.25% instructions,
counted per binary after a real A/A calibration, then `--per-pair` verdicts
with per-binary counting off (as before); it reports the claims and what
counting cost against the timed runs per verdict (docs/benchmarks-verdict.md
section 5).

`--equal` runs only its own section: the power of every rule at equal numbers of pairs (each peer given the pairs
orchard had when it decided, and every rule at 8, 12 and 20 pairs) on campaigns replayed from A/A pairs measured
here, a pool per seed (docs/benchmarks-verdict.md section 7).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from orchard import confine, process
from orchard.bench.campaigns import binary_counts
from orchard.bench.campaigns import campaign as bench_campaign
from orchard.bench.deciding import calibration, stats
from orchard.bench.deciding.decide import AdaptivePlan, decide_metrics, overall, settled
from orchard.bench.deciding.verdict import MetricNoise, MetricSpec, VerdictWord
from orchard.bench.lock import MeasurementLock
from orchard.bench.machine import machine_facts
from orchard.bench.measuring import instructions
from orchard.bench.results.store import RunWriter
from orchard.bench.sandbox.confinement import UNCONFINED, RunConfinement, confine_runs
from orchard.bench.sandbox.environment import isolated_env
from orchard.bench.sandbox.own_timing import own_timing
from orchard.bench.suites.suite import Suite
from orchard.bench.suites.suite_reader import load_suite
from orchard.jsonlines import read_jsonl

WORK_C = r"""
#include <stdint.h>
#include <stdlib.h>
/* xorshift steps; volatile keeps the compiler from folding the loop */
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    volatile uint64_t x = 88172645463325252ULL;
    for (long i = 0; i < n; i++) {
        uint64_t v = x;
        v ^= v << 13; v ^= v >> 7; v ^= v << 17;
        x = v;
    }
    return 0;
}
"""

# The suite a user would write to judge this program on one metric: its
# defaults (runs, looks, calibration pairs, alpha, the metric's floor) are
# the ones judged here.
SUITE_TOML = """
[suite]
name = "verdict-power-{metric}"

[[scenario]]
name = "work"
command = ["{{bin}}"]
{measure}

[[metric]]
name = "{metric}"
"""
METRICS = ("wall_ms", "cpu_ms", "instructions")

SHIFTS = (0.0, 0.01, 0.02, 0.05)
REGRESSION, IMPROVEMENT = "regressed", "improved"
BOOTSTRAP_RESAMPLES = 2000
CALIBRATION_ATTEMPTS = 3  # a failed calibration is run again, as a user would


@dataclass
class Lab:
    """The binaries and how each run is recorded."""

    directory: Path
    binaries: dict[str, Path]
    env: dict[str, str]
    lock: MeasurementLock
    writer: RunWriter
    rng: random.Random
    counter: instructions.Counter | None  # None: instructions are not counted (--metrics without them)
    confinement: RunConfinement = UNCONFINED

    def run(self, binary: Path) -> process.Capture:
        """One timed run, by the timer that starts it, in its own sandbox with --confined (as a verdict's)."""
        with own_timing(self.directory) as timing:
            command = timing.command([str(binary)])
            if self.confinement.confined:  # the timer inside the sandbox, as `measure.observe` runs a confined run
                mounts = self.confinement.mounts(cwd=self.directory, binary=binary,
                                                 reads=[self.directory, *timing.reads], writes=[], network=False)
                command = confine.argv(mounts, command)
            capture = timing.own(process.run(command, cwd=self.directory, env=self.confinement.env(self.env),
                                             timeout_s=120, pass_fds=timing.fds))
        if not capture.ok:
            sys.exit(f"{binary} failed ({capture.returncode}): {capture.stderr_text[-300:]}")
        return capture

    def count(self, binary: Path) -> instructions.Count:
        """The untimed counting run, after the timed one (as a suite's measure = ["instructions"])."""
        counted = instructions.count([binary], counter=self.counter, cwd=self.directory, env=self.env, timeout_s=120)
        if counted.instructions is None:
            sys.exit(f"{binary}: {counted.failure}")
        return counted

    def pairs(self, baseline: str, candidate: str, count: int, meta: dict[str, Any]) -> list[dict[str, Any]]:
        """A warm-up pair, then `count` pairs, each locked and in random order; returns their rows."""
        recorded = []
        for index in range(count + 1):
            order = [("baseline", baseline), ("candidate", candidate)]
            if self.rng.random() < 0.5:
                order.reverse()
            rows = []
            with self.lock:
                for role, name in order:
                    capture = self.run(self.binaries[name])
                    rows.append(
                        {
                            **meta,
                            **self.lock.metadata(),
                            "pair": index,
                            "warmup": index == 0,
                            "role": role,
                            "binary": name,
                            "order": "-".join(r for r, _ in order),
                            "wall_ms": round(capture.elapsed_ms, 4),
                            "cpu_ms": capture.cpu_ms,
                        }
                    )
            for row in rows:  # counted after releasing the lock, as a campaign does
                if self.counter is not None:
                    row.update(self.count(self.binaries[row["binary"]]).row_fields())
                self.writer.write(row)
                recorded.append(row)
        return recorded


def build(directory: Path, work_ms: float, env: dict[str, str]) -> tuple[dict[str, Path], dict[str, float]]:
    """Compile the program and write one wrapper per shift; returns (binaries, sizing facts)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        sys.exit("a C compiler (cc) is needed to build the workload")
    source = directory / "work.c"
    source.write_text(WORK_C)
    program = directory / "work"
    subprocess.run([compiler, "-O1", "-o", str(program), str(source)], check=True)

    def median_cpu_ms(iterations: int, runs: int = 15) -> float:
        # CPU time, not wall time: it does not depend on how loaded the machine is while sizing
        return statistics.median(process.run([program, str(iterations)], env=env).cpu_ms or 0.0 for _ in range(runs))

    fixed = median_cpu_ms(0)  # process start and exit, not scaled by the argument
    probe = 2_000_000
    per_iteration = max(1e-9, (median_cpu_ms(probe) - fixed) / probe)
    base_iterations = max(1, round((work_ms - fixed) / per_iteration))
    base_ms = fixed + base_iterations * per_iteration
    binaries: dict[str, Path] = {}

    def wrapper(name: str, iterations: int) -> None:
        path = directory / f"{name}.sh"
        path.write_text(f"#!/bin/sh\nexec {program} {iterations}\n")
        path.chmod(0o755)
        binaries[name] = path

    wrapper("baseline", base_iterations)
    for shift in SHIFTS:
        # scale the loop so the whole run's CPU time (fixed cost included) is `shift`
        # larger; shift 0 is an identical copy of the baseline under another name (A/A)
        wrapper(candidate_name(shift), round(base_iterations + shift * base_ms / per_iteration))
    return binaries, {
        "fixed_cpu_ms": fixed,
        "cpu_ns_per_iteration": per_iteration * 1e6,
        "baseline_iterations": base_iterations,
        "baseline_cpu_ms": base_ms,
    }


def label(shift: float) -> str:
    return "A/A" if shift == 0 else f"+{shift:.0%}"


def candidate_name(shift: float) -> str:
    return f"candidate-plus-{round(shift * 100)}pct"


# ---- the decision rules, each on (baseline, candidate) samples --------------------------------


def orchard_rule(suite: Suite, noise: dict[str, MetricNoise]) -> Callable[[list[float], list[float]], tuple[str, int]]:
    """orchard's verdict exactly as campaign.run_verdict reaches it: (overall verdict, pairs used)."""
    return replayed(suite, noise, AdaptivePlan(suite.min_runs, suite.runs, suite.alpha), suite.runs,
                    lambda n, metrics: settled(metrics))


def replayed(suite: Suite, noise: dict[str, MetricNoise], plan: AdaptivePlan, last: int,
             stop: Callable[[int, list[Any]], bool]) -> Callable[[list[float], list[float]], tuple[str, int]]:
    """A campaign's looks replayed on given samples: `plan`'s alpha at each look up to `last`, until `stop`."""

    def judge(a: list[float], b: list[float]) -> tuple[str, int]:
        metrics: list[Any] = []
        used = 0
        for n in range(1, last + 1):
            level = plan.alpha_at(n)
            if level is None:
                continue
            used = n
            metrics = decide_metrics(suite.metrics, {spec.key: (a[:n], b[:n]) for spec in suite.metrics}, noise,
                                     level)
            if stop(n, metrics):
                break
        return overall(metrics, []).verdict, used

    return judge


def direction(a: Sequence[float], b: Sequence[float]) -> str:
    return REGRESSION if np.mean(b) > np.mean(a) else IMPROVEMENT


def welch(a: list[float], b: list[float]) -> str | None:
    p = scipy_stats.ttest_ind(b, a, equal_var=False).pvalue
    return direction(a, b) if p < 0.05 else None


def mann_whitney(a: list[float], b: list[float]) -> str | None:
    p = scipy_stats.mannwhitneyu(b, a, alternative="two-sided").pvalue
    return direction(a, b) if p < 0.05 else None


def asv_factor(a: list[float], b: list[float]) -> str | None:
    ratio = float(np.mean(b) / np.mean(a))
    if ratio > 1.10:
        return REGRESSION
    if ratio < 1 / 1.10:
        return IMPROVEMENT
    return None


def criterion_rule(rng: np.random.Generator) -> Callable[[list[float], list[float]], str | None]:
    def judge(a: list[float], b: list[float]) -> str | None:
        xa, xb = np.asarray(a), np.asarray(b)
        ia = rng.integers(0, len(xa), (BOOTSTRAP_RESAMPLES, len(xa)))
        ib = rng.integers(0, len(xb), (BOOTSTRAP_RESAMPLES, len(xb)))
        change = xb[ib].mean(axis=1) / xa[ia].mean(axis=1) - 1.0
        low, high = np.percentile(change, [2.5, 97.5])
        if low > 0.01:
            return REGRESSION
        if high < -0.01:
            return IMPROVEMENT
        return None

    return judge


# ---- tallies and the report ----------------------------------------------------------------------


@dataclass
class Tally:
    claims: dict[str, Counter[str]] = field(default_factory=dict)  # rule -> outcome -> count
    pairs_used: list[int] = field(default_factory=list)
    verdicts: Counter[str] = field(default_factory=Counter)
    realised: list[float] = field(default_factory=list)  # median b/a per campaign
    noise: list[float] = field(default_factory=list)  # robust SD of the paired log-ratios per campaign
    campaigns: int = 0

    def add(self, rule: str, outcome: str | None) -> None:
        self.claims.setdefault(rule, Counter())[outcome or "none"] += 1


def wilson(successes: int, n: int) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    z = 1.96
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(successes: int, n: int) -> str:
    low, high = wilson(successes, n)
    return f"{successes / n:.0%} [{low:.0%}, {high:.0%}]"


def hits(tally: Tally, rule: str, shift: float) -> int:
    """Claims that count against `rule` at `shift`: either direction at the null, 'slower' for a real shift."""
    claims = tally.claims.get(rule, Counter())
    return claims[REGRESSION] + claims[IMPROVEMENT] if shift == 0 else claims[REGRESSION]


RULES = (
    "orchard verdict",
    "Welch t-test 5% (pyperf-like)",
    "Mann-Whitney U 5% (compare.py)",
    "10% factor on means (asv)",
    "bootstrap 95% CI beyond 1% (criterion)",
)


def paired(rows: Sequence[dict[str, Any]], metric: str) -> tuple[list[float], list[float]]:
    """(baseline, candidate) values of the judged pairs in `rows`, in pair order."""
    by_pair: dict[int, dict[str, float]] = {}
    for row in rows:
        if not row["warmup"]:
            by_pair.setdefault(row["pair"], {})[row["role"]] = float(row[metric])
    pairs = [by_pair[index] for index in sorted(by_pair)]
    return [p["baseline"] for p in pairs], [p["candidate"] for p in pairs]


@dataclass
class CalibrationCheck:
    noise: dict[str, MetricNoise] | None  # None: the calibration failed, orchard refuses to judge
    text: str


def calibrate_metric(suite: Suite, rows: Sequence[dict[str, Any]]) -> CalibrationCheck:
    """orchard's calibration.compute on the A/A pairs, for the suite's one metric."""
    (spec,) = suite.metrics
    a, b = paired(rows, spec.metric)
    metrics, failed = calibration.compute(suite.metrics, {spec.key: (a, b)}, suite.alpha)
    cal = metrics[spec.key]
    text = (
        f"{spec.metric}: A/A calibration of {cal.n} pairs: floor {cal.floor:.2%} (never below "
        f"{spec.min_floor:.0%}), robust SD {cal.sd:.2%}, interval [{cal.interval[0]:+.2%}, {cal.interval[1]:+.2%}]"
    )
    if failed:
        return CalibrationCheck(None, text + ": FAILED (interval excludes zero), orchard refuses to judge")
    return CalibrationCheck({k: v.noise() for k, v in metrics.items()}, text)


def analyse(suite: Suite, rows: Sequence[dict[str, Any]], seed: int) -> tuple[str, dict[float, Tally]]:
    """Judge every campaign in `rows` by every rule, on the suite's one metric."""
    (spec,) = suite.metrics
    attempts = sorted({row["attempt"] for row in rows if row["phase"] == "calibration"})
    cal = calibrate_metric(suite, [r for r in rows if r["phase"] == "calibration" and r["attempt"] == attempts[-1]])
    judge = orchard_rule(suite, cal.noise) if cal.noise is not None else None
    peers: dict[str, Callable[[list[float], list[float]], str | None]] = {
        RULES[1]: welch,
        RULES[2]: mann_whitney,
        RULES[3]: asv_factor,
        RULES[4]: criterion_rule(np.random.default_rng(seed)),
    }
    campaigns: dict[tuple[int, float], list[dict[str, Any]]] = {}
    for row in rows:
        if row["phase"] == "campaign":
            campaigns.setdefault((row["campaign"], row["shift"]), []).append(row)
    tallies = {shift: Tally() for shift in SHIFTS}
    for (_, shift), campaign_rows in sorted(campaigns.items()):
        a, b = paired(campaign_rows, spec.metric)
        tally = tallies[shift]
        tally.campaigns += 1
        ratios = np.asarray(b) / np.asarray(a)
        tally.realised.append(float(np.median(ratios)))
        tally.noise.append(stats.robust_sd(np.log(ratios)))
        if judge is not None:
            verdict, used = judge(a, b)
            tally.verdicts[verdict] += 1
            tally.pairs_used.append(used)
            tally.add(
                RULES[0],
                REGRESSION
                if verdict == VerdictWord.REGRESSED
                else IMPROVEMENT
                if verdict == VerdictWord.PASS
                else None,
            )
        for rule, decide in peers.items():
            tally.add(rule, decide(a, b))
    return cal.text, tallies


def report(metric: str, tallies: dict[float, Tally]) -> str:
    lines = [f"### {metric}", ""]
    cells = [f"{label(s)}: {'false claims' if s == 0 else 'detected'} (n={tallies[s].campaigns})" for s in SHIFTS]
    lines.append("| rule | " + " | ".join(cells) + " |")
    lines.append("| --- |" + " ---: |" * len(SHIFTS))
    for rule in RULES:
        row = []
        for shift in SHIFTS:
            tally = tallies[shift]
            counts = tally.claims.get(rule)
            if counts is None:
                row.append("refused")
                continue
            hits = counts[REGRESSION] + counts[IMPROVEMENT] if shift == 0 else counts[REGRESSION]
            wrong = f"; {counts[IMPROVEMENT]} said faster" if shift and counts[IMPROVEMENT] else ""
            row.append(rate(hits, tally.campaigns) + wrong)
        lines.append(f"| {rule} | " + " | ".join(row) + " |")
    lines += ["", "| orchard's verdicts | " + " | ".join(label(s) for s in SHIFTS) + " |"]
    lines.append("| --- |" + " ---: |" * len(SHIFTS))
    for verdict in ("REGRESSED", "NO-CHANGE", "INCONCLUSIVE", "PASS"):
        lines.append(f"| {verdict} | " + " | ".join(str(tallies[s].verdicts[verdict]) for s in SHIFTS) + " |")
    if all(tallies[s].pairs_used for s in SHIFTS):
        lines.append(
            "| mean pairs used | " + " | ".join(f"{statistics.mean(tallies[s].pairs_used):.1f}" for s in SHIFTS) + " |"
        )
    lines.append(
        "| realised shift (median over campaigns of the median b/a) | "
        + " | ".join(f"{statistics.median(tallies[s].realised) - 1:+.2%}" for s in SHIFTS)
        + " |"
    )
    lines.append(
        "| noise (median over campaigns of the robust SD of log b/a) | "
        + " | ".join(f"{statistics.median(tallies[s].noise):.2%}" for s in SHIFTS)
        + " |"
    )
    return "\n".join(lines) + "\n"


def suites(directory: Path, metrics: Sequence[str] = METRICS) -> dict[str, Suite]:
    loaded = {}
    for metric in metrics:
        path = directory / f"suite-{metric}.toml"
        measure = 'measure = ["instructions"]' if metric == instructions.METRIC else ""
        path.write_text(SUITE_TOML.format(metric=metric, measure=measure))
        loaded[metric] = load_suite(path)
    return loaded


def full_report(rows: Sequence[dict[str, Any]], header: list[str], seed: int, directory: Path,
                metrics: Sequence[str] = METRICS) -> str:
    parts = ["\n".join(header), ""]
    for metric, suite in suites(directory, metrics).items():
        cal_text, tallies = analyse(suite, rows, seed)
        parts += [report(metric, tallies), cal_text, "", shared_report(suite, rows, tallies)]
    parts.append(
        "Rates with 95% Wilson intervals. A/A counts a claim in either direction; "
        "the shifts count 'slower' claims ('said faster' counts the wrong-direction claims)."
    )
    return "\n".join(parts) + "\n"


def measure(args: argparse.Namespace, seed: int, directory: Path, writer: RunWriter) -> list[str]:
    """Calibrate and run every campaign, recording every run; returns the report's header."""
    started = time.time()
    load_before = os.getloadavg()
    metrics = args.metrics.split(",")
    suite = next(iter(suites(directory, metrics).values()))  # runs, looks and calibration pairs are shared
    env = isolated_env()
    binaries, sizing = build(directory, args.work_ms, env)
    counter = instructions.available() if instructions.METRIC in metrics else None
    directory.chmod(0o755)  # the sandbox uid reads the binaries (--confined, as root)
    confinement = confine_runs(True) if args.confined else UNCONFINED
    lab = Lab(directory, binaries, env, MeasurementLock("benchmarks/verdict_power.py"), writer, random.Random(seed),
              counter, confinement)
    print(confinement.note)
    print(f"machine: {json.dumps(machine_facts().to_dict())}; instruction counter: {counter}")
    print(f"seed {seed}; workload {json.dumps({k: round(v, 4) for k, v in sizing.items()})}")
    print(
        f"suite defaults: runs {suite.runs}, min_runs {suite.min_runs}, looks "
        f"{AdaptivePlan(suite.min_runs, suite.runs).looks}, calibration pairs {suite.calibration_runs}, "
        f"alpha {suite.alpha}",
        flush=True,
    )
    for attempt in range(1, CALIBRATION_ATTEMPTS + 1):
        rows = lab.pairs("baseline", "baseline", suite.calibration_runs, {"phase": "calibration", "attempt": attempt})
        checks = [calibrate_metric(s, rows) for s in suites(directory, metrics).values()]
        for check in checks:
            print(f"attempt {attempt}: {check.text}", flush=True)
        if all(check.noise is not None for check in checks):
            break
    for campaign in range(args.campaigns):
        shifts = list(SHIFTS)
        lab.rng.shuffle(shifts)  # the machine's drift is shared by every shift
        for shift in shifts:
            lab.pairs(
                "baseline",
                candidate_name(shift),
                suite.runs,
                {"phase": "campaign", "campaign": campaign, "shift": shift},
            )
        if args.shared:
            shared_rounds(lab, SHIFTS, suite.runs, {"campaign": campaign})
        print(f"  campaign {campaign + 1}/{args.campaigns} done ({time.time() - started:.0f}s)", flush=True)
    return [
        f"machine: {json.dumps(machine_facts().to_dict())}; instructions counted by {counter} in separate untimed runs",
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}; duration {time.time() - started:.0f}s; "
        f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}",
        f"seed {seed}; {args.campaigns} campaigns per shift, {suite.runs} pairs each after a warm-up pair; "
        f"baseline ~{sizing['baseline_cpu_ms']:.1f} ms CPU per run",
        f"calibration attempts: {attempt} (the last one is used)",
        f"measurement lock waits: {lab.lock.total_wait_ms / 1000:.1f}s in total",
        f"raw samples: {writer.path}",
        confinement.note,
    ]


# ---- shared-baseline campaigns (issue 24 item 2): K candidates against one baseline run per round ------------


def shared_rounds(lab: Lab, shifts: Sequence[float], count: int, meta: dict[str, Any]) -> None:
    """A warm-up round, then `count` rounds: the baseline once and every shift's candidate once, in a random order
    under the lock, as `bench.campaigns.rounds.RoundRunner` measures them (the rule below sees only the rounds it
    used)."""
    for index in range(count + 1):
        order: list[float | None] = [None, *shifts]
        lab.rng.shuffle(order)
        rows = []
        with lab.lock:
            for shift in order:
                name = "baseline" if shift is None else candidate_name(shift)
                capture = lab.run(lab.binaries[name])
                rows.append({**meta, **lab.lock.metadata(), "phase": "shared", "pair": index, "warmup": index == 0,
                             "shift": shift, "role": "baseline" if shift is None else "candidate", "binary": name,
                             "wall_ms": round(capture.elapsed_ms, 4), "cpu_ms": capture.cpu_ms})
        for row in rows:
            lab.writer.write(row)


def shared_report(suite: Suite, rows: Sequence[dict[str, Any]], tallies: dict[float, Tally]) -> str:
    """Per shift: orchard's separate campaigns (from `analyse`) beside the shared-baseline campaigns measured in
    the same session, detection (A/A: false claims) with Wilson intervals, pairs used, and runs per campaign."""
    (spec,) = suite.metrics
    attempts = sorted({row["attempt"] for row in rows if row["phase"] == "calibration"})
    cal = calibrate_metric(suite, [r for r in rows if r["phase"] == "calibration" and r["attempt"] == attempts[-1]])
    shared = [row for row in rows if row["phase"] == "shared" and not row["warmup"]]
    if cal.noise is None or not shared:
        return ""
    judge = orchard_rule(suite, cal.noise)  # each candidate as alone (shared_campaign.py), on its pairs
    claims: Counter[float] = Counter()
    used: dict[float, list[int]] = {shift: [] for shift in SHIFTS}
    runs: list[int] = []
    campaigns = sorted({row["campaign"] for row in shared})
    for campaign in campaigns:
        mine = [row for row in shared if row["campaign"] == campaign]
        base = {row["pair"]: float(row[spec.metric]) for row in mine if row["role"] == "baseline"}
        stopped = []
        for shift in SHIFTS:
            cand = {row["pair"]: float(row[spec.metric]) for row in mine if row["shift"] == shift}
            pairs = sorted(cand)
            verdict, n = judge([base[i] for i in pairs], [cand[i] for i in pairs])
            bad = verdict == VerdictWord.REGRESSED or (shift == 0 and verdict == VerdictWord.PASS)
            claims[shift] += bad
            used[shift].append(n)
            stopped.append(n)
        runs.append(sum(1 + sum(n >= i for n in stopped) for i in range(1, max(stopped) + 1)) + 1 + len(SHIFTS))
    separate_runs = [sum(2 * (n + 1) for n in ns) for ns in zip(*(tallies[s].pairs_used for s in SHIFTS),
                                                                 strict=True)]
    lines = [f"### {spec.metric}: shared-baseline campaigns ({len(SHIFTS)} candidates, one per shift) against "
             "separate campaigns", "",
             "| shift | separate: " + "claims (n) | shared: claims (n) | mean pairs separate / shared |",
             "| --- | ---: | ---: | ---: |"]
    for shift in SHIFTS:
        counts = tallies[shift].claims.get(RULES[0], Counter())
        hits = counts[REGRESSION] + (counts[IMPROVEMENT] if shift == 0 else 0)
        lines.append(f"| {label(shift)} | {rate(hits, tallies[shift].campaigns)} ({tallies[shift].campaigns}) | "
                     f"{rate(claims[shift], len(campaigns))} ({len(campaigns)}) | "
                     f"{statistics.mean(tallies[shift].pairs_used):.1f} / {statistics.mean(used[shift]):.1f} |")
    lines += ["", f"runs per set of {len(SHIFTS)} candidates (warm-up included): separate "
              f"{statistics.mean(separate_runs):.1f}, shared {statistics.mean(runs):.1f} "
              f"(ratio {statistics.mean(runs) / statistics.mean(separate_runs):.2f})"]
    return "\n".join(lines) + "\n"


# ---- the loud machine (issue 24 item 3): orchard beside the peers at 10% and 15% pair noise ---------------------

LOUD_SHIFTS = (0.0, 0.05, 0.10)
LOUD_NOISE = (0.10, 0.15)
LOUD_RUNS, LOUD_EXTRA = 20, 20  # the suite defaults: `runs`, and `extra_runs` (as many again)
LOUD_RULES = (
    "orchard verdict",
    "orchard before issue 24 (A/A half-width floor, no extra pairs)",
    "Welch t-test 5%, unpaired, first 20 pairs",
    "Mann-Whitney U 5%, unpaired, first 20 pairs",
    "bootstrap 95% CI beyond 1%, unpaired, first 20 pairs",
    "t-test 5% on the pairs' log-ratios, first 20 pairs",
    "Wilcoxon signed-rank 5% on the pairs, first 20 pairs",
    "bootstrap 95% CI of the mean log-ratio beyond 1%, first 20 pairs",
    "t-test 5% on the pairs' log-ratios, all 40 pairs",
    "Wilcoxon signed-rank 5% on the pairs, all 40 pairs",
    "bootstrap 95% CI of the mean log-ratio beyond 1%, all 40 pairs",
)


def paired_t(a: list[float], b: list[float]) -> str | None:
    """The t-test on the pairs' log-ratios, two-sided 5%: the peers' test given orchard's pairing."""
    d = np.log(np.asarray(b) / np.asarray(a))
    return direction(a, b) if scipy_stats.ttest_1samp(d, 0.0).pvalue < 0.05 else None


def signed_rank(a: list[float], b: list[float]) -> str | None:
    """Wilcoxon's signed-rank test on the pairs' log-ratios, two-sided 5%, from its exact null distribution
    (`stats.signed_rank_p_greater`: scipy's permutation test, which it takes on the ties pairs replayed with
    replacement give, costs a second a campaign)."""
    d = np.log(np.asarray(b) / np.asarray(a))
    p = 2 * min(stats.signed_rank_p_greater(d), stats.signed_rank_p_greater(-d))
    return direction(a, b) if p < 0.05 else None


def paired_bootstrap(rng: np.random.Generator) -> Callable[[list[float], list[float]], str | None]:
    def judge(a: list[float], b: list[float]) -> str | None:
        d = np.log(np.asarray(b) / np.asarray(a))
        means = d[rng.integers(0, len(d), (BOOTSTRAP_RESAMPLES, len(d)))].mean(axis=1)
        low, high = np.expm1(np.percentile(means, [2.5, 97.5]))
        return REGRESSION if low > 0.01 else IMPROVEMENT if high < -0.01 else None

    return judge


@dataclass
class LoudPool:
    """Measured A/A pairs of this machine, as (mean log, half log-ratio) per pair: what the campaigns replay.

    A pair's mean is what both of its runs shared (the machine's state then); its half log-ratio the noise
    between them. Replaying scales the half-ratios to the target pair noise and keeps the shared part, so the
    unpaired peers see the machine's real spread between pairs, and every rule sees the same samples.
    """

    means: np.ndarray
    halves: np.ndarray

    @property
    def sd(self) -> float:
        return stats.robust_sd(2 * self.halves)

    def campaign(self, rng: np.random.Generator, n: int, noise: float, shift: float) -> tuple[np.ndarray, np.ndarray]:
        """n pairs drawn with replacement, each in a random order (sign), log-ratio SD `noise`, shifted."""
        index = rng.integers(0, len(self.means), n)
        half = self.halves[index] * rng.choice([-1.0, 1.0], n) * noise / self.sd
        return np.exp(self.means[index] - half), np.exp(self.means[index] + half + math.log1p(shift))


def loud_orchard(plan: AdaptivePlan, noise: dict[str, MetricNoise], spec: MetricSpec,
                 a: np.ndarray, b: np.ndarray) -> tuple[str, int]:
    """orchard's verdict as `pairs.measure_pairs` reaches it under `plan`: (verdict, pairs used)."""
    metrics: list[Any] = []
    for n in range(1, plan.last + 1):
        level = plan.alpha_at(n)
        if level is None:
            continue
        metrics = decide_metrics([spec], {spec.key: (a[:n], b[:n])}, noise, level)
        if plan.stops(n, metrics):
            break
    return overall(metrics, []).verdict, n


def calibrated(rng: np.random.Generator, pool: LoudPool, spec: MetricSpec,
               noise_sd: float) -> tuple[dict[str, MetricNoise], np.ndarray]:
    """A replayed campaign's own A/A calibration (40 pairs, as a suite's default): orchard's noise for `spec`, and
    the calibration's log-ratios."""
    cal_a, cal_b = pool.campaign(rng, 40, noise_sd, 0.0)
    cal, _ = calibration.compute([spec], {spec.key: (list(cal_a), list(cal_b))}, 0.05)
    return {spec.key: cal[spec.key].noise()}, np.log(cal_b / cal_a)


def loud_campaigns(spec: MetricSpec, pool: LoudPool, noise_sd: float, campaigns: int,
                   seed: int) -> dict[float, Tally]:
    """Every rule on the same replayed campaigns; each campaign calibrates on its own 40 replayed A/A pairs."""
    rng = np.random.default_rng(seed)
    boot, paired_boot = criterion_rule(np.random.default_rng(seed + 1)), paired_bootstrap(np.random.default_rng(seed))
    plan = AdaptivePlan(8, LOUD_RUNS, 0.05, LOUD_EXTRA)
    before = AdaptivePlan(8, LOUD_RUNS, 0.10)  # one-sided 5% per claim, as the verdict tested before
    tallies = {shift: Tally() for shift in LOUD_SHIFTS}
    for shift in LOUD_SHIFTS:
        tally = tallies[shift]
        for _ in range(campaigns):
            noise, d = calibrated(rng, pool, spec, noise_sd)
            old = stats.hl_interval(d, 0.90)
            old_noise = {spec.key: MetricNoise(math.expm1((old.high - old.low) / 2), False, stats.robust_sd(d))}
            a, b = pool.campaign(rng, plan.last, noise_sd, shift)
            tally.campaigns += 1
            tally.noise.append(stats.robust_sd(np.log(b / a)))
            verdict, used = loud_orchard(plan, noise, spec, a, b)
            tally.verdicts[verdict] += 1
            tally.pairs_used.append(used)
            claims = {VerdictWord.REGRESSED: REGRESSION, VerdictWord.PASS: IMPROVEMENT}
            tally.add(LOUD_RULES[0], claims.get(VerdictWord(verdict)))
            tally.add(LOUD_RULES[1], claims.get(VerdictWord(loud_orchard(before, old_noise, spec, a, b)[0])))
            for offset, n, rules in ((2, LOUD_RUNS, (welch, mann_whitney, boot)),
                                     (5, LOUD_RUNS, (paired_t, signed_rank, paired_boot)),
                                     (8, plan.last, (paired_t, signed_rank, paired_boot))):
                for rule, decide in zip(LOUD_RULES[offset:offset + 3], rules, strict=True):
                    tally.add(rule, decide(list(a[:n]), list(b[:n])))
    return tallies


def loud_report(noise_sd: float, tallies: dict[float, Tally]) -> str:
    lines = [f"#### {noise_sd:.0%} pair noise", ""]
    cells = [f"{label(s)}: {'false claims' if s == 0 else 'detected'} (n={tallies[s].campaigns})"
             for s in LOUD_SHIFTS]
    lines += ["| rule | " + " | ".join(cells) + " |", "| --- |" + " ---: |" * len(LOUD_SHIFTS)]
    for rule in LOUD_RULES:
        row = []
        for shift in LOUD_SHIFTS:
            row.append(rate(hits(tallies[shift], rule, shift), tallies[shift].campaigns))
        lines.append(f"| {rule} | " + " | ".join(row) + " |")
    used = " | ".join(f"{np.mean(tallies[s].pairs_used):.1f}" for s in LOUD_SHIFTS)
    lines += ["", f"orchard's mean pairs used: {used} (A/A, +5%, +10%); verdicts: "
              + "; ".join(f"{label(s)} " + ", ".join(f"{v} {c}" for v, c in sorted(tallies[s].verdicts.items()))
                         for s in LOUD_SHIFTS)]
    return "\n".join(lines)


def measured_pool(args: argparse.Namespace, seed: int, directory: Path, writer: RunWriter,
                  meta: dict[str, Any]) -> tuple[LoudPool, str]:
    """Measure `--loud-pairs` A/A wall_ms pairs of the workload on this machine: the pool campaigns replay, and
    one line saying when, at what load, and what pair noise it had."""
    started, load_before = time.time(), os.getloadavg()
    env = isolated_env()
    binaries, _ = build(directory, args.work_ms, env)
    lab = Lab(directory, binaries, env, MeasurementLock(f"benchmarks/verdict_power.py {meta['phase']}"), writer,
              random.Random(seed), None)
    rows = lab.pairs("baseline", candidate_name(0.0), args.loud_pairs, meta)
    a, b = (np.log(np.asarray(v)) for v in paired(rows, "wall_ms"))
    pool = LoudPool((a + b) / 2, (b - a) / 2)
    return pool, (
        f"measured {args.loud_pairs} A/A wall_ms pairs of a ~{args.work_ms:.0f} ms CPU-bound program on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} in {time.time() - started:.0f}s, load "
        f"average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; lock waits "
        f"{lab.lock.total_wait_ms / 1000:.1f}s; measured pair noise (robust SD of log b/a) {pool.sd:.2%}"
    )


def loud(args: argparse.Namespace, seed: int, directory: Path, writer: RunWriter) -> str:
    """Measure this machine's wall-time noise on A/A pairs of the workload, then replay it at 10% and 15%."""
    pool, measured = measured_pool(args, seed, directory, writer, {"phase": "loud-aa"})
    (spec,) = suites(directory, ["wall_ms"])["wall_ms"].metrics
    parts = [
        f"machine: {json.dumps(machine_facts().to_dict())}",
        f"{measured}; raw rows {writer.path}",
        f"replayed at {', '.join(f'{n:.0%}' for n in LOUD_NOISE)} with {args.campaigns} campaigns per shift, "
        f"seed {seed}",
        "",
    ]
    for noise_sd in LOUD_NOISE:
        parts += [loud_report(noise_sd, loud_campaigns(spec, pool, noise_sd, args.campaigns, seed)), ""]
    parts.append("Rates with 95% Wilson intervals; A/A counts a claim in either direction, the shifts 'slower' claims.")
    return "\n".join(parts) + "\n"


# ---- power at equal numbers of pairs (issue 33 item 8): every rule on the pairs orchard used, and at 8, 12, 20 ----

EQUAL_NOISE = (0.03, 0.10)  # wall-time pair noise of a quiet machine (section 2's quiet run) and of a loud one
# the null, a small and a large shift in units of the pair noise, and AT_FLOOR: a shift of the campaign's own floor,
# where orchard's guarantee holds (a claim there is an error of its rule, a detection of the peers')
AT_FLOOR = -1.0
EQUAL_SHIFTS = (0.0, 0.5, 1.0, AT_FLOOR)
EQUAL_FIXED = (8, 12, 20)
AT_STOP = "at orchard's stop"
Z95 = 1.959963984540054  # the normal quantile of a two-sided 5% test


def z_rule(a: list[float], b: list[float]) -> str | None:
    """Means more than 1.96 standard errors apart (the normal quantile, no t correction): the z rule, unpaired."""
    xa, xb = np.asarray(a), np.asarray(b)
    se = math.sqrt(xa.var(ddof=1) / len(xa) + xb.var(ddof=1) / len(xb))
    return direction(a, b) if abs(xb.mean() - xa.mean()) > Z95 * se else None


def paired_z(a: list[float], b: list[float]) -> str | None:
    """The z rule on the pairs' log-ratios."""
    d = np.log(np.asarray(b) / np.asarray(a))
    return direction(a, b) if abs(d.mean()) > Z95 * d.std(ddof=1) / math.sqrt(len(d)) else None


EQUAL_PEERS: dict[str, Callable[[list[float], list[float]], str | None]] = {
    "Welch t-test 5% (pyperf-like), unpaired": welch,
    "Mann-Whitney U 5% (compare.py), unpaired": mann_whitney,
    "z rule 5%, unpaired": z_rule,
    "t-test 5% on the pairs' log-ratios": paired_t,
    "Wilcoxon signed-rank 5% on the pairs": signed_rank,
    "z rule 5% on the pairs' log-ratios": paired_z,
}


def beyond_floor(floor: float) -> dict[str, Callable[[list[float], list[float]], str | None]]:
    """The paired t-test and Wilcoxon asking orchard's question: a change beyond its floor, each side at 2.5%."""
    margin = math.log1p(floor)

    def rule(p_greater: Callable[[np.ndarray], float]) -> Callable[[list[float], list[float]], str | None]:
        def judge(a: list[float], b: list[float]) -> str | None:
            d = np.log(np.asarray(b) / np.asarray(a))
            return (REGRESSION if p_greater(d - margin) < 0.025 else IMPROVEMENT if p_greater(-d - margin) < 0.025
                    else None)

        return judge

    return {"t-test on the pairs beyond orchard's floor, 2.5% a side": rule(
                lambda x: float(scipy_stats.ttest_1samp(x, 0.0, alternative="greater").pvalue)),
            "Wilcoxon signed-rank on the pairs beyond orchard's floor, 2.5% a side": rule(
                stats.signed_rank_p_greater)}


VERDICT_CLAIMS = {VerdictWord.REGRESSED: REGRESSION, VerdictWord.PASS: IMPROVEMENT}


def equal_rules(n: int) -> dict[str, AdaptivePlan]:
    """orchard's rule at a fixed n: a suite with `runs = n` and no extra pairs (its looks from 8), and one look."""
    plans = {f"orchard, runs = {n}, extra_runs = 0": AdaptivePlan(min(8, n), n, 0.05)}
    if n > 8:
        plans[f"orchard, one look at {n}"] = AdaptivePlan(n, n, 0.05)
    return plans


def equal_campaigns(spec: MetricSpec, pool: LoudPool, noise_sd: float, campaigns: int,
                    seed: int) -> dict[float, Tally]:
    """Per shift (in units of `noise_sd`, or the campaign's own floor): orchard's verdict as a suite's defaults
    run it, every peer on the pairs orchard had when it decided, and every rule at each fixed n, all on the same
    replayed samples."""
    rng = np.random.default_rng(seed)
    plan = AdaptivePlan(8, LOUD_RUNS, 0.05, LOUD_EXTRA)
    tallies = {shift: Tally() for shift in EQUAL_SHIFTS}
    for shift, tally in tallies.items():
        for _ in range(campaigns):
            noise, _ = calibrated(rng, pool, spec, noise_sd)
            floor = spec.floor(noise[spec.key])
            a, b = pool.campaign(rng, plan.last, noise_sd, floor if shift == AT_FLOOR else shift * noise_sd)
            tally.campaigns += 1
            verdict, used = loud_orchard(plan, noise, spec, a, b)
            tally.pairs_used.append(used)
            tally.verdicts[verdict] += 1
            tally.add(f"{AT_STOP}: orchard verdict", VERDICT_CLAIMS.get(VerdictWord(verdict)))
            peers = EQUAL_PEERS | beyond_floor(floor)
            blocks = {AT_STOP: (used, {}), **{f"n = {n}": (n, equal_rules(n)) for n in EQUAL_FIXED}}
            for prefix, (n, plans) in blocks.items():
                for rule, fixed in plans.items():
                    tally.add(f"{prefix}: {rule}", VERDICT_CLAIMS.get(VerdictWord(loud_orchard(
                        fixed, noise, spec, a[:n], b[:n])[0])))
                for rule, decide in peers.items():
                    tally.add(f"{prefix}: {rule}", decide(list(a[:n]), list(b[:n])))
    return tallies


def equal_report(noise_sd: float, runs: Sequence[dict[float, Tally]]) -> str:
    """One table per noise level: each rule's rate per shift, the median over seeds with their range, and the
    pooled count; rows grouped by the pairs every rule was given."""
    names = ["null" if s == 0 else "its floor" if s == AT_FLOOR else f"+{s * noise_sd:.1%}" for s in EQUAL_SHIFTS]
    shifts = [f"{name}: {'false claims' if name == 'null' else 'claimed' if s == AT_FLOOR else 'detected'}"
              for name, s in zip(names, EQUAL_SHIFTS, strict=True)]
    used = " / ".join(f"{np.mean([n for run in runs for n in run[s].pairs_used]):.1f}" for s in EQUAL_SHIFTS)
    lines = [f"#### {noise_sd:.0%} pair noise", "",
             f"orchard's mean pairs used at its stop: {used} ({', '.join(names)})",
             "", "| pairs | rule | " + " | ".join(shifts) + " |", "| --- | --- |" + " ---: |" * len(EQUAL_SHIFTS)]
    for rule in runs[0][EQUAL_SHIFTS[0]].claims:
        prefix, name = rule.split(": ", 1)
        cells = []
        for shift in EQUAL_SHIFTS:
            rates = [100 * hits(run[shift], rule, shift) / run[shift].campaigns for run in runs]
            total = sum(run[shift].campaigns for run in runs)
            cells.append(f"{statistics.median(rates):.1f}% [{min(rates):.1f}, {max(rates):.1f}] "
                         f"({sum(hits(run[shift], rule, shift) for run in runs)}/{total})")
        lines.append(f"| {prefix} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def uptime() -> str:
    """`uptime`'s line, as the report states the machine's load: the load average alone hides how long it lasted."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def stored_pools(rows: Sequence[dict[str, Any]], path: Path) -> list[tuple[LoudPool, str]]:
    """The pools an earlier `--equal` measured, read back from its raw rows, one per seed."""
    pools = []
    for index in sorted({row["seed"] for row in rows if row.get("phase") == "equal-aa"}):
        a, b = (np.log(np.asarray(v)) for v in paired([r for r in rows if r.get("seed") == index], "wall_ms"))
        pool = LoudPool((a + b) / 2, (b - a) / 2)
        pools.append((pool, f"{len(a)} A/A wall_ms pairs read back from {path}; pair noise {pool.sd:.2%}"))
    return pools


def equal(args: argparse.Namespace, seed: int, directory: Path,
          pools: Callable[[int], tuple[LoudPool, str]], count: int) -> str:
    """For each of `count` seeds, a pool of A/A pairs (measured here, or read back), every noise level replayed
    from it."""
    (spec,) = suites(directory, ["wall_ms"])["wall_ms"].metrics
    parts = [f"machine: {json.dumps(machine_facts().to_dict())}", f"uptime before: {uptime()}"]
    runs: dict[float, list[dict[float, Tally]]] = {noise_sd: [] for noise_sd in EQUAL_NOISE}
    for index in range(count):
        pool, line = pools(index)
        parts.append(f"seed {seed + index}: {line}")
        print(parts[-1], flush=True)
        for noise_sd in EQUAL_NOISE:
            runs[noise_sd].append(equal_campaigns(spec, pool, noise_sd, args.campaigns, seed + index))
    parts += [f"uptime after: {uptime()}", f"{args.campaigns} campaigns per shift and seed, {count} seeds; each "
              "campaign calibrates on its own 40 replayed A/A pairs", ""]
    for noise_sd in EQUAL_NOISE:
        parts += [equal_report(noise_sd, runs[noise_sd]), ""]
    parts.append("Each cell: the median rate over the seeds [lowest, highest] (claims/campaigns, all seeds "
                 "together); at the null a claim in either direction counts, for a shift only 'slower'.")
    return "\n".join(parts) + "\n"


# ---- instruction counts per binary, not per pair (issue 24 item 5) ------------------------------

COUNTED_SUITE = """
[suite]
name = "verdict-power-counted"
calibration_runs = {calibration_runs}

[[scenario]]
name = "work"
command = ["{{bin}}"]
measure = ["instructions"]

[[metric]]
name = "instructions"
{wall}"""
COUNTED_SHIFTS = (0.0, 0.0025)  # A/A, and a shift in instructions just past the default 0.2% floor


def counted_binaries(directory: Path, work_ms: float, env: dict[str, str]) -> dict[float, Path]:
    """The baseline and one wrapper per shift, sized on instructions (counted here, unconfined, once each)."""
    _, sizing = build(directory, work_ms, env)
    program, base = directory / "work", int(sizing["baseline_iterations"])
    fixed, whole = (instructions.count([program, str(n)], counter=instructions.available(), env=env).instructions
                    for n in (0, base))
    assert fixed is not None and whole is not None, "instructions cannot be counted here"
    per_iteration = (whole - fixed) / base
    wrappers = {}
    for shift in (-1.0, *COUNTED_SHIFTS):  # -1: the baseline itself
        path = directory / f"counted-{'baseline' if shift < 0 else f'plus-{shift * 1e4:.0f}bp'}.sh"
        path.write_text(f"#!/bin/sh\nexec {program} {base + round(max(0.0, shift) * whole / per_iteration)}\n")
        path.chmod(0o755)
        wrappers[shift] = path
    return wrappers


def counted_verdict(suite: Suite, baseline: Path, candidate: Path, seed: int, results: Path) -> dict[str, Any]:
    """One real verdict (campaign.run_verdict, confined as the suite says): its instructions decision and costs."""
    load = os.getloadavg()[0]
    started = time.monotonic()
    verdict = bench_campaign.run_verdict(suite, baseline, candidate, seed=seed, results=results)
    total_s = time.monotonic() - started
    rows = read_jsonl(verdict.rows)
    counts = [r for r in rows if r.get("instructions_count_ms") is not None]
    metric = next(m for m in verdict.metrics if m.metric == instructions.METRIC)
    return {"verdict": str(verdict.verdict), "instructions": str(metric.verdict), "method": str(metric.method),
            "effect": metric.effect, "pairs": verdict.pairs, "counts": len(counts),
            "counting_s": sum(r["instructions_count_ms"] for r in counts) / 1000,
            "timed_s": sum(r["elapsed_ms"] for r in rows if r.get("step_kind") == "measured") / 1000,
            "total_s": total_s, "load": load}


def with_ratios(record: dict[str, Any]) -> dict[str, Any]:
    """Counting time over the timed runs' time, and over the rest of the verdict (sandboxes, lock, statistics)."""
    return {**record, "ratio": record["counting_s"] / record["timed_s"],
            "ratio_rest": record["counting_s"] / max(1e-9, record["total_s"] - record["counting_s"])}


def counted_report(records: Sequence[dict[str, Any]], header: list[str]) -> str:
    """Claims on instructions per shift (Wilson), and what counting cost against the timed runs, per verdict."""
    lines = [*header, "", "| per verdict | " + " | ".join(
        f"{'A/A' if s == 0 else f'+{s:.2%}'} per binary" for s in COUNTED_SHIFTS) + " | per pair (today's) |",
             "| --- |" + " ---: |" * (len(COUNTED_SHIFTS) + 1)]
    groups = [[r for r in records if r["shift"] == s and not r["per_pair"]] for s in COUNTED_SHIFTS]
    groups.append([r for r in records if r["per_pair"]])

    def cells(name: str, cell: Callable[[list[dict[str, Any]]], str]) -> None:
        lines.append(f"| {name} | " + " | ".join(cell(g) if g else "-" for g in groups) + " |")

    def median(key: str, unit: str = "") -> Callable[[list[dict[str, Any]]], str]:
        return lambda g: f"{statistics.median(r[key] for r in g):.2f}{unit}"

    cells("verdicts (n)", lambda g: str(len(g)))
    cells("instructions claimed (A/A: false claims)", lambda g: rate(
        sum(r["instructions"] in ("regressed", "improved") for r in g), len(g)))
    cells("counted per binary", lambda g: f"{sum(r['method'] == 'counted-per-binary' for r in g)}/{len(g)}")
    cells("counting runs", median("counts"))
    cells("pairs (after the warm-up)", median("pairs"))
    cells("counting time, s (median)", median("counting_s"))
    cells("timed runs' time, s (median)", median("timed_s"))
    cells("verdict's wall time, s (median)", median("total_s"))
    cells("counting / timed runs (median)", median("ratio", "x"))
    cells("counting / timed runs (max)", lambda g: f"{max(r['ratio'] for r in g):.2f}x")
    cells("counting / rest of the verdict (median)", median("ratio_rest", "x"))
    cells("load average (1 min) at the start, median", median("load"))
    return "\n".join(lines) + "\n"


def counted_section(args: argparse.Namespace, seed: int, directory: Path) -> str:
    """Real verdicts on a suite judging instructions (and `--counted-wall`: wall_ms), A/A and +0.25%, after one
    real A/A calibration; then `--per-pair` verdicts at +0.25% with per-binary counting off, as it was before."""
    started, rng = time.time(), random.Random(seed)
    env = isolated_env()
    wrappers = counted_binaries(directory, args.work_ms, env)
    directory.chmod(0o755)  # the sandbox uid reads the binaries
    path = directory / "suite-counted.toml"
    path.write_text(COUNTED_SUITE.format(calibration_runs=args.counted_calibration,
                                         wall='\n[[metric]]\nname = "wall_ms"\ntarget = false\n' if args.counted_wall
                                         else ""))
    suite = load_suite(path)
    results = args.results / "verdict-power-counted"
    load_before = os.getloadavg()[0]
    cal = bench_campaign.calibrate(suite, wrappers[-1.0], seed=seed, results=results)
    spread = cal.metrics[f"work/{instructions.METRIC}"].spread
    records = []
    for index in range(args.campaigns):
        for shift in rng.sample(COUNTED_SHIFTS, len(COUNTED_SHIFTS)):
            records.append(with_ratios({"shift": shift, "per_pair": False, **counted_verdict(
                suite, wrappers[-1.0], wrappers[shift], rng.randrange(1, 2**31), results)}))
        print(f"  counted campaign {index + 1}/{args.campaigns} done ({time.time() - started:.0f}s)", flush=True)
    share, binary_counts.TOLERANCE_SHARE = binary_counts.TOLERANCE_SHARE, -1.0  # nothing qualifies: per pair
    try:
        for _ in range(args.per_pair):
            records.append(with_ratios({"shift": COUNTED_SHIFTS[-1], "per_pair": True, **counted_verdict(
                suite, wrappers[-1.0], wrappers[COUNTED_SHIFTS[-1]], rng.randrange(1, 2**31), results)}))
    finally:
        binary_counts.TOLERANCE_SHARE = share
    with RunWriter(args.results, "verdict-power-counted") as writer:
        for record in records:
            writer.write(record)
    return counted_report(records, [
        f"machine: {json.dumps(machine_facts().to_dict())}; counter {instructions.available()}; "
        f"{cal.env_isolation and 'runs confined as the suite says'}",
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}; duration {time.time() - started:.0f}s; "
        f"load average before {load_before:.1f}, after {os.getloadavg()[0]:.1f}; seed {seed}",
        f"A/A calibration of {cal.runs} pairs: instructions spread {spread:.4%} over every run of the baseline; "
        f"judged: instructions{' and wall_ms (target = false)' if args.counted_wall else ''}; "
        f"work ~{args.work_ms} ms per run; raw records: {writer.path}",
    ])


def arguments() -> argparse.Namespace:
    """The command line, checked: a bad value stops here with one line and exit code 2."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=100, help="campaigns per shift (A/A included)")
    parser.add_argument("--work-ms", type=float, default=20.0, help="baseline CPU time per run")
    parser.add_argument("--seed", type=int, default=None, help="seed of pair orders and bootstrap")
    parser.add_argument("--results", type=Path, default=Path("results"), help="where raw samples go")
    parser.add_argument("--confined", action="store_true", help="every run in its own sandbox, as a verdict's")
    parser.add_argument("--metrics", default=",".join(METRICS), help="metrics to judge (without instructions: "
                        "no counting runs)")
    parser.add_argument("--shared", action="store_true", help="also measure shared-baseline campaigns (one "
                        "baseline run per round for every shift's candidate) and judge them beside the separate ones")
    parser.add_argument(
        "--reanalyse",
        type=Path,
        default=None,
        metavar="JSONL",
        help="judge the raw samples of an earlier run again instead of measuring",
    )
    parser.add_argument("--loud", action="store_true", help="the loud-machine table: measure this machine's A/A "
                        "wall-time noise, replay it at 10%% and 15%% pair noise (issue 24 item 3)")
    parser.add_argument("--loud-pairs", type=int, default=200, help="A/A pairs measured for --loud and --equal")
    parser.add_argument("--equal", action="store_true", help="power at equal numbers of pairs: every rule on the "
                        "pairs orchard used and at 8, 12 and 20 pairs, replayed from A/A pairs measured here at 3%% "
                        "and 10%% pair noise (issue 33 item 8)")
    parser.add_argument("--seeds", type=int, default=3, help="--equal: seeds, each with its own measured pool")
    parser.add_argument("--counted", action="store_true", help="only the per-binary instruction counting section: "
                        "real verdicts, A/A and +0.25%% instructions, with what counting cost")
    parser.add_argument("--counted-calibration", type=int, default=12, help="A/A pairs of --counted's calibration")
    parser.add_argument("--counted-wall", action="store_true", help="--counted's suite judges wall_ms too")
    parser.add_argument("--per-pair", type=int, default=3, help="--counted: verdicts counted per pair, for reference")
    args = parser.parse_args()
    if args.campaigns < 1:
        parser.error("--campaigns must be at least 1")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    return args


def main() -> None:
    args = arguments()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    if args.counted:
        with tempfile.TemporaryDirectory(prefix="orchard-verdict-power-") as tmp:
            print(counted_section(args, seed, Path(tmp)))
        return
    with tempfile.TemporaryDirectory(prefix="orchard-verdict-power-") as tmp:
        directory = Path(tmp)
        if args.reanalyse is not None and args.equal:  # the pools an earlier --equal measured, replayed again
            stored = stored_pools(read_jsonl(args.reanalyse), args.reanalyse)
            print(equal(args, seed, directory, stored.__getitem__, len(stored)))
            return
        if args.reanalyse is not None:
            rows = read_jsonl(args.reanalyse)
            header = [f"re-analysis of {args.reanalyse} ({len(rows)} rows), bootstrap seed {seed}"]
            print(full_report(rows, header, seed, directory, args.metrics.split(",")))
            return
        if args.equal:
            with RunWriter(args.results, "verdict-power-equal") as writer:
                text = equal(args, seed, directory, lambda index: measured_pool(
                    args, seed + index, directory, writer, {"phase": "equal-aa", "seed": index}), args.seeds)
                text += f"raw rows {writer.path}\n"
                writer.summary = lambda rows: text
            print(text)
            return
        if args.loud:
            with RunWriter(args.results, "verdict-power-loud") as writer:
                text = loud(args, seed, directory, writer)
                writer.summary = lambda rows: text
            print(text)
            return
        with RunWriter(args.results, "verdict-power") as writer:
            header = measure(args, seed, directory, writer)
            text = full_report(writer.rows, header, seed, directory, args.metrics.split(","))
            writer.summary = lambda rows: text
    print()
    print(text)


if __name__ == "__main__":
    main()
