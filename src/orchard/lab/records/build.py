"""What a build and a step left: the binary the judge built with its files' hashes, and one check's outcome.

`workers/workspace/builds.py` makes both (it hashes a binary right after building it,
and again before and after every verdict: `changed`); here they are only data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class BuiltBinary:
    """A binary the judge built, with what its files held right after the build."""

    path: Path
    files: dict[str, str]  # relative to the binary's directory: sha256 (a symlink: "->" + its target)
    commit: str = ""  # the commit a baseline was built from ("" for a candidate)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "files": dict(self.files), "commit": self.commit}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuiltBinary:
        return cls(Path(data["path"]), {str(k): str(v) for k, v in data["files"].items()}, str(data.get("commit", "")))


class CheckName(StrEnum):
    """What a check established, by the name lab.db, the journal and a step's log file carry."""

    WORKER = "worker"  # the worker finished, with a report
    HARNESS = "harness"  # the bench clone is untouched
    SCOPE = "scope"  # every change inside the hypothesis's scope
    PATCH = "patch"  # text only, no special files, under the size cap
    TESTS_KEPT = "tests-kept"  # no assertion removed from test files
    APPLY = "apply"  # the patch applies to a clean base
    BUILD = "build"
    TESTS = "tests"  # the target's own tests
    TEST_COUNT = "test-count"  # no fewer tests counted than at the base
    TEST_COUNT_BASE = "test-count-base"  # the base's count (a step only)
    BENCH_TESTS = "bench-tests"  # the bench's own tests
    BINARY = "binary"  # the build made the binary, unchanged while it was measured
    PLAUSIBLE = "plausible"  # a win beyond the plausible factor, confirmed on held-out inputs
    REVIEW = "review"  # the reviewer approved
    SWEEP = "sweep"  # the bench's sweep after a landed win (a step only)
    HACK_REVIEW = "hack-review"  # nothing definite in the patch's added lines (doubtful findings hold the win)
    DIFFERENTIAL = "differential"  # the same output as the baseline on inputs beyond the bench
    SECOND_LOOK = "second-look"  # a regression beside an improvement, measured once more (`judge/second_look`)


@dataclass(frozen=True)
class Check:
    """One thing established about a candidate (a step run, a collection check), passed or not."""

    name: CheckName
    passed: bool
    detail: str
    log: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Check:
        return cls(CheckName(data["name"]), bool(data["passed"]), str(data["detail"]), data.get("log"))
