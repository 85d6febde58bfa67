"""A dask worker on a second host, emulated by a network namespace: real `dask scheduler` and `dask worker`
CLI processes on either side of a veth pair, the lab's repositories served by its `git daemon` on the
lab host's side, the worker's launcher in the default bubblewrap sandbox.

The namespace has its own loopback: the worker reaches the lab host only at its veth address, as a
worker on another machine would (the file system is shared; nothing in a task may rely on it).
Needs root (a network namespace and a veth pair); skipped otherwise.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchard.demo.make import make_demo
from orchard.lab.config import orchard_toml as config_module
from orchard.lab.config import rendered as config_file
from orchard.lab.db.state import LabState
from orchard.lab.loop import backlog
from orchard.lab.records.events import ExperimentHost
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judgment import JudgmentEntry
from orchard.lab.workers.workspace.workspace import Workspace
from tests.helpers import unhidden_dir
from tests.lab.lab_helpers import assert_nothing_left, small_tmpfs, stop_process_groups
from tests.lab.lab_helpers import lab_events as events
from tests.lab.loop_support import FINISHED
from tests.lab.test_dask import DASK, assert_no_scratch, decisions, finish, orchard, use_cluster


@dataclass(frozen=True)
class SecondHost:
    """A network namespace joined to this one by a veth pair: the lab host's address and the other host's.

    The namespace is held by a process of its own (`holder`), never named under /run/netns: `ip netns add`
    mounts there, and a sandbox started meanwhile by another test fails remounting the host's mounts
    read-only ("remount /newroot/run/netns/...: Invalid argument")."""

    holder: int
    lab_address: str
    address: str

    def inside(self, *argv: str) -> list[str]:
        """`argv` run in this namespace (nsenter execs it: the process started is the command itself)."""
        return ["nsenter", f"--net=/proc/{self.holder}/ns/net", "--", *argv]

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.inside(*argv), capture_output=True, text=True, check=False, timeout=60)

    def ip(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("ip", *args)


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=60)


def _free_subnet() -> int:
    """A 10.231.N.0/30 no interface of this host has an address in."""
    taken = _ip("-o", "-4", "addr", "show").stdout
    for _ in range(50):
        subnet = random.randint(1, 254)
        if f"10.231.{subnet}." not in taken:
            return subnet
    pytest.skip("no free 10.231.N.0/30 subnet for the test's veth pair")


def _holder() -> subprocess.Popen[bytes]:
    """A process in a new network namespace of its own, once it is in it."""
    holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"], start_new_session=True)
    ours = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and holder.poll() is None:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{holder.pid}/ns/net") != ours:
                return holder
        time.sleep(0.01)
    holder.kill()
    holder.wait()
    pytest.skip("`unshare --net` made no network namespace here")


@contextmanager
def namespaced_host() -> Iterator[SecondHost]:
    """A namespace and veth pair of this test's own: the namespace ends with its holder (stopped by its pid),
    taking the inside end of the pair, and with it the pair."""
    if os.geteuid() != 0:
        pytest.skip("emulating a second host needs root (a network namespace and a veth pair)")
    tag = uuid.uuid4().hex[:6]
    outside, inside = f"ot{tag}h", f"ot{tag}n"
    subnet = _free_subnet()
    holder = _holder()
    host = SecondHost(holder.pid, f"10.231.{subnet}.1", f"10.231.{subnet}.2")
    try:
        steps = [("link", "add", outside, "type", "veth", "peer", "name", inside),
                 ("link", "set", inside, "netns", str(holder.pid)),
                 ("addr", "add", f"{host.lab_address}/30", "dev", outside), ("link", "set", outside, "up")]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"`ip {' '.join(step)}` failed here: {done.stderr.strip()}")
        for step in [("addr", "add", f"{host.address}/30", "dev", inside), ("link", "set", inside, "up"),
                     ("link", "set", "lo", "up")]:
            done = host.ip(*step)
            if done.returncode != 0:
                pytest.skip(f"`ip {' '.join(step)}` in the namespace failed here: {done.stderr.strip()}")
        yield host
    finally:
        holder.kill()
        holder.wait()
        if _ip("link", "show", outside).returncode == 0:
            _ip("link", "del", outside)


@pytest.fixture
def second_host() -> Iterator[SecondHost]:
    with namespaced_host() as host:
        yield host


@dataclass(frozen=True)
class Cluster:
    scheduler: str
    processes: tuple[subprocess.Popen[bytes], ...]  # the scheduler, the worker (nsenter execs dask)


@contextmanager
def dask_cluster(host: SecondHost, scratch: Path, mark: str, **worker_env: str) -> Iterator[Cluster]:
    """`dask scheduler` on the lab host's veth address, one `dask worker` (2 agents) in the namespace;
    both stopped by their process groups afterwards."""
    with socket.socket() as probe:
        probe.bind((host.lab_address, 0))
        port = probe.getsockname()[1]
    address = f"tcp://{host.lab_address}:{port}"
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(subprocess.Popen(
            [str(DASK), "scheduler", "--host", host.lab_address, "--port", str(port), "--no-dashboard"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        started.append(subprocess.Popen(
            host.inside(str(DASK), "worker", address, "--host", host.address, "--nthreads", "2", "--resources",
                        "agent=2 cpu=2", "--no-dashboard", "--local-directory", str(scratch)),
            env={**env, **worker_env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        yield Cluster(address, tuple(started))
    finally:
        stop_process_groups(started)
    assert_nothing_left(mark, None)


@pytest.fixture
def cluster(second_host: SecondHost, tmp_path: Path, mark: str) -> Iterator[Cluster]:
    """The cluster, its worker's environment holding a secret no launcher may inherit."""
    with dask_cluster(second_host, tmp_path / "dask-scratch", mark, NETNS_SECRET="leaked-secret") as found:
        yield found


def _add_sandbox_probe(ws: Workspace) -> None:
    """A `command`-launcher hypothesis whose worker says what its sandbox shows it, and a report."""
    config = shlex.quote(str(ws.config_path))
    template = (f"test -e {config} && echo PROBE-SEES-LAB || echo PROBE-LAB-HIDDEN; "
                "echo PROBE-SECRET=${{NETNS_SECRET:-unset}}; echo PROBE-PID1=$(cat /proc/1/comm); " + FINISHED)
    data = config_module.to_dict(config_module.load(ws.config_path))
    data.setdefault("launchers", {})["probe"] = {"name": "command", "template": template}
    data["stop"]["top_attempted"] = 3
    config_file.write(config_module.from_dict(data), ws.config_path)
    state = LabState.open(ws.root)
    try:
        with state.transaction():
            backlog.add(state, Hypothesis(metric="report/stdout_bytes", change="look around", id="sandbox-probe",
                                          scope=("wordfreq/cli.py",), launcher="probe"), source="user")
    finally:
        state.close()


@pytest.fixture(name="unhidden_dir")
def _unhidden_dir() -> Iterator[Path]:
    """A directory outside every place the sandbox hides anyway (/tmp, home): a lab there is hidden from a worker
    on a host that shares the file system only because it is the lab's. It is 0700, as a user's may be: the
    sandbox's uid reaches its checkouts all the same (it could not even build the baseline there before)."""
    with unhidden_dir() as directory:
        yield directory


@pytest.mark.slow
@pytest.mark.timeout(1200)  # measurements on a shared machine; the lab's own waits are bounded
def test_a_dask_worker_on_another_network_namespace_runs_sandboxed_from_the_git_daemon(
        unhidden_dir: Path, second_host: SecondHost, cluster: Cluster, mark: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as loopback:  # the emulation holds: the lab's loopback is not its
        reach = second_host.run(sys.executable, "-c", "import socket, sys; socket.create_connection("
                                f"('127.0.0.1', {loopback.getsockname()[1]}), timeout=10)")
        assert reach.returncode != 0, "the namespaced worker reaches the lab host's loopback"
    hypotheses = ["terse-report", "tokenize-regex"]
    ws = make_demo(unhidden_dir / "lab", workers=2, only=hypotheses)
    use_cluster(ws, scheduler=cluster.scheduler, serve="git-daemon", serve_host=second_host.lab_address)
    _add_sandbox_probe(ws)
    assert config_module.load(ws.config_path).workers.sandbox == "bwrap"

    output = finish(orchard("run", str(ws.root), mark=mark))

    found = decisions(ws.root)
    assert {h: d[:2] for h, d in found.items() if h != "sandbox-probe"} == {
        "terse-report": ("LAND", None), "tokenize-regex": ("KILL", "scope-kept")}, output
    assert found["sandbox-probe"][0] == "KILL"  # it changed nothing
    placed = events(ws.root, ExperimentHost)
    assert {e.experiment for e in placed} == {*hypotheses, "sandbox-probe"}
    assert {e.event.address.rsplit(":", 1)[0] for e in placed} == {f"tcp://{second_host.address}"}, output
    for name in {e.experiment for e in placed}:
        log = (ws.root / "logs" / f"{name}.log").read_text()
        assert f"checkouts fetched from git://{second_host.lab_address}:" in log.splitlines()[0], log
    probe = (ws.root / "logs" / "sandbox-probe.log").read_text()
    assert "PROBE-LAB-HIDDEN" in probe and "PROBE-SEES-LAB" not in probe, probe  # the lab's workspace is hidden
    assert "PROBE-SECRET=unset" in probe  # the environment allowlist held on the worker's host
    assert "PROBE-PID1=bwrap" in probe  # its own PID namespace
    assert all(proc.poll() is None for proc in cluster.processes)  # the user's cluster is left running
    assert_no_scratch(ws.root)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_git_daemon_on_loopback_is_one_clear_error_for_a_worker_on_another_host(
        tmp_path: Path, second_host: SecondHost, cluster: Cluster, mark: str) -> None:
    ws = make_demo(tmp_path / "lab", workers=2, only=["terse-report"])
    use_cluster(ws, scheduler=cluster.scheduler, serve="git-daemon", serve_host="127.0.0.1")
    proc = orchard("run", str(ws.root), mark=mark)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2, output
    assert f"dask worker tcp://{second_host.address}:" in output and "cannot fetch the lab's repository" in output
    assert "serve_host" in output and "Traceback" not in output, output
    state = LabState.open(ws.root)
    try:
        assert state.experiments() == [] and {h.status for h in state.hypotheses()} == {"open"}  # nothing judged
    finally:
        state.close()
    assert_no_scratch(ws.root)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_worker_host_that_cannot_make_its_checkouts_sends_the_hypothesis_back_never_kills_it(
        tmp_path: Path, second_host: SecondHost, mark: str) -> None:
    ws = make_demo(tmp_path / "lab", workers=2, only=["terse-report"])
    with small_tmpfs(tmp_path / "full", "16k") as full, \
            dask_cluster(second_host, tmp_path / "dask-scratch", mark, TMPDIR=str(full)) as cluster:
        use_cluster(ws, scheduler=cluster.scheduler, serve="git-daemon", serve_host=second_host.lab_address)
        output = finish(orchard("run", str(ws.root), mark=mark))
        assert not list(full.iterdir()), "the lab's scratch copy was left on the worker's host"
    state = LabState.open(ws.root)
    try:
        (hypothesis,) = state.hypotheses()
        (experiment,) = state.experiments()
    finally:
        state.close()
    assert hypothesis.status == "open" and experiment.decision is None, output
    (reason,) = experiment.reasons
    assert "could not be launched" in reason and f"tcp://{second_host.address}:" in reason, reason
    assert "(the disk is full)" in reason, reason
    assert events(ws.root, JudgmentEntry) == []
