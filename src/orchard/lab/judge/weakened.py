"""Weakened tests: a change that makes the tests judging it easier to pass.

Two honest signals, each a check the judge KILLs on ("weakened tests: ..."):
assertion lines a change removes from test files (`assert`, `self.assert...`,
`expect(`; one rewritten in place counts as removed, one only moved does
not), and, when `[target] test_count` is configured, fewer tests counted in
the candidate's checkout than in the base's. Neither sees a test made
vacuous some other way (a skip marker, an assertion on a constant).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from orchard.lab.records.build import Check, CheckName
from orchard.lab.records.hypothesis import is_test_file
from orchard.lab.text import a_few
from orchard.lab.workers.workspace.builds import baseline_binary, candidate_step, placeholders
from orchard.lab.workers.workspace.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState

ASSERTION = re.compile(r"^\s*(assert\b|self\.assert\w*\(|.*\bexpect\()")
_FILE = re.compile(r"^\+\+\+ b/(.+)$|^--- a/(.+)$")
COUNT = re.compile(r"\d+")


def removed_assertions(patch: str) -> list[str]:
    """`file: line` for every assertion a unified diff takes out of a test file and does not put back."""
    removed: list[tuple[str, str]] = []
    added: set[str] = set()
    path = ""
    for line in patch.splitlines():
        header = _FILE.match(line)
        if header:
            path = header.group(1) or header.group(2) or path
            continue
        if not is_test_file(path) or line.startswith(("+++", "---")):
            continue
        if line.startswith("-") and ASSERTION.match(line[1:]):
            removed.append((path, line[1:].strip()))
        elif line.startswith("+") and ASSERTION.match(line[1:]):
            added.add(line[1:].strip())
    return [f"{file}: {text[:80]}" for file, text in removed if text not in added]


def count_tests(ws: Workspace, command: str, checkout: Path, values: Mapping[str, str], logs: Path,
                name: CheckName) -> int | None:
    """The number `[target] test_count` prints: the first whole number on the last line of its output."""
    step = candidate_step(ws, name, command, checkout, values, logs)
    if not step.passed or step.log is None:
        return None
    lines = [line for line in Path(step.log).read_text(encoding="utf-8", errors="replace").splitlines()[1:]
             if line.strip()]
    found = COUNT.search(lines[-1]) if lines else None
    return None if found is None else int(found.group())


def check(patch: str) -> Check:
    """Whether the change takes assertions out of test files."""
    removed = removed_assertions(patch)
    if removed:
        return Check(CheckName.TESTS_KEPT, False,
                     f"{len(removed)} assertion(s) removed from test files ({a_few(removed)})")
    return Check(CheckName.TESTS_KEPT, True, "no assertion removed from test files")


def count_check(ws: Workspace, state: LabState, base: str, checkout: Path, values: Mapping[str, str],
                logs: Path) -> Check:
    """`[target] test_count` in the candidate's checkout against the base's (counted once per base)."""
    command = ws.config.target.test_count
    key = "test-count:" + hashlib.sha256(f"{base}\0{command}".encode()).hexdigest()[:16]
    recorded = state.meta(key)
    if recorded is None:
        baseline_binary(ws, state, base)  # its checkout is where the base's tests are counted
        base_dir = ws.baseline_dir(base)
        counted = count_tests(ws, command, base_dir, placeholders(ws, base_dir, None), logs,
                              CheckName.TEST_COUNT_BASE)
        if counted is not None:
            state.set_meta(key, str(counted))
    else:
        counted = int(recorded)
    candidate = count_tests(ws, command, checkout, values, logs, CheckName.TEST_COUNT)
    if counted is None or candidate is None:
        where = "the base" if counted is None else "the candidate"
        return Check(CheckName.TEST_COUNT, False,
                     f"[target] test_count printed no number for {where} (see its log)")
    if candidate < counted:
        return Check(CheckName.TEST_COUNT, False, f"{candidate} tests counted, {counted} at the base")
    return Check(CheckName.TEST_COUNT, True, f"{candidate} tests counted, {counted} at the base")
