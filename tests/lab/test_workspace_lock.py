"""One `orchard run` per workspace; writers that meet a held lab.db give one message (issue 9).

Real processes only: a first `orchard run` whose worker waits for the test,
a second `orchard run` on the same workspace (refused, exit 2, naming the
first's pid), the first SIGKILLed (the kernel drops its lock: the next run
resumes), and a process holding lab.db's SQLite write lock while `orchard
backlog add` tries to write (it gives up after lab.db's busy timeout with
one line, exit 2, and lab.db is as it was).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchard.lab.records.events import ExperimentStarted
from orchard.lab.records.lab_start import LabStart
from tests.lab.lab_helpers import lab_events, wait_for
from tests.lab.loop_support import snapshot
from tests.lab.test_bad_output import _lab, _orchard, _outcomes

LOCK_NAME = ".orchard-run.lock"  # as docs/loop.md names them
BUSY_TIMEOUT_S = 10


def _one_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.slow
def test_a_second_run_is_refused_naming_the_first_and_a_sigkill_releases_the_lock(
    tmp_path: Path, target_repo: Path
) -> None:
    go, starts = tmp_path / "go", tmp_path / "starts.log"
    root = _lab(tmp_path, target_repo, {
        "waits": f"echo started >> {starts}; while [ ! -e {go} ]; do sleep 0.1; done; "
                 "printf 'alpha\\n' > {target_dir}/src/alpha.txt"})
    first = subprocess.Popen([sys.executable, "-m", "orchard", "run", str(root)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        # its worker started, and its start recorded (the calibration runs beside the first worker and records the
        # lab's start when it ends: the first lab's own write, not the refused run's)
        wait_for(lambda: bool(lab_events(root, ExperimentStarted)) and bool(lab_events(root, LabStart)),
                 "the first lab to start its worker and record its start", limit_s=300)
        before = snapshot(root)
        message = _one_error(_orchard("run", root))
        assert f"another `orchard run` (pid {first.pid}) is running on this workspace" in message
        assert snapshot(root) == before, "the refused run recorded nothing"
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        go.touch()  # the worker outlives its orchard; the resume below takes it on
    resumed = _orchard("run", root)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (root / LOCK_NAME).exists() and (root / LOCK_NAME).read_text() == "", "released, no pid left"
    assert starts.read_text().splitlines() == ["started"]
    assert _outcomes(root)["waits"][:2] == ("done", "LAND")


HOLDER = textwrap.dedent("""
    import fcntl, os, sqlite3, sys, time
    root = sys.argv[1]
    lock = os.open(os.path.join(root, ".orchard-run.lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.write(lock, f"{os.getpid()}\\n".encode())
    db = sqlite3.connect(os.path.join(root, "lab.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('holder', 'uncommitted')")
    print("holding", flush=True)
    time.sleep(600)
""")


@pytest.mark.slow
def test_backlog_add_while_another_process_holds_the_write_lock_gives_one_message(
    tmp_path: Path, target_repo: Path
) -> None:
    root = _lab(tmp_path, target_repo, {})
    before = snapshot(root)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        result = _orchard("backlog", "add", root, "--metric", "out/stdout_bytes", "--change", "shorter beta",
                          "--scope", "src/beta.txt")
        message = _one_error(result)
        assert "Traceback" not in result.stderr
        assert f"the `orchard run` of pid {holder.pid} held its write lock for more than {BUSY_TIMEOUT_S:g} s" \
            in message
        assert "nothing was changed" in message
    finally:
        holder.kill()
        holder.wait()
    assert snapshot(root) == before, "nothing recorded is lost, nothing half-added"
    added = _orchard("backlog", "add", root, "--metric", "out/stdout_bytes", "--change", "shorter beta",
                     "--scope", "src/beta.txt")
    assert added.returncode == 0, added.stderr  # once the lock is gone, the same command works


SHELL_HOLDER = textwrap.dedent("""
    import os, sqlite3, sys, time
    db = sqlite3.connect(os.path.join(sys.argv[1], "lab.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('holder', 'uncommitted')")
    print("holding", flush=True)
    time.sleep(600)
""")


@pytest.mark.slow
def test_a_run_blocked_by_another_process_names_that_process_not_itself(tmp_path: Path, target_repo: Path) -> None:
    """A shell left in a transaction on lab.db (no `orchard run` at all): the run that waited names it."""
    root = _lab(tmp_path, target_repo, {})
    script = tmp_path / "sqlite-shell-stand-in.py"
    script.write_text(SHELL_HOLDER)
    holder = subprocess.Popen([sys.executable, script, root], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        result = _orchard("run", root)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("orchard: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr  # the UNSANDBOXED note besides
    message = errors[0]
    assert f"pid {holder.pid} (" in message and "sqlite-shell-stand-in" in message, message
    assert "the `orchard run` of pid" not in message, "the run that failed is not the one that held the lock"
