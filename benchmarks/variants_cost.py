"""What held-out variants cost a verdict: its wall time with them and without, on the demo's suite.

The template's build is the baseline and the demo's count-with-dict patch the candidate (a win on
report/wall_ms, so the variants are judged, not just run). "Without" is a copy of the demo bench whose
scenarios declare `variants = []`; each suite gets its own fresh A/A calibration first, then verdicts with and
without alternate (so load drifts hit both alike). Prints each verdict's wall time, pairs and verdict, and the
medians, with the machine's load.

    python benchmarks/variants_cost.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from orchard import demo


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@orchard.invalid", *args],
                   cwd=cwd, check=True, capture_output=True)


def checkout(root: Path, name: str, patch: Path | None) -> Path:
    """The demo's target (with `patch` applied), built: its binary."""
    tree = demo.copy_template(demo.TARGET, root / name)
    git(tree, "init", "-q")
    if patch is not None:
        git(tree, "apply", str(patch))
    subprocess.run(["make", "-s"], cwd=tree, check=True, capture_output=True)
    return tree / demo.BINARY


def without_variants(root: Path) -> Path:
    """A copy of the demo bench whose scenarios all declare `variants = []`."""
    bench = root / "bench-without"
    shutil.copytree(demo.BENCH, bench)
    suite = bench / "suite.toml"
    suite.write_text(suite.read_text().replace("[[scenario]]\n", "[[scenario]]\nvariants = []\n"))
    return suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="verdicts of each kind (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orchard-variants-cost-") as tmp:
        root = Path(tmp)
        os.environ["ORCHARD_CACHE_DIR"] = str(root / "cache")
        from orchard.bench import calibrate, load_suite, run_verdict

        baseline = checkout(root, "template", None)
        candidate = checkout(root, "candidate", demo.HYPOTHESES.parent / "patches" / "count-with-dict.patch")
        suites = {"with": load_suite(demo.BENCH / "suite.toml"), "without": load_suite(without_variants(root))}
        for suite in suites.values():
            calibrate(suite, baseline, results=root / "results")
        times: dict[str, list[float]] = {kind: [] for kind in suites}
        load_before = os.getloadavg()[0]
        for repeat in range(args.repeats):
            for kind, suite in suites.items():
                start = time.perf_counter()
                verdict = run_verdict(suite, baseline, candidate, results=root / "results")
                took = time.perf_counter() - start
                times[kind].append(took)
                made = len(verdict.variants.checks) if verdict.variants else 0
                print(f"{repeat + 1} {kind:8} {took:6.1f} s  {verdict.pairs} pairs  {made} variants  "
                      f"{verdict.verdict}", flush=True)
        load_after = os.getloadavg()[0]
        medians = {kind: statistics.median(values) for kind, values in times.items()}
        print(f"\n{os.cpu_count()} cores, load average {load_before:.1f} before, {load_after:.1f} after")
        print(f"median verdict wall time: with variants {medians['with']:.1f} s, without {medians['without']:.1f} s "
              f"({medians['with'] / medians['without']:.2f}x)")


if __name__ == "__main__":
    main()
