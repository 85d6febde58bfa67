"""Shared helpers for the lane tests: isolation, wrapper subjects, leftover checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from orchard.cli import cli


@dataclass
class LaneEnv:
    results: Path
    temp: Path  # where the lanes put their temporary workdirs
    bin: Path  # wrapper subjects live here

    def wrapper(self, name: str, body: str) -> Path:
        """A real executable subject: a shell script around the real git."""
        path = self.bin / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        return path

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.temp.iterdir())


def _is_resource_tracker(child: psutil.Process) -> bool:
    """multiprocessing's tracker lives as long as pytest once a dask test ran: not a lane's child."""
    try:
        return any("multiprocessing.resource_tracker" in part for part in child.cmdline())
    except psutil.Error:
        return False


def assert_no_children(grace_s: float = 5.0) -> None:
    """Every process the lanes started is gone (by our own process tree)."""
    deadline = time.monotonic() + grace_s
    me = psutil.Process()
    while True:
        alive = [
            child
            for child in me.children(recursive=True)
            if child.status() != psutil.STATUS_ZOMBIE and not _is_resource_tracker(child)
        ]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not alive, [child.cmdline() for child in alive]


def descendants(pid: int, predicate: Callable[[psutil.Process], bool]) -> list[psutil.Process]:
    """Live descendants of `pid` matching `predicate`; processes that vanish meanwhile are skipped."""
    found = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    for child in children:
        try:
            if predicate(child):
                found.append(child)
        except (psutil.Error, OSError):
            continue
    return found


def wait_for(
    pid: int, predicate: Callable[[psutil.Process], bool], count: int = 1, timeout_s: float = 60
) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    found: list[psutil.Process] = []
    while time.monotonic() < deadline:
        found = descendants(pid, predicate)
        if len(found) >= count:
            break
        time.sleep(0.1)
    return found


@contextmanager
def cli_process(args: list[str], temp: Path) -> Iterator[subprocess.Popen[str]]:
    """The real CLI as a separate process in its own group, killed by that group if a test fails."""
    process = subprocess.Popen(
        [sys.executable, "-m", "orchard", *args],
        env={**os.environ, "TMPDIR": str(temp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()


def invoke(*args: str) -> Any:
    """Run the real CLI in-process; returns click's Result."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def latest_rows(results: Path, lane: str, *, warmup: bool = False) -> list[dict[str, Any]]:
    """The newest run's rows; without `warmup`, the warm-up runs' rows are left out."""
    files = sorted((results / lane).glob("*.jsonl"))
    assert files, f"no {lane} run under {results}"
    return [row for row in rows_of(files[-1]) if warmup or not row.get("warmup")]


def totals(rows: list[dict[str, Any]], operation: str) -> list[dict[str, Any]]:
    return [row for row in rows if row.get("operation") == operation]


def edited_flow(folder: Path, old: str, new: str) -> Path:
    """A copy of the shipped git flow with `old` replaced by `new` (which must be there)."""
    from orchard.bench.suites.flow_reader import shipped_flow_files

    text = shipped_flow_files()["git"].read_text()
    assert old in text, old
    path = folder / "edited.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def without_oak_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep PATH to directories with no `oak` (this machine has none anyway)."""
    kept = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "oak").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(kept))
