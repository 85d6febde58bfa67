"""Builds: clean checkouts, configured shell steps, and the baseline cache.

Everything the lab builds, it builds here, from a clean clone of its own
target at a recorded commit (plus a candidate's patch): the judge's
candidate checkouts, the baselines (built once per commit and cached in
lab.db), and the steps orchard.toml configures (build, tests, the harness's
own tests, the sweep), each with its whole output in a log file. A step
runs candidate code, so it gets the judge's environment allowlist
(`allowlist.judge_env`), never the orchestrator's secrets.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchard.bench.runner import run
from orchard.errors import OrchardError
from orchard.lab.allowlist import judge_env
from orchard.lab.experiment import placeholder_values, render_command
from orchard.lab.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.state import LabState

STEP_TIMEOUT_S = 3600.0


@dataclass
class Check:
    """One thing established about a candidate (a step run, a collection check), passed or not."""

    name: str
    passed: bool
    detail: str
    log: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Check:
        return cls(str(data["name"]), bool(data["passed"]), str(data["detail"]), data.get("log"))


def placeholders(ws: Workspace, target_dir: Path, binary: Path | None) -> dict[str, str]:
    """Placeholder values for a step run by the lab itself (no worker: no report, no prompt)."""
    return placeholder_values(workspace=ws.root, experiment=target_dir.parent.name, target_dir=target_dir,
                              bench_dir=ws.bench_dir, binary=binary, baseline=binary, suite=ws.suite(ws.bench_dir))


def run_step(name: str, template: str, cwd: Path, values: Mapping[str, str], log_dir: Path, *,
             pass_env: Sequence[str] = ()) -> Check:
    """Run one configured shell command with the judge's allowlist (plus `pass_env`); its output goes to a log."""
    if not template:
        return Check(name, True, "not configured")
    command = render_command(template, dict(values))
    capture = run(["bash", "-c", command], cwd=cwd, env=judge_env(pass_env), timeout_s=STEP_TIMEOUT_S,
                  admitted_chars=1 << 30)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    log.write_bytes(b"$ " + command.encode() + b"\n" + capture.stdout + capture.stderr)
    if capture.ok:
        return Check(name, True, f"`{command}` passed", str(log))
    what = "timed out" if capture.timed_out else f"exit {capture.returncode}"
    tail = (capture.stderr_text or capture.stdout_text).strip().splitlines()[-1:] or [""]
    return Check(name, False, f"`{command}` failed ({what}): {tail[0][:200]}", str(log))


def harness_tests(ws: Workspace, state: LabState, bench_base: str, values: Mapping[str, str],
                  log_dir: Path) -> Check:
    """The bench's own test suite, run once per bench base and rendered command.

    The lab's bench clone cannot change (it is checked around every verdict),
    so the same command at the same base gives the same answer: a pass is
    recorded in lab.db and reused, not run again for every candidate (a
    failure is run again: its cause may be outside the clone).
    """
    command = render_command(ws.config.bench.test, dict(values)) if ws.config.bench.test else ""
    key = "harness-tests:" + hashlib.sha256(f"{bench_base}\0{command}".encode()).hexdigest()[:16]
    recorded = state.meta(key)
    if recorded is not None:
        return Check.from_dict(json.loads(recorded))
    check = run_step("bench-tests", ws.config.bench.test, ws.bench_dir, values, log_dir,
                     pass_env=ws.config.lab.pass_env)
    if check.passed:
        state.set_meta(key, json.dumps(check.to_dict()))
    return check


def checkout_with_patch(ws: Workspace, directory: Path, base: str, patch: str) -> Path:
    """A clean clone of the lab's target at `base`, with `patch` applied."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    ws.target_vcs.clone(str(ws.reference_target), directory, commit=base)
    # what the judge's build writes here must never be committed when the win lands
    ws.target_vcs.ignore_locally(directory, ws.config.target.ignore)
    if patch:
        ws.target_vcs.apply(directory, patch)
    return directory


# The loop's thread, judge threads and the landing thread may all ask for the
# same baseline at once; one build per commit, the others wait for it.
_BASELINE_BUILDS = threading.Lock()


def baseline_binary(ws: Workspace, state: LabState, commit: str) -> Path:
    """The binary built from `commit`, built once and cached by commit."""
    with _BASELINE_BUILDS:
        return _baseline_binary(ws, state, commit)


def _baseline_binary(ws: Workspace, state: LabState, commit: str) -> Path:
    cached = state.baseline(commit)
    if cached and Path(cached).exists():
        return Path(cached)
    checkout = checkout_with_patch(ws, ws.baseline_dir(commit), commit, "")
    check = run_step("build", ws.config.target.build, checkout, placeholders(ws, checkout, None),
                     checkout.parent / "logs", pass_env=ws.config.lab.pass_env)
    binary = ws.binary_in(checkout)
    if not check.passed or binary is None or not binary.exists():
        raise OrchardError(f"the baseline at {commit[:12]} does not build: {check.detail}")
    state.add_baseline(commit, str(binary))
    return binary
