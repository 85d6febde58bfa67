"""A full disk ends one experiment, never the lab (issue 20, item 4).

The whole workspace (lab.db, logs, judge/, the worker's checkouts) sits on
one small tmpfs, and a hostile `command` worker writes into its checkout
until that file system is full. `orchard run` KILLs that experiment with
the disk named as the reason, removes its checkouts (so lab.db can be
written again) and lands the honest win; no traceback. The same when the
orchard dies (SIGKILL) while the disk is full: the resume cleans up what the
crashed run left and goes on. A worker over `[workers] max_checkout_mb` is
stopped and KILLed with that reason before it fills anything.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import STDOUT_SUITE, small_tmpfs, wait_for
from tests.lab.test_bad_output import _config, _errors, _hypotheses, _orchard, _outcomes

FILL = "head -c 400000000 /dev/zero > {target_dir}/src/noise.bin"  # far past the tmpfs: it fills it


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """The workspace's own file system: 48 MB, which a worker's checkout fills."""
    with small_tmpfs(tmp_path / "ws", "48m") as mount_point:
        yield mount_point


def _workspace_on(disk: Path, tmp_path: Path, target_repo: Path, hostile: dict[str, str]) -> Path:
    """A lab laid out elsewhere, then moved onto the small disk (the mount point exists before the lab)."""
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(_config(hostile))
    (tmp_path / "hypotheses.toml").write_text(_hypotheses(hostile))
    ws = init_workspace(tmp_path / "fresh", str(target_repo), None, tmp_path / "orchard.toml")
    for child in ws.root.iterdir():
        shutil.move(str(child), disk / child.name)
    added = _orchard("backlog", "add", disk, "--file", tmp_path / "hypotheses.toml")
    assert added.returncode == 0, added.stderr
    return disk


def _read_only_status(root: Path, hypothesis: str) -> str:
    db = sqlite3.connect(f"{(root / 'lab.db').as_uri()}?mode=ro", uri=True)
    try:
        (status,) = db.execute("SELECT status FROM experiments WHERE hypothesis = ?", (hypothesis,)).fetchone()
        return str(status)
    finally:
        db.close()


def _free_mb(path: Path) -> float:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize / 1e6


def _assert_went_on(root: Path, result: subprocess.CompletedProcess[str], name: str) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    outcomes = _outcomes(root)
    assert outcomes[name][:2] == ("done", "KILL"), outcomes
    assert outcomes["good"][1] == "LAND", outcomes["good"]
    assert not (root / "worker-w1" / "target" / "src" / "noise.bin").exists(), "its checkout is removed"
    assert _free_mb(root) > 20, "the space the worker took is free again"


@pytest.mark.slow
def test_a_worker_that_fills_the_workspaces_disk_is_killed_and_the_lab_goes_on(
    tmp_path: Path, target_repo: Path, disk: Path
) -> None:
    root = _workspace_on(disk, tmp_path, target_repo, {"fill-disk": FILL})
    first = _orchard("run", root)
    _assert_went_on(root, first, "fill-disk")
    assert "the disk is full" in _errors(root)["fill-disk"], _errors(root)
    again = _orchard("run", root)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stdout + again.stderr


@pytest.mark.slow
def test_an_orchard_killed_while_the_disk_is_full_resumes_and_goes_on(
    tmp_path: Path, target_repo: Path, disk: Path
) -> None:
    go = tmp_path / "go"  # outside the small disk
    root = _workspace_on(disk, tmp_path, target_repo,
                         {"fill-disk": f"{FILL}; while [ ! -e {go} ]; do sleep 0.1; done"})
    crashed = subprocess.Popen([sys.executable, "-m", "orchard", "run", str(root)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: _free_mb(root) < 1, "the worker to fill the disk", limit_s=120)
        os.killpg(crashed.pid, signal.SIGKILL)  # the orchard and its worker, as a crash of the machine's session
        crashed.wait()
    finally:
        if crashed.poll() is None:
            os.killpg(crashed.pid, signal.SIGKILL)
            crashed.wait()
        go.touch()
    assert _read_only_status(root, "fill-disk") == "running"  # a writer's close would tidy lab.db's WAL away
    # what the crash and the worker's end freed (SQLite's WAL, a log's last page) is taken again: the resume
    # meets a disk on which lab.db cannot grow, as after a crash in the middle of collecting
    subprocess.run(["dd", "if=/dev/zero", f"of={root / 'top-off'}", "bs=4k"], capture_output=True, check=False)
    assert _free_mb(root) < 1
    resumed = _orchard("run", root)
    _assert_went_on(root, resumed, "fill-disk")


@pytest.mark.slow
def test_a_worker_over_max_checkout_mb_is_stopped_and_killed_with_that_reason(
    tmp_path: Path, target_repo: Path, disk: Path
) -> None:
    slow_fill = "for i in $(seq 200); do head -c 1000000 /dev/zero >> {target_dir}/src/noise.bin; sleep 0.2; done"
    root = _workspace_on(disk, tmp_path, target_repo, {"grows": slow_fill})
    config = root / "orchard.toml"
    # `orchard init` writes a short file (defaults left out): the cap goes under [workers], set or not
    text = re.sub(r"(?m)^max_checkout_mb = \d+\n", "", config.read_text())
    config.write_text(text.replace("[workers]\n", "[workers]\nmax_checkout_mb = 5\n", 1))
    assert "max_checkout_mb = 5" in config.read_text()
    result = _orchard("run", root)
    _assert_went_on(root, result, "grows")
    reasons = _outcomes(root)["grows"][2]
    assert "max_checkout_mb" in reasons and "5 MB" in reasons, reasons


@pytest.mark.slow
def test_a_full_disk_under_the_labs_own_records_pauses_it_with_one_message_and_the_resume_goes_on(
    tmp_path: Path, target_repo: Path, disk: Path
) -> None:
    """Nobody's worker filled it (a file of someone else's did): the lab cannot record anything, so it stops."""
    root = _workspace_on(disk, tmp_path, target_repo, {"idle": "echo idle"})
    ballast = root / "someone-elses-file"  # all but 256 KB: lab.db opens, the lab's start cannot be written
    leave = shutil.disk_usage(root).free // 1024 - 256
    subprocess.run(["dd", "if=/dev/zero", f"of={ballast}", "bs=1k", f"count={leave}"], capture_output=True,
                   check=True)
    assert _free_mb(root) < 1
    paused = _orchard("run", root)
    assert paused.returncode == 1, paused.stdout + paused.stderr
    assert "Traceback" not in paused.stderr, paused.stderr
    (message,) = [line for line in paused.stderr.splitlines() if line.startswith("orchard:")]
    assert "the lab paused: its own records cannot be written" in message and "the disk is full" in message
    assert f"`orchard run {root}` resumes" in message
    ballast.unlink()
    resumed = _orchard("run", root)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _outcomes(root)["good"][1] == "LAND"
