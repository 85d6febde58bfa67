"""A lab on two judge hosts, each a `dask worker` in a network namespace of its own (needs root): shared by the
judge-host slow tests."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from orchard.demo.make import make_demo
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import assert_nothing_left, stop_process_groups
from tests.lab.test_dask import DASK, use_cluster
from tests.lab.test_dask_netns import SecondHost, namespaced_host


@contextmanager
def judge_host_cluster(first: SecondHost, second: SecondHost, scratch: Path, mark: str) -> Iterator[str]:
    """`dask scheduler` on the lab's side of `first`'s veth pair; in each namespace one `dask worker` that runs an
    agent and judges (`agent=1 judge=1`), with its own measurement lock and calibration cache, as a machine of its
    own has. The second namespace reaches the scheduler's address through its own veth pair (the lab host answers
    for every address it holds)."""
    assert second.ip("route", "add", f"{first.lab_address}/32", "via", second.lab_address).returncode == 0
    with socket.socket() as probe:
        probe.bind((first.lab_address, 0))
        port = probe.getsockname()[1]
    address = f"tcp://{first.lab_address}:{port}"
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    started = [subprocess.Popen([str(DASK), "scheduler", "--host", first.lab_address, "--port", str(port),
                                 "--no-dashboard"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)]
    try:
        for name, host in (("a", first), ("b", second)):
            own = {"ORCHARD_LOCK_FILE": str(scratch / f"lock-{name}"),
                   "ORCHARD_CACHE_DIR": str(scratch / f"cache-{name}")}
            started.append(subprocess.Popen(
                host.inside(str(DASK), "worker", address, "--host", host.address, "--nthreads", "2",
                            "--resources", "agent=1 cpu=1 judge=1", "--no-dashboard",
                            "--local-directory", str(scratch / f"dask-{name}")),
                env={**env, **own}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        yield address
    finally:
        stop_process_groups(started)
    assert_nothing_left(mark, None)


@dataclass(frozen=True)
class JudgeHostLab:
    """A demo lab pointed at two judge hosts, and the namespaces they run in."""

    ws: Workspace
    first: SecondHost
    second: SecondHost


@contextmanager
def judge_host_lab(tmp_path: Path, mark: str, only: list[str],
                   prepare: Callable[[Workspace], None] = lambda _: None) -> Iterator[JudgeHostLab]:
    """The demo (`only` these hypotheses, a worker each and at least two, `prepare`d) on two judge hosts, served by
    the lab's git daemon."""
    with ExitStack() as stack:
        first, second = stack.enter_context(namespaced_host()), stack.enter_context(namespaced_host())
        scheduler = stack.enter_context(judge_host_cluster(first, second, tmp_path, mark))
        ws = make_demo(tmp_path / "lab", workers=max(2, len(only)), only=only)
        prepare(ws)
        use_cluster(ws, scheduler=scheduler, serve="git-daemon", serve_host=first.lab_address, judge_hosts=2)
        yield JudgeHostLab(ws, first, second)
