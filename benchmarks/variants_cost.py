"""What held-out variants cost a verdict: its wall time with them and without, on a target's suite.

`--target demo` (the default): the template's build is the baseline and the demo's count-with-dict patch the
candidate (a win on report/wall_ms, so the variants are judged, not just run). `--target markdown`: Python-Markdown
3.7 from PyPI, built and benched as the red-team battery has it (tests/lab/markdown_target.py: `python -m markdown`
rendering the handbook, a recall gate), the release the baseline and its honest repeated-inline win the candidate.
"Without" is a copy of the bench whose scenarios declare `variants = []`; each suite gets its own fresh A/A
calibration first, then verdicts with and without alternate (so load drifts hit both alike). Prints each
verdict's wall time, pairs, variants (and how many of them were timed in every pair) and verdict, and the
medians, with the machine's load.

    python benchmarks/variants_cost.py [--target demo|markdown] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchard import demo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' Python-Markdown target
from tests.lab.lab_helpers import make_repo, pypi_sdist  # noqa: E402
from tests.lab.markdown_target import BUILD, FACTS, HONEST, PACKAGE, SUITE, TARGET, handbook  # noqa: E402


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


def without_variants(bench: Path, root: Path) -> Path:
    """A copy of `bench` whose scenarios all declare `variants = []`: its suite."""
    copy = root / "bench-without"
    shutil.copytree(bench, copy)
    suite = copy / "suite.toml"
    suite.write_text(suite.read_text().replace("[[scenario]]\n", "[[scenario]]\nvariants = []\n"))
    return suite


def demo_sides(root: Path) -> tuple[Path, Path, Path]:
    """The demo's baseline and candidate binaries, and its bench."""
    baseline = checkout(root, "template", None)
    candidate = checkout(root, "candidate", demo.HYPOTHESES.parent / "patches" / "count-with-dict.patch")
    return baseline, candidate, demo.BENCH


def markdown_build(project: Path) -> Path:
    """Python-Markdown's tree in a repository of its own, built as the battery builds it: its binary."""
    (project / ".gitignore").write_text(".venv/\n__pycache__/\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "Python-Markdown")
    subprocess.run(["sh", "-c", BUILD], cwd=project, check=True, capture_output=True)
    return project / TARGET["binary"]


def markdown_sides(root: Path) -> tuple[Path, Path, Path]:
    """Python-Markdown's release and its repeated-inline win, built, and the battery's bench."""
    release = pypi_sdist(root, PACKAGE, "markdown", root / "release")
    if release is None:
        sys.exit(f"variants_cost: PyPI is unreachable: pip could not download {PACKAGE}")
    shutil.copytree(release, root / "candidate")
    _, path, edits = HONEST["repeated-inline"]
    text = (root / "candidate" / path).read_text()
    for old, new in edits:
        text = text.replace(old, new, 1)
    (root / "candidate" / path).write_text(text)
    bench = make_repo(root / "bench", {"suite.toml": SUITE, "fixture.md": handbook(), "facts.txt": FACTS})
    return markdown_build(release), markdown_build(root / "candidate"), bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("demo", "markdown"), default="demo",
                        help="the demo's target, or Python-Markdown from PyPI (default demo)")
    parser.add_argument("--repeats", type=int, default=3, help="verdicts of each kind (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orchard-variants-cost-") as tmp:
        root = Path(tmp)
        os.environ["ORCHARD_CACHE_DIR"] = str(root / "cache")
        from orchard.bench import calibrate, load_suite, run_verdict

        baseline, candidate, bench = (markdown_sides if args.target == "markdown" else demo_sides)(root)
        suites = {"with": load_suite(bench / "suite.toml"), "without": load_suite(without_variants(bench, root))}
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
                checks = verdict.variants.checks if verdict.variants else ()
                print(f"{repeat + 1} {kind:8} {took:6.1f} s  {verdict.pairs} pairs  {len(checks)} variants "
                      f"({sum(c.timed for c in checks)} timed)  {verdict.verdict}", flush=True)
        load_after = os.getloadavg()[0]
        medians = {kind: statistics.median(values) for kind, values in times.items()}
        print(f"\n{os.cpu_count()} cores, load average {load_before:.1f} before, {load_after:.1f} after")
        print(f"median verdict wall time: with variants {medians['with']:.1f} s, without {medians['without']:.1f} s "
              f"({medians['with'] / medians['without']:.2f}x)")


if __name__ == "__main__":
    main()
