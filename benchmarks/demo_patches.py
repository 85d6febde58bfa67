"""Measure the effect of every demo patch with the real verdict.

For each hypothesis of the embedded demo: a git repository made from the
target template, the hypothesis's patch applied, `make`, and a verdict of
the result against the template's own build on the demo bench's suite.
Prints a Markdown table (the figures in src/orchard/demo/README.md come from
it). The A/A calibration is made fresh in a private cache, so the figures
describe this machine now. Patches that the lab kills before measuring
(failed tests, out of scope, bench touched) are measured too, to show what
their numbers would have been.

    python benchmarks/demo_patches.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from orchard import demo


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@orchard.invalid", *args],
                   cwd=cwd, check=True, capture_output=True)


def build(checkout: Path) -> Path:
    subprocess.run(["make", "-s"], cwd=checkout, check=True, capture_output=True)
    return checkout / demo.BINARY


def effect(metric) -> str:  # metric: orchard.bench.MetricResult
    if metric.effect is None:
        return "-"
    low, high = metric.interval or (metric.effect, metric.effect)
    return f"{metric.effect:+.1%} [{low:+.1%}, {high:+.1%}] {metric.verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="pairs per verdict and for the calibration (default: the suite's runs and calibration_runs)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orchard-demo-patches-") as tmp:
        root = Path(tmp)
        os.environ["ORCHARD_CACHE_DIR"] = str(root / "cache")  # read when the calibration is saved and loaded
        from orchard.bench import calibrate, load_suite, run_verdict

        template = demo.copy_template(demo.TARGET, root / "template")
        git(template, "init", "-q")
        git(template, "add", "-A")
        git(template, "commit", "-q", "-m", "template")
        baseline = build(template)
        suite = load_suite(demo.BENCH / "suite.toml")
        calibration = calibrate(suite, baseline, runs=args.runs, results=root / "results")
        with open(demo.HYPOTHESES, "rb") as handle:
            hypotheses = tomllib.load(handle)["hypothesis"]
        keys = [spec.key for spec in suite.metrics]
        print(
            f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.1f}; python {platform.python_version()}; "
            f"{calibration.runs} A/A pairs, {args.runs or suite.runs} pairs at most per verdict"
        )
        floors = ", ".join(f"{key} {m.floor:.1%}" for key, m in calibration.metrics.items() if not m.deterministic)
        print(f"A/A offsets from zero (a floor is at least the suite's minimum): {floors}\n")
        print("| hypothesis | verdict | n | " + " | ".join(keys) + " | medians (baseline -> candidate) |")
        print("|---|---|---:|" + "---|" * (len(keys) + 1))
        for hypothesis in hypotheses:
            checkout = root / hypothesis["id"]
            git(root, "clone", "-q", str(template), str(checkout))
            git(checkout, "apply", str(demo.HERE / hypothesis["patch"]))
            result = run_verdict(suite, baseline, build(checkout), runs=args.runs, results=root / "results")
            decision = result  # a Verdict carries its verdict word, metrics and gates
            by_key = {m.key: m for m in decision.metrics}
            cells = [effect(by_key[key]) if key in by_key else "-" for key in keys]
            medians = "; ".join(
                f"{m.key} {m.baseline_median:.6g} -> {m.candidate_median:.6g}"
                for m in decision.metrics
                if m.baseline_median is not None and m.candidate_median is not None
            )
            gates = "; ".join(f"{g.name}: {g.detail}" for g in decision.gates if not g.passed)
            print(
                f"| {hypothesis['id']} | {decision.verdict} | {result.pairs} | "
                + " | ".join(cells)
                + f" | {medians or gates} |"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
