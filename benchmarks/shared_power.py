"""Shared-baseline campaigns against separate ones, simulated: which multiplicity rule keeps the power per candidate.

K = 4 candidates (A/A, +1%, +2%, +5%) are judged either by K separate campaigns (today's `campaign.run_verdict`:
its adaptive looks, `extra_runs` past `runs` for an open metric) or by one shared campaign, one baseline run per
round, under each rule below. Every rule is orchard's own functions (`decide_metrics`, `AdaptivePlan`, `settled`,
`shared_campaign.hopeless`) replayed on the same simulated runs: log-normal, `pair_noise` the SD of a pair's
log-ratio, optionally with a random-walk drift of the machine between consecutive runs (`--drift`, in run SDs per
run): a pair's two runs are adjacent, a shared round's are up to K runs apart, which is what a shared campaign
loses on a real machine. The family-wise rows judge K identical candidates (sharing a baseline, or in K separate
campaigns) and count a campaign with any claim.

    .venv/bin/python benchmarks/shared_power.py --noise 0.03,0.10 [--drift 0,0.5] [--campaigns 300] [--seed 11]

The rules:

- bonferroni (the built design before issue 24's fix): alpha / K per candidate, rounds up to runs x 2K/(K+1), a
  candidate stopped at today's cap unless its estimate lies beyond its floor;
- dunnett: the same, at the per-comparison level that keeps the family-wise rate of K two-sided tests whose
  statistics correlate by 1/2 (they share the baseline's noise: cov(c_j - b, c_k - b) = var(b) = var(c - b) / 2);
- holm: the bonferroni rule, and once a candidate makes a claim its share of alpha goes to the others still
  measured (alpha recycling, applied to their later looks only: conservative);
- per candidate: no split, each candidate at the alpha a campaign of its own has, with that campaign's looks and
  `extra_runs`: what K separate verdicts control (the rate per candidate), at (K+1)/(2K) of their runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy import stats as scipy_stats
from verdict_power import label, rate, suites  # benchmarks/ is the script's own directory on sys.path

from orchard.bench.deciding import calibration
from orchard.bench.deciding.decide import AdaptivePlan, decide_metrics, overall
from orchard.bench.deciding.verdict import MetricNoise, MetricResult, VerdictWord
from orchard.bench.suites.suite import Suite

SHIFTS = (0.0, 0.01, 0.02, 0.05)
CLAIMS = (VerdictWord.REGRESSED, VerdictWord.PASS)


def dunnett_share(k: int, alpha: float, rho: float = 0.5) -> float:
    """The share of alpha each of k two-sided comparisons may test at so that, their statistics normal and
    correlated by `rho`, the chance of any false claim is alpha (Dunnett's many-to-one; Bonferroni's is 1/k)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)  # E over a standard normal shared part

    def any_claim(c: float) -> float:
        x, scale = np.sqrt(rho) * nodes, math.sqrt(1 - rho)
        inside = scipy_stats.norm.cdf((c + x) / scale) - scipy_stats.norm.cdf((-c + x) / scale)
        return 1.0 - float(np.sum(weights * inside**k) / math.sqrt(2 * math.pi))

    c = optimize.brentq(lambda c: any_claim(c) - alpha, 0.5, 10.0)
    return 2.0 * float(scipy_stats.norm.sf(c)) / alpha


@dataclass(frozen=True)
class Rule:
    """How a shared campaign judges each of its candidates."""

    name: str
    share: Callable[[int], float]  # of alpha, per candidate, given K
    plan: Callable[[Suite, int], AdaptivePlan]  # the looks of each candidate (at the full alpha)
    stop: Callable[[AdaptivePlan, Suite, int, list[MetricResult]], bool]
    recycle: bool = False


def _before_plan(suite: Suite, k: int) -> AdaptivePlan:
    """The built design's rounds: up to runs x 2K/(K+1), the runs of K campaigns of `runs` pairs."""
    return AdaptivePlan(suite.min_runs, math.ceil(suite.runs * 2 * k / (k + 1)), suite.alpha)


def _before_stop(plan: AdaptivePlan, suite: Suite, n: int, metrics: list[MetricResult]) -> bool:
    """Settled, at the last look, or unsettled past the last look within `runs` with no estimate beyond its
    floor (only a candidate that may yet claim was given the extra rounds)."""
    later = [look for look in plan.looks if look > n]
    hopeless = bool(later) and later[0] > suite.runs and not any(
        m.effect is not None and abs(m.effect) > m.floor for m in metrics)
    return plan.stops(n, metrics) or hopeless


def _separate_plan(suite: Suite, _k: int) -> AdaptivePlan:
    return AdaptivePlan(suite.min_runs, suite.runs, suite.alpha, suite.extra_runs)


def _separate_stop(plan: AdaptivePlan, _suite: Suite, n: int, metrics: list[MetricResult]) -> bool:
    return plan.stops(n, metrics)


RULES = (
    Rule("bonferroni (before)", lambda k: 1 / k, _before_plan, _before_stop),
    Rule("dunnett", lambda k: dunnett_share(k, 0.05), _before_plan, _before_stop),
    Rule("holm, alpha recycled", lambda k: 1 / k, _before_plan, _before_stop, recycle=True),
    Rule("per candidate (proposed)", lambda _k: 1.0, _separate_plan, _separate_stop),
)
SEPARATE = Rule("separate campaigns", lambda _k: 1.0, _separate_plan, _separate_stop)


def judge(suite: Suite, noise: dict[str, MetricNoise], rule: Rule, base: np.ndarray,
          cands: Sequence[np.ndarray]) -> list[tuple[str, int]]:
    """Each candidate's (verdict, pairs) in one shared campaign judged by `rule` (one candidate: separate)."""
    k = len(cands)
    spec = suite.metrics[0]
    shares = [rule.share(k)] * k
    plan = rule.plan(suite, k)
    metrics: list[list[MetricResult]] = [[] for _ in range(k)]
    done: dict[int, tuple[str, int]] = {}
    for n in range(1, plan.last + 1):
        claimed = []
        for j in range(k):
            mine = dataclasses.replace(plan, alpha=suite.alpha * shares[j])
            level = mine.alpha_at(n)
            if j in done or level is None:
                continue
            metrics[j] = decide_metrics([spec], {spec.key: (base[:n], cands[j][:n])}, noise, level)
            if rule.stop(mine, suite, n, metrics[j]):
                done[j] = (overall(metrics[j], []).verdict, n)
                claimed += [j] if done[j][0] in CLAIMS else []
        live = [j for j in range(k) if j not in done]
        if rule.recycle and live:
            for j in claimed:  # a rejected hypothesis passes its alpha on (Holm's step-down, sequentially)
                for other in live:
                    shares[other] += shares[j] / len(live)
                shares[j] = 0.0
        if not live:
            break
    return [done.get(j, (overall(metrics[j], []).verdict, plan.last)) for j in range(k)]


def _runs(pairs: Sequence[int], shared: bool) -> int:
    """Runs a set of candidates cost, warm-up included: 2 per pair apart, 1 + live per round shared."""
    if not shared:
        return sum(2 * (n + 1) for n in pairs)
    return 1 + len(pairs) + sum(1 + sum(n >= i for n in pairs) for i in range(1, max(pairs) + 1))


class Machine:
    """Simulated runs in time order: log-normal noise, plus a random walk `drift` run SDs per run."""

    def __init__(self, rng: np.random.Generator, run_sd: float, drift: float) -> None:
        self.rng, self.run_sd, self.drift = rng, run_sd, drift

    def runs(self, slots: int, count: int, shifts: Sequence[float]) -> np.ndarray:
        """`count` rounds of `slots` runs each in a random order; row s is subject s's runs (shifted)."""
        order = np.argsort(self.rng.random((count, slots)), axis=1)  # position in the round of each subject
        steps = self.rng.normal(0, self.run_sd * self.drift, count * slots)
        walk = np.cumsum(steps).reshape(count, slots)
        noise = self.rng.normal(0, self.run_sd, (count, slots))
        state = np.take_along_axis(walk, order, axis=1)
        logs = (state + noise).T + np.log1p(np.asarray(shifts))[:, None]
        return np.exp(logs)


def simulate(suite: Suite, pair_noise: float, drift: float, campaigns: int, seed: int) -> str:
    """Every rule on the same campaigns: per shift, claims with Wilson intervals, mean pairs and runs."""
    rng = np.random.default_rng(seed)
    machine = Machine(rng, pair_noise / math.sqrt(2), drift)
    spec = suite.metrics[0]
    cal_runs = machine.runs(2, suite.calibration_runs, (0.0, 0.0))
    metrics, _ = calibration.compute(suite.metrics, {spec.key: (list(cal_runs[0]), list(cal_runs[1]))}, suite.alpha)
    noise = {key: m.noise() for key, m in metrics.items()}
    rules = (SEPARATE, *RULES)
    hits = {rule.name: Counter[float]() for rule in rules}
    family = Counter[str]()
    pairs: dict[str, list[list[int]]] = {rule.name: [] for rule in rules}
    k, longest = len(SHIFTS), 2 * suite.runs + suite.extra_runs
    for _ in range(campaigns):
        apart = [machine.runs(2, longest, (0.0, s)) for s in SHIFTS]
        together = machine.runs(k + 1, longest, (0.0, *SHIFTS))
        nulls = machine.runs(k + 1, longest, (0.0,) * (k + 1))
        nulls_apart = [machine.runs(2, longest, (0.0, 0.0)) for _ in SHIFTS]
        for rule in rules:
            if rule is SEPARATE:
                got = [judge(suite, noise, rule, runs[0], [runs[1]])[0] for runs in apart]
                null = [judge(suite, noise, rule, runs[0], [runs[1]])[0][0] for runs in nulls_apart]
            else:
                got = judge(suite, noise, rule, together[0], list(together[1:]))
                null = [v for v, _ in judge(suite, noise, rule, nulls[0], list(nulls[1:]))]
            for shift, (verdict, _) in zip(SHIFTS, got, strict=True):
                hits[rule.name][shift] += verdict == VerdictWord.REGRESSED or (shift == 0 and verdict in CLAIMS)
            pairs[rule.name].append([n for _, n in got])
            family[rule.name] += any(v in CLAIMS for v in null)
    lines = [f"simulated, pair noise {pair_noise:.0%}, drift {drift:g} run SD per run, {campaigns} campaigns, "
             f"K = {k}, A/A floor {spec.floor(noise[spec.key]):.2%}", "",
             "| rule | " + " | ".join(label(s) for s in SHIFTS) + " | family-wise, K identical | mean pairs "
             "(A/A, +1, +2, +5%) | runs per set of K (vs separate) |", "| --- |" + " ---: |" * (len(SHIFTS) + 3)]
    separate_runs = statistics.mean(_runs(p, False) for p in pairs[SEPARATE.name])
    for rule in rules:
        used = " / ".join(f"{statistics.mean(p[i] for p in pairs[rule.name]):.1f}" for i in range(k))
        runs = statistics.mean(_runs(p, rule is not SEPARATE) for p in pairs[rule.name])
        lines.append(f"| {rule.name} | " + " | ".join(rate(hits[rule.name][s], campaigns) for s in SHIFTS)
                     + f" | {rate(family[rule.name], campaigns)} | {used} | {runs:.0f} ({runs / separate_runs:.2f}) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noise", default="0.03,0.10", help="pair noises (SD of a pair's log-ratio)")
    parser.add_argument("--drift", default="0", help="random-walk drift, run SDs per run (e.g. 0,0.5)")
    parser.add_argument("--campaigns", type=int, default=300)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orchard-shared-power-") as tmp:
        suite = suites(Path(tmp), ["wall_ms"])["wall_ms"]
        for drift in (float(d) for d in args.drift.split(",")):
            for noise in (float(n) for n in args.noise.split(",")):
                print(simulate(suite, noise, drift, args.campaigns, args.seed), flush=True)


if __name__ == "__main__":
    main()
