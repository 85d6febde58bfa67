"""Small real programs and suites for verdict tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ORCHARD = [sys.executable, "-m", "orchard"]

LOOP = """#!/bin/sh
i=0
while [ $i -lt {iterations} ]; do i=$((i+1)); done
{output}
exit {code}
"""


def make_binary(
    directory: Path,
    name: str,
    iterations: int = 15000,
    output: str = 'echo "count 15000"; echo "fact: alpha"',
    code: int = 0,
) -> Path:
    """An executable whose run time scales with `iterations`."""
    path = directory / name
    path.write_text(LOOP.format(iterations=iterations, output=output, code=code))
    path.chmod(0o755)
    return path


SUITE = """
[suite]
name = "loop"
runs = {runs}
min_runs = 8
calibration_runs = {calibration_runs}

[[scenario]]
name = "loop"
command = ["{{bin}}"]
expect = ["count 15000", "fact: alpha"]

[[metric]]
name = "wall_ms"
floor = 0.02

[[metric]]
name = "cpu_ms"
floor = 0.02

[[metric]]
name = "stdout_bytes"

[[gate]]
kind = "information_recall"

[[gate]]
kind = "determinism"
"""


def make_suite(directory: Path, runs: int = 20, calibration_runs: int = 20, text: str | None = None) -> Path:
    path = directory / "suite.toml"
    path.write_text(text if text is not None else SUITE.format(runs=runs, calibration_runs=calibration_runs))
    return path


def orchard(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ORCHARD, *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
