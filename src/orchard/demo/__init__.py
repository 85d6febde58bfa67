"""The embedded demo: a small target program, its bench, hypotheses with ready patches.

`target/` and `bench/` are the contents of two git repositories (the lab
copies each and runs `git init` on the copy); `hypotheses.toml` names one
patch per hypothesis, chosen so a single lab run shows every decision path.
See README.md beside this file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE / "target"  # wordfreq: build with `make`, binary build/wordfreq
BENCH = HERE / "bench"  # suite.toml, its fixtures, tests/, prompts/
HYPOTHESES = HERE / "hypotheses.toml"
BINARY = "build/wordfreq"  # relative to a target checkout, after `make`

_NOT_CONTENT = shutil.ignore_patterns("__pycache__", "*.pyc", "build")


def copy_template(template: Path, destination: Path) -> Path:
    """Copy a template's files (not caches or build output) into a new directory."""
    shutil.copytree(template, destination, ignore=_NOT_CONTENT)
    return destination
