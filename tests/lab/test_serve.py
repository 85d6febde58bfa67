"""`orchard serve` over HTTP: live, loopback by default, a token anywhere else (and for its controls), clean Ctrl-C."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchard.cli import cli
from orchard.demo.make import make_demo
from orchard.lab.db.state import LabState
from orchard.lab.notebook.serve import NICENESS
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import wait_for
from tests.lab.serve_support import fetch, serving, wait_until_served


@pytest.fixture(autouse=True)
def _idle_machine(_private_state: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A measurement lock of the test's own: the page shows the lock, and the test run's is taken by other
    xdist workers' measured tests, which would change the page under a test that expects an idle lab."""
    monkeypatch.setenv("ORCHARD_LOCK_FILE", str(tmp_path / "idle-machine.lock"))


@pytest.fixture
def demo(tmp_path: Path) -> Workspace:
    return make_demo(tmp_path / "demo", only=["count-with-dict", "terse-report", "single-write"])


def _digest(path: Path) -> str:
    """The database and its write-ahead log (where a WAL database's recent writes are)."""
    wal = path.with_name(path.name + "-wal")
    return hashlib.sha256(path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).hexdigest()


def test_loopback_serves_the_page_and_answers_204_while_nothing_changed(demo: Workspace) -> None:
    before = _digest(demo.root / "lab.db")
    with serving(demo.root) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.token and f"?token={server.token}" in server.url
        wait_until_served(server)
        status, body, _ = fetch(server.base)
        assert status == 200 and b"orchard lab" in body and b"static/plotly.min.js" in body
        status, script, headers = fetch(server.base + "static/plotly.min.js")
        assert status == 200 and headers["content-type"].startswith("text/javascript") and b"Plotly" in script
        status, body, _ = fetch(server.base + "api/page")
        page = json.loads(body)
        assert (
            "count-with-dict" in page["sections"]["backlog"] and "no worker is running" in page["sections"]["workers"]
        )
        assert fetch(server.base + f"api/page?since={page['version']}")[0] == 204
        # the lab writes (a worker starts): the next poll carries it, without the server ever writing
        state = LabState.open(demo.root)
        try:
            state.add_experiment(
                "count-with-dict", "count-with-dict", "w1", "exploit", 1, "a" * 40, "b" * 40, "running"
            )
        finally:
            state.close()
        after_write = _digest(demo.root / "lab.db")

        def changed() -> bool:
            status, body, _ = fetch(server.base + f"api/page?since={page['version']}")
            return status == 200 and "count-with-dict" in json.loads(body)["sections"]["workers"]

        wait_for(changed, "the new worker on the dashboard", 30)
        assert _digest(demo.root / "lab.db") == after_write, "the dashboard never writes lab.db"
    assert before != after_write
    assert server.process.returncode == 0, server.output


def test_any_other_host_needs_the_printed_token(demo: Workspace) -> None:
    with serving(demo.root, "--host", "127.0.0.2") as server:
        assert server.token and f"?token={server.token}" in server.url
        wait_until_served(server)
        for path in ("", "api/page", "static/plotly.min.js", "api/view"):
            status, body, _ = fetch(server.base + path)
            assert status == 401 and b"token" in body, path
            assert fetch(server.base + path + ("&" if "?" in path else "?") + "token=wrong")[0] == 401
        assert fetch(server.base + "api/page", {"Authorization": f"Bearer {server.token}"})[0] == 200
        status, _, headers = fetch(server.url)
        assert (
            status == 200 and "orchard_token=" in headers["set-cookie"] and "httponly" in headers["set-cookie"].lower()
        )
        cookie = headers["set-cookie"].split(";", 1)[0]
        assert fetch(server.base + "api/page", {"Cookie": cookie})[0] == 200


def test_ctrl_c_stops_the_server_and_frees_the_port(demo: Workspace) -> None:
    with serving(demo.root) as server:
        wait_until_served(server)
        port = int(server.base.rsplit(":", 1)[1].strip("/"))
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=30) == 0
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "nothing listens after Ctrl-C"


def test_bad_host_and_port_are_usage_errors(demo: Workspace) -> None:
    result = CliRunner().invoke(cli, ["serve", str(demo.root), "--host", "no-such-host.invalid"])
    assert result.exit_code == 2 and "--host no-such-host.invalid" in result.output
    result = CliRunner().invoke(cli, ["serve", str(demo.root), "--port", "70000"])
    assert result.exit_code == 2 and "--port 70000" in result.output
    result = CliRunner().invoke(cli, ["serve", str(demo.root.parent / "nowhere")])
    assert result.exit_code == 2


def test_status_watch_redraws_in_a_terminal_until_ctrl_c(demo: Workspace) -> None:
    """`orchard status --watch` in a real pseudo-terminal: it shows a worker that starts later, and Ctrl-C ends it."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "orchard", "status", str(demo.root), "--watch"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        close_fds=True,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "160"},
    )
    os.close(secondary)
    seen = b""

    def read_for(seconds: float) -> None:
        nonlocal seen
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.1)
            if ready:
                try:
                    seen += os.read(primary, 65536)
                except OSError:
                    return

    try:
        wait_for(lambda: (read_for(0.2), b"no worker is running" in seen)[1], "the first frame", 60)
        state = LabState.open(demo.root)
        try:
            state.add_experiment("terse-report", "terse-report", "w2", "exploit", 1, "a" * 40, "b" * 40, "running")
        finally:
            state.close()
        wait_for(
            lambda: (read_for(0.2), b"terse-report" in seen.split(b"no worker is running", 1)[1])[1],
            "the redraw with the new worker",
            60,
        )
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(primary)
    assert b"\x1b[" in seen, "drawn in place with terminal control sequences"
    both = CliRunner().invoke(cli, ["status", str(demo.root), "--json", "--watch"])
    assert both.exit_code == 2 and "--json and --watch" in both.output


def test_the_snapshot_is_rebuilt_only_when_what_it_shows_changed(
        demo: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchard.lab.notebook import serve, view

    builds: list[float] = []
    real_build = view.build

    def counted(*args: object, **kwargs: object) -> view.LabView:
        builds.append(time.monotonic())
        return real_build(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(serve, "REFRESH_S", 0.0)  # check on every request
    monkeypatch.setattr(view, "build", counted)
    state = LabState.open_readonly(demo.root)
    try:
        snapshots = serve.Snapshots(demo, state)
        first = snapshots.page()
        assert snapshots.page() == first and snapshots.page() == first
        assert len(builds) == 1, "an idle lab made the server rebuild its page"
        demo.log_path("count-with-dict").write_text("a worker's first line\n")
        snapshots.page()
        assert len(builds) == 2, "a log that grew did not reach the page"
        writer = LabState.open(demo.root)
        try:
            writer.add_experiment("count-with-dict", "count-with-dict", "w1", "exploit", 1, "a" * 40, "b" * 40,
                                  "running")
        finally:
            writer.close()
        version, _ = snapshots.page()
        assert len(builds) == 3 and version != first[0], "a lab.db write did not reach the page"
    finally:
        state.close()


def test_the_dashboard_gives_the_cpu_to_the_lab(demo: Workspace) -> None:
    """Its niceness NICENESS above the lab's, or the most Linux allows (19) when the lab itself runs niced."""
    with serving(demo.root) as server:
        wait_until_served(server)
        wanted = min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)
        assert os.getpriority(os.PRIO_PROCESS, server.process.pid) == wanted
