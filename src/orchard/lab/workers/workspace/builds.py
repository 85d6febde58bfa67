"""Builds: clean checkouts, configured shell steps, and the baseline cache.

Everything the lab builds, it builds here, from a clean clone of its own
target at a recorded commit (plus a candidate's patch): the judge's
candidate checkouts, the baselines (built once per commit and cached in
lab.db), and the steps orchard.toml configures (build, tests, the harness's
own tests, the sweep), each with its whole output in a log file. A step
runs candidate code, so it gets the judge's environment allowlist
(`allowlist.judge_env`), never the orchestrator's secrets.

Every binary the judge builds is recorded as a `BuiltBinary`: its path and
the sha256 of the binary (and, for a `#!` script, of every file in its
directory, which it may read) taken right after the build. `measuring`
checks the record before and after every verdict; a cached baseline whose
files no longer match is built again from its commit (and the journal says
so), never measured as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchard.errors import OrchardError
from orchard.lab.records.build import BuiltBinary, Check, CheckName
from orchard.lab.records.events import BaselineRebuilt
from orchard.lab.records.experiment import placeholder_values, render_command
from orchard.lab.records.worker import WorkerDir
from orchard.lab.workers.sandbox import sandbox_reach
from orchard.lab.workers.sandbox.allowlist import judge_env
from orchard.lab.workers.sandbox.sandbox import Confinement, step_confinement
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.process import run

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState

STEP_TIMEOUT_S = 3600.0
# A script's directory is hashed with it, up to this many files (a build
# directory larger than this is hashed by its binary alone).
HASHED_FILES = 5000


def _copy_build(checkout: Path, binary: Path, dest: Path) -> None:
    """Copy a build's binary to `dest` (at the same relative path); a script takes its directory along."""
    source = checkout / binary
    if not source.exists():
        return  # the base does not build: the judge says so, the worker finds no baseline
    if binary.parent != Path(".") and is_script(source):
        shutil.copytree(checkout / binary.parent, dest / binary.parent, symlinks=True, dirs_exist_ok=True)
    else:
        (dest / binary).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / binary)


def is_script(path: Path) -> bool:
    """A `#!` script: it may read files beside it, which then belong to the build as much as it does."""
    try:
        with path.open("rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return False


def give_baseline(ws: Workspace, worker: WorkerDir, baseline: BuiltBinary) -> None:
    """The worker's own copy of the baseline build (`{baseline}` names it): the judge's copy is never handed out."""
    if ws.config.target.binary:
        checkout = baseline.path.parents[len(Path(ws.config.target.binary).parts) - 1]
        _copy_build(checkout, Path(ws.config.target.binary), worker.baseline_copy)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _hashes(binary: Path) -> dict[str, str]:
    """sha256 per file: the binary, and for a script every file of its directory (links by their target).

    A VCS directory is left out (no script reads it).
    """
    files = {binary.name: _sha256(binary)}
    if not is_script(binary):
        return files
    found = sorted(p for p in binary.parent.rglob("*") if (p.is_file() or p.is_symlink())
                   and not {".git", ".oak"} & set(p.relative_to(binary.parent).parts))
    if len(found) > HASHED_FILES:
        return files
    for path in found:
        name = str(path.relative_to(binary.parent))
        files[name] = "->" + os.readlink(path) if path.is_symlink() else _sha256(path)
    return files


def _cache_file(name: str) -> bool:
    """A file an interpreter writes beside its sources when they first run (Python's bytecode cache)."""
    return "__pycache__/" in name


def hash_build(path: Path, commit: str = "") -> BuiltBinary:
    """Hash a binary just built."""
    return BuiltBinary(Path(path), _hashes(Path(path)), commit)


def files_changed(binary: BuiltBinary) -> list[str]:
    """Files that differ from the record now (empty: the binary is as it was built)."""
    try:
        now = _hashes(binary.path)
    except OSError:
        return [binary.path.name]
    return sorted(name for name in set(now) | set(binary.files) if now.get(name) != binary.files.get(name)
                  and not (name not in binary.files and _cache_file(name)))


def placeholders(ws: Workspace, target_dir: Path, binary: Path | None) -> dict[str, str]:
    """Placeholder values for a step run by the lab itself (no worker: no report, no prompt)."""
    return placeholder_values(workspace=ws.root, experiment=target_dir.parent.name, target_dir=target_dir,
                              bench_dir=ws.bench_dir, binary=binary, baseline=binary, suite=ws.suite(ws.bench_dir))


def run_step(name: CheckName, template: str, cwd: Path, values: Mapping[str, str], log_dir: Path, *,
             pass_env: Sequence[str] = (), confine: Confinement | None = None) -> Check:
    """Run one configured shell command with the judge's allowlist (plus `pass_env`), inside `confine` when
    given; its output goes to a log."""
    if not template:
        return Check(name, True, "not configured")
    command = render_command(template, dict(values))
    env = judge_env(pass_env)
    shell = command if confine is None else confine.command(command)
    capture = run(["bash", "-c", shell], cwd=cwd, env=env, timeout_s=STEP_TIMEOUT_S, admitted_chars=1 << 30)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    log.write_bytes(b"$ " + command.encode() + b"\n" + capture.stdout + capture.stderr)
    if capture.ok:
        return Check(name, True, f"`{command}` passed", str(log))
    what = "timed out" if capture.timed_out else f"exit {capture.returncode}"
    tail = (capture.stderr_text or capture.stdout_text).strip().splitlines()[-1:] or [""]
    hint = sandbox_reach.step_hint(command, confine, capture.stdout_text + capture.stderr_text)
    return Check(name, False, f"`{command}` failed ({what}): {tail[0][:200]}{hint}", str(log))


def candidate_step(ws: Workspace, name: CheckName, template: str, checkout: Path, values: Mapping[str, str],
                   log_dir: Path) -> Check:
    """A step that runs the target's own code in a judge checkout (build, tests, test count): the judge's
    allowlist plus `[lab] pass_env`, confined like a worker (`[workers] sandbox`) to writing that checkout."""
    pass_env = ws.config.lab.pass_env
    confine = step_confinement(ws.config.workers.sandbox, workspace=ws.root, checkout=checkout,
                               inherit=judge_env(pass_env), network=ws.config.target.build_network,
                               limits=ws.config.workers.limits())
    return run_step(name, template, checkout, values, log_dir, pass_env=pass_env, confine=confine)


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
    check = run_step(CheckName.BENCH_TESTS, ws.config.bench.test, ws.bench_dir, values, log_dir,
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
# Held by the lab's start while it calibrates on the cached baseline beside the judge: a rebuild (its checkout
# removed first) waits for it, never takes the files from under the calibration's runs.
BASELINE_MEASURED = threading.Lock()


def baseline_binary(ws: Workspace, state: LabState, commit: str) -> BuiltBinary:
    """The binary built from `commit`, built once and cached by commit, and checked on every call; built again
    when its files changed, once no calibration measures it."""
    with _BASELINE_BUILDS:
        cached = _cached(state, commit)
        if cached is None:
            return _built_baseline(ws, state, commit)
        if not files_changed(cached):
            return cached
        with BASELINE_MEASURED:
            return _built_baseline(ws, state, commit, cached)


def _cached(state: LabState, commit: str) -> BuiltBinary | None:
    recorded = state.baseline(commit)
    try:
        return None if recorded is None else BuiltBinary.from_dict(json.loads(recorded))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # a record from before hashes were kept: build again


def _built_baseline(ws: Workspace, state: LabState, commit: str, cached: BuiltBinary | None = None) -> BuiltBinary:
    """The baseline built from clean (again, journaled, when the `cached` one's files changed)."""
    if cached is not None:
        state.log(BaselineRebuilt(commit, str(cached.path), tuple(files_changed(cached)),
                                  "the cached baseline's files changed since the judge built them"))
    checkout = checkout_with_patch(ws, ws.baseline_dir(commit), commit, "")
    check = candidate_step(ws, CheckName.BUILD, ws.config.target.build, checkout, placeholders(ws, checkout, None),
                           checkout.parent / "logs")
    binary = ws.binary_in(checkout)
    if not check.passed or binary is None or not binary.exists():
        raise OrchardError(f"the baseline at {commit[:12]} does not build: {check.detail}")
    built_now = hash_build(binary, commit)
    state.add_baseline(commit, json.dumps(built_now.to_dict()))
    return built_now
