"""What the honest rewrite of Python-Markdown saves a run (test_large_win_pypi's hypothesis): the release and the
rewrite (tests/lab/markdown_target.py's REWRITE) built as that test builds them, each rendering the handbook with
`python -m markdown`, their runs alternated so that load drifts hit both alike; for each document size, the median
and the least wall and CPU time of each, and release / rewrite. The two outputs are checked byte for byte first.

    python benchmarks/markdown_rewrite.py [--runs N] [--sections 120 480]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' Python-Markdown target
from tests.lab.lab_helpers import pypi_sdist  # noqa: E402
from tests.lab.markdown_target import LARGE_BUILD, PACKAGE, REWRITE, edited, handbook  # noqa: E402


def built(tree: Path) -> Path:
    """`tree` built as test_large_win_pypi's target is: its interpreter."""
    subprocess.run(["sh", "-c", LARGE_BUILD], cwd=tree, check=True, capture_output=True)
    return tree / ".venv/bin/python"


def one_run(python: Path, document: Path) -> tuple[float, float]:
    """One render's wall and CPU seconds (its process's user + system time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([str(python), "-m", "markdown", str(document)], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(sides: dict[str, Path], document: Path, runs: int) -> dict[str, list[tuple[float, float]]]:
    """`runs` renders of `document` by each side, alternated, after one warm-up each."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for python in sides.values():
        one_run(python, document)
    for _ in range(runs):
        for name, python in sides.items():
            samples[name].append(one_run(python, document))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--sections", type=int, nargs="+", default=[120, 480])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="markdown-rewrite-") as scratch:
        root = Path(scratch)
        release = pypi_sdist(root, PACKAGE, "markdown", root / "release")
        if release is None:
            sys.exit(f"markdown_rewrite: PyPI is unreachable: pip could not download {PACKAGE}")
        rewrite = root / "rewrite"
        shutil.copytree(release, rewrite)
        for path, text in edited(rewrite, *REWRITE).items():
            (rewrite / path).write_text(text)
        sides = {"release": built(release), "rewrite": built(rewrite)}
        print(f"load before: {os.getloadavg()[0]:.2f}; {args.runs} runs a side, alternated")
        for sections in args.sections:
            document = root / f"handbook-{sections}.md"
            document.write_text(handbook(sections))
            outputs = {subprocess.run([str(python), "-m", "markdown", str(document)], check=True,
                                      capture_output=True).stdout for python in sides.values()}
            assert len(outputs) == 1, "the rewrite's output differs from the release's"
            samples = measure(sides, document, args.runs)
            medians = {name: [statistics.median(s[i] for s in runs) for i in (0, 1)] for name, runs in samples.items()}
            for name, runs in samples.items():
                print(f"{sections} sections, {name}: wall median {medians[name][0] * 1000:.0f} ms, least "
                      f"{min(s[0] for s in runs) * 1000:.0f} ms; CPU median {medians[name][1] * 1000:.0f} ms, least "
                      f"{min(s[1] for s in runs) * 1000:.0f} ms")
            print(f"{sections} sections, release / rewrite: wall {medians['release'][0] / medians['rewrite'][0]:.2f}x,"
                  f" CPU {medians['release'][1] / medians['rewrite'][1]:.2f}x (medians)")
        print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
