"""A measurement killed mid-run leaves its temporary directories behind; the next one on the host removes them, and
never a directory a live process still holds."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest

from orchard import scratch
from orchard.cache import CACHE_ENV, cache_dir
from tests.helpers import ORCHARD, orchard

SUITE = '[suite]\nname = "held"\n\n[[scenario]]\nname = "run"\ncommand = ["{bin}", "{workdir}"]\n\n' \
        '[[metric]]\nname = "wall_ms"\n'
STUCK = '#!/bin/sh\ntouch "$1/started"\nexec sleep 600\n'  # measured until its run is killed with orchard
QUICK = '#!/bin/sh\nexit 0\n'


def _held_by(pid: int) -> list[Path]:
    entries = cache_dir("held")
    found = [scratch.Held.read(entry) for entry in entries.glob("*.json")] if entries.is_dir() else []
    return sorted(Path(held.path) for held in found if held is not None and held.owner.pid == pid)


def _until(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _program(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_measurement_killed_mid_run_leaves_its_directories_to_the_next_one(tmp_path: Path) -> None:
    (tmp_path / "suite.toml").write_text(SUITE)
    _program(tmp_path, "stuck", STUCK)
    _program(tmp_path, "quick", QUICK)
    killed = subprocess.Popen([*ORCHARD, "bench", "run", "--suite", "suite.toml", "--subject", "stuck=stuck",
                               "--runs", "1"], cwd=tmp_path, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _until(lambda: any((held / "work" / "started").exists() for held in _held_by(killed.pid)),
               "the stuck program never started")
        held = _held_by(killed.pid)
    finally:
        os.killpg(killed.pid, signal.SIGKILL)  # no `finally` of orchard's runs
        killed.wait()
    assert held and all(path.is_dir() for path in held)  # its workbench at least

    run = orchard("bench", "run", "--suite", "suite.toml", "--subject", "quick=quick", "--runs", "1", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert not any(path.exists() for path in held)
    assert not list(cache_dir("held").glob("*.json"))  # the next run's own were released when it ended


def test_a_directory_of_a_live_process_is_kept_and_removed_once_it_is_gone() -> None:
    holder = subprocess.Popen([sys.executable, "-c", "from orchard import scratch; import sys\n"
                               "print(scratch.make(), flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    theirs = Path(holder.stdout.readline().strip())
    try:
        mine = scratch.make()  # sweeps first
        assert theirs.is_dir() and mine.is_dir()
    finally:
        holder.kill()
        holder.wait()
    assert scratch.sweep() == [theirs] and not theirs.exists()
    assert mine.is_dir()  # this process is alive
    scratch.release(mine)
    assert not mine.exists() and not list(cache_dir("held").glob("*.json"))


def _entry(path: Path, host: str, pid: int, started: float) -> None:
    cache_dir("held").mkdir(parents=True, exist_ok=True)
    record = scratch.Held(str(path), host, scratch.Owner(pid, started))
    (cache_dir("held") / f"{host}-{path.name}.json").write_text(json.dumps(asdict(record)))


@pytest.mark.parametrize("case", ["reused pid", "another host", "outside the temporary directory"])
def test_only_a_dead_owners_directory_of_this_host_is_removed(tmp_path: Path, case: str) -> None:
    """A pid now running another program is a dead owner; another host's owner cannot be asked; an entry naming a
    directory outside the temporary directory (another TMPDIR's, or a forged one) never removes it here."""
    me = scratch.Owner.of(os.getpid())
    made = scratch.make()
    scratch.release(made, remove=False)
    precious = tmp_path / "precious"
    precious.mkdir()
    host = socket.gethostname()
    path, entry = {"reused pid": (made, (host, me.pid, me.started - 100)),
                   "another host": (made, ("elsewhere", 1, 0.0)),
                   "outside the temporary directory": (precious, (host, 2**22 + 7, 0.0))}[case]
    _entry(path, *entry)
    removed = scratch.sweep()
    if case == "reused pid":
        assert removed == [made] and not made.exists()
    else:
        assert removed == [] and path.is_dir()
    assert bool(list(cache_dir("held").glob("*.json"))) == (case != "reused pid")
    shutil.rmtree(made, ignore_errors=True)


def test_a_cache_that_cannot_be_written_costs_the_list_not_the_directory(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "a-file"))  # its `held/` cannot be made
    with scratch.held_directory() as path:
        assert path.is_dir()
    assert not path.exists()
