"""A worker with the host's whole network (`network = "all"`, aider's default) against the lab's dask scheduler.

A dask scheduler runs whatever task a connected client submits, on its workers, outside any sandbox. The lab's
own local cluster listens on loopback, which such a worker reaches: it must take only connections holding the
cluster's own certificate. A scheduler of the user's on plain `tcp://` is refused with such launchers.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from orchard.demo.make import make_demo
from orchard.lab.config import orchard_toml as config_module
from orchard.lab.config import rendered as config_file
from orchard.lab.db.state import LabState
from orchard.lab.loop import backlog
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import assert_nothing_left
from tests.lab.loop_support import FINISHED
from tests.lab.test_dask import assert_no_scratch, finish, orchard, use_cluster

# Every loopback port listening in the host's network namespace, tried as a dask scheduler: plain, and as TLS with
# a certificate of the attacker's own. A client that gets in runs a function on every dask worker; it writes the
# mark only on workers started by this test's lab (an ancestor running `orchard run LAB`), so that other labs on a
# shared machine are left alone.
ATTACK = """
import signal, sys
from distributed import Client
from distributed.security import Security
lab, mark = sys.argv[1], sys.argv[2]
def give_up(signum, frame):
    raise TimeoutError("no answer")  # a port that takes the connection and never answers: dask's timeout waits on
signal.signal(signal.SIGALRM, give_up)
def plant(lab=lab, mark=mark):
    import psutil
    if any(lab in " ".join(p.cmdline()) for p in psutil.Process().parents()):
        open(mark, "w").write("a worker ran code on the lab's dask workers")
ports = set()
for line in open("/proc/net/tcp").read().splitlines()[1:]:
    local, state = line.split()[1], line.split()[3]
    if state == "0A" and local.startswith("0100007F:"):
        ports.add(int(local.split(":")[1], 16))
connected = 0
for port in sorted(ports):
    for address, security in ((f"tcp://127.0.0.1:{port}", None), (f"tls://127.0.0.1:{port}", Security.temporary())):
        signal.alarm(5)
        try:
            with Client(address, timeout=2, security=security) as client:
                connected += 1
                client.run(plant)
        except Exception:
            pass
        finally:
            signal.alarm(0)
print(f"scheduler attack: tried {len(ports)} loopback ports, connected to {connected}")
"""


def _hostile_launcher(ws: Workspace, name: str, template: str) -> None:
    """A `command` launcher with the host's whole network, its hypothesis, one more attempted before the stop."""
    data = config_module.to_dict(config_module.load(ws.config_path))
    data.setdefault("launchers", {})[name] = {"name": "command", "template": template, "network": "all"}
    data["stop"]["top_attempted"] = data["stop"]["top_attempted"] + 1
    config_file.write(config_module.from_dict(data), ws.config_path)
    state = LabState.open(ws.root)
    try:
        with state.transaction():
            backlog.add(state, Hypothesis(metric="report/wall_ms", change=name, id=name, scope=("wordfreq/report.py",),
                                          launcher=name), source="user")
    finally:
        state.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_worker_with_the_whole_network_cannot_use_the_labs_local_dask_cluster(tmp_path: Path, mark: str) -> None:
    ws = make_demo(tmp_path / "lab", workers=1, only=["tokenize-regex"])
    # served by path: the git daemon would serve the demo's held-out inputs to such a worker (refused, below)
    use_cluster(ws, dask_workers=1, serve="path")
    planted = tmp_path / "PLANTED"
    code = base64.b64encode(ATTACK.encode()).decode()
    attack = f"{sys.executable} -c \"import base64; exec(base64.b64decode('{code}'))\" {ws.root} {planted}"
    _hostile_launcher(ws, "scheduler-attack", f"{attack}; {FINISHED}")
    output = finish(orchard("run", str(ws.root), mark=mark))
    log = (ws.root / "logs" / "scheduler-attack.log").read_text()
    assert "scheduler attack: tried" in log, output  # the attack ran, and found the loopback ports
    assert not planted.exists(), log
    assert "connected to 0" in log, log
    assert_nothing_left(mark, None)
    assert_no_scratch(ws.root)


def test_a_plain_tcp_scheduler_is_refused_with_a_launcher_on_the_whole_network(tmp_path: Path) -> None:
    ws = make_demo(tmp_path / "lab", workers=1, only=["tokenize-regex"])
    use_cluster(ws, scheduler="tcp://10.0.0.5:8786")
    with pytest.raises(config_module.ConfigError, match=r"scheduler-attack has network = \"all\""):
        _hostile_launcher(ws, "scheduler-attack", FINISHED)
    use_cluster(ws, scheduler="tls://10.0.0.5:8786")
    _hostile_launcher(ws, "scheduler-attack", FINISHED)  # TLS: the user's certificates keep it out


def test_a_launcher_on_the_whole_network_is_refused_where_the_git_daemon_serves_held_out_inputs(
        tmp_path: Path, mark: str) -> None:
    """The git daemon serves the whole bench (the judge hosts measure the held-out scenarios too); the demo's suite
    holds a scenario and its fixtures out, which a worker with the host's network could fetch from it."""
    ws = make_demo(tmp_path / "lab", workers=1, only=["tokenize-regex"])
    use_cluster(ws, dask_workers=1)
    _hostile_launcher(ws, "fetch-the-bench", FINISHED)
    refused = orchard("run", str(ws.root), mark=mark)
    output, _ = refused.communicate(timeout=300)
    assert refused.returncode == 2, output
    assert "launchers.fetch-the-bench: network = \"all\" on a dask lab whose suite holds inputs out" in output
    assert "serve = \"path\"" in output
    state = LabState.open(ws.root)
    try:
        assert state.experiments() == []  # refused before any worker was started
    finally:
        state.close()
    assert_nothing_left(mark, None)
