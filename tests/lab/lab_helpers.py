"""Helpers for the lab's tests: real git repositories, the stand-in agent CLI, orchard.toml
text, and a check that nothing a test started is left running. (Named uniquely so that
`import lab_helpers` is never confused with another directory's conftest.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import libtmux
import psutil
import pytest
import tomli_w

if TYPE_CHECKING:
    from orchard.lab.records.db import ExperimentRecord, JournalEvent
    from orchard.lab.records.events import Event

STANDIN = Path(__file__).with_name("standin.py")
CLI_HELP = Path(__file__).parent / "data" / "cli-help"  # the agent CLIs' recorded help and answers
AGENT_CLIS = {"claude": "claude", "codex": "codex", "cursor": "agent", "aider": "aider"}

E = TypeVar("E", bound="Event")


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=env).stdout


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path


TARGET_FILES = {
    "README": "a target\n",
    "src/alpha.txt": "alpha 1\n",
    "src/beta.txt": "beta 1\n",
    "src/gamma.txt": "gamma 1\n",
    "tests/check.sh": "grep -q . src/alpha.txt\n",
}
BENCH_FILES = {"bench.py": "print('measuring')\n", ".gitignore": "results/\n"}

# Appended to a `command` worker's template (placeholders still to fill): the report a worker that
# finished writes. A worker that writes none did not finish and is not judged.
REPORTS = ("; printf '{{\"schema\": \"orchard.worker-report/1\", \"experiment\": \"%s\", \"status\": \"done\", "
           "\"summary\": \"done\", \"measurements\": []}}' {experiment} > {report}")

# The target above, built and measured as the bench's suite.toml sees it: alpha.txt is the binary.
ALPHA_TARGET = {"build": "chmod +x src/alpha.txt", "binary": "src/alpha.txt"}
SUITE_BENCH = {"suite": "suite.toml"}
# A suite that measures the output size of `cat {bin}`: a shorter alpha.txt is a win, exactly.
STDOUT_SUITE = """
[suite]
name = "launchers"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "out"
command = ["cat", "{bin}"]

[[metric]]
name = "stdout_bytes"
floor = 0.0
"""
# A lab that measures nothing: README is the binary, the bench's verdict command always says NO-CHANGE.
README_TARGET = {"binary": "README"}
NO_CHANGE_BENCH = {"verdict": "echo NO-CHANGE"}


def one_worker(**keys: Any) -> dict[str, Any]:
    """`[workers]` for one exploit worker run as a subprocess, with the keys a test sets on top."""
    return {"count": 1, "exploit": 1, "explore": 0, "executor": "subprocess", **keys}


def command_launcher(template: str, **keys: Any) -> dict[str, Any]:
    """A `command` launcher's table: the worker is `template` (placeholders like {target_dir} filled per job)."""
    return {"name": "command", "template": template, **keys}


def lab_config(
    *,
    target: Mapping[str, Any],
    bench: Mapping[str, Any] | None = SUITE_BENCH,
    workers: Mapping[str, Any] | None = None,
    launcher: Mapping[str, Any] | None = None,
    stop: Mapping[str, Any] | None = None,
    launchers: Mapping[str, Mapping[str, Any]] | None = None,
    **sections: Mapping[str, Any],
) -> str:
    """orchard.toml's text for a test's lab: each section a table of values (None leaves it out), in this order.

    Values are written by tomli_w, so a test states them as Python values and never escapes TOML by hand.
    """
    tables = {"target": target, "bench": bench, "workers": workers, "launcher": launcher, "stop": stop,
              "launchers": launchers, **sections}
    return tomli_w.dumps({name: table for name, table in tables.items() if table is not None})


def add_and_run(root: Path, hypotheses: Path, env: Mapping[str, str], timeout_s: float) -> None:
    """`orchard backlog add` then `orchard run` to its end, as a user would: both exit 0, no traceback."""
    orchard = [sys.executable, "-m", "orchard"]
    added = subprocess.run([*orchard, "backlog", "add", str(root), "--file", str(hypotheses)], capture_output=True,
                           text=True, env=dict(env), timeout=120, check=False)
    assert added.returncode == 0, added.stderr
    run = subprocess.run([*orchard, "run", str(root)], capture_output=True, text=True, env=dict(env),
                         timeout=timeout_s, check=False)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stdout + run.stderr


def processes_marked(mark: str, job: str | None = None) -> list[psutil.Process]:
    """Processes carrying the mark (and, if given, JOB=job) in their environment."""
    found = []
    for proc in psutil.process_iter():
        try:
            environ = proc.environ()
            if environ.get("ORCHARD_TEST_MARK") == mark and (job is None or environ.get("JOB") == job):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_for(condition: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    """Wait until `condition()` holds (a guard against hanging, not a timing claim)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def assert_nothing_left(mark: str, socket_name: str | None) -> None:
    """No process carrying the test's mark, and no private tmux server."""
    left = [p for p in processes_marked(mark) if p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], f"processes left running: {[(p.pid, p.cmdline()) for p in left]}"
    if socket_name is not None:
        assert not libtmux.Server(socket_name=socket_name).is_alive(), f"tmux server {socket_name} still up"
        socket_file = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / socket_name
        assert not socket_file.exists(), f"socket file {socket_file} left behind"


def lab_events(root: Path, record: type[E]) -> list[JournalEvent[E]]:
    """The journal events of one record type in a workspace's lab.db, oldest first."""
    from orchard.lab.db.state import LabState

    state = LabState.open(root)
    try:
        return state.events_of(record)
    finally:
        state.close()


@dataclass(frozen=True)
class Tried:
    """A hypothesis's experiments in a finished lab: `first`, the one the backlog gave it (the last try of a launch
    that failed or a stop that re-queued it), and the `revisits` after a later win made its kill stale
    (docs/loop.md, "Revisiting a kill"). A test states what the first decided and what any revisit may."""

    first: ExperimentRecord
    revisits: tuple[ExperimentRecord, ...]


def tried_by_hypothesis(root: Path) -> dict[str, Tried]:
    """Each hypothesis's `Tried` in a workspace's lab.db, in the order of their first experiments: a revisit is an
    experiment after the one its `Revisited` event names as the kill it revisits."""
    from orchard.lab.db.state import LabState
    from orchard.lab.records.revisit_events import Revisited

    state = LabState.open(root)
    try:
        experiments = state.experiments()  # oldest first
        killed_by = {e.event.hypothesis: e.event.killed_by for e in state.events_of(Revisited)}
    finally:
        state.close()
    found = {}
    for hypothesis in dict.fromkeys(e.hypothesis for e in experiments):
        mine = [e for e in experiments if e.hypothesis == hypothesis]
        names = [e.name for e in mine]
        cut = names.index(killed_by[hypothesis]) + 1 if hypothesis in killed_by else len(mine)
        found[hypothesis] = Tried(mine[cut - 1], tuple(mine[cut:]))
    return found


def first_experiments(root: Path) -> dict[str, ExperimentRecord]:
    """Each hypothesis's first experiment, before any revisit (`Tried.first`)."""
    return {name: tried.first for name, tried in tried_by_hypothesis(root).items()}


def assert_revisits_killed(runs: Mapping[str, Tried], hostile: Iterable[str]) -> None:
    """Every revisit of a hostile hypothesis ended KILLed: never LAND, never merged (a new main does not turn a
    trick into a win)."""
    again = {record.name: (record.decision, record.reasons) for name in hostile for record in runs[name].revisits}
    assert all(decision == "KILL" for decision, _ in again.values()), again


def stop_process_groups(started: Sequence[subprocess.Popen[Any]]) -> None:
    """Stop each process started with `start_new_session` and everything in its group, the last started first (a
    group a test already killed is skipped)."""
    for proc in reversed(started):
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            proc.wait()
            continue
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def small_tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (a disk a test can really fill) mounted at a new `mount_point`, unmounted afterwards;
    the test is skipped where it cannot be mounted."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mount_point.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def pypi_sdist(tmp_path: Path, requirement: str, name: str, project: Path) -> Path | None:
    """The sdist of `requirement` (`name-*.tar.gz`) downloaded from PyPI by pip and unpacked as `project`; None
    when PyPI cannot be reached."""
    downloads = tmp_path / "downloads"
    fetched = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
                              ":all:", "-d", str(downloads), requirement], capture_output=True, text=True,
                             timeout=300, check=False)
    sdists = sorted(downloads.glob(f"{name}-*.tar.gz")) if fetched.returncode == 0 else []
    if not sdists:
        return None
    with tarfile.open(sdists[0]) as archive:
        archive.extractall(tmp_path, filter="data")
    (tmp_path / sdists[0].name.removesuffix(".tar.gz")).rename(project)
    return project
