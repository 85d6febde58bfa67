"""Executors: the same contract with tmux and with plain subprocesses.

Exit codes come from the process (tmux: the dead pane), timeouts and
cancellation kill whole process trees, and nothing survives `close()`, a
Ctrl-C, or the end of the interpreter.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import libtmux
import psutil
import pytest

from orchard.errors import UsageError
from orchard.lab.workers.executors import make_executor, tmux
from orchard.lab.workers.executors.tmux import TmuxExecutor
from orchard.lab.workers.jobs.job import Job
from tests.helpers import slow_but
from tests.lab.lab_helpers import assert_nothing_left, processes_marked, wait_for

EXECUTORS = ["tmux", "subprocess"]


def _job(tmp_path: Path, name: str, command: str, mark: str, timeout_s: float | None = None) -> Job:
    return Job(name, command, tmp_path, tmp_path / "logs" / f"{name}.log", timeout_s,
               env={"ORCHARD_TEST_MARK": mark, "WHO": "worker two", "JOB": name})


def _sleepers(mark: str, job: str) -> int:
    return sum(1 for p in processes_marked(mark, job) if p.name() == "sleep")


@pytest.mark.parametrize("kind", EXECUTORS)
def test_exit_codes_signals_and_logs(kind: str, tmp_path: Path, socket_name: str, mark: str) -> None:
    with make_executor(kind, socket_name) as executor:
        executor.start(_job(tmp_path, "fails", "echo out; echo err >&2; exit 3", mark))
        executor.start(_job(tmp_path, "passes", 'echo "$WHO in $PWD"', mark))
        executor.start(_job(tmp_path, "signalled", "kill -TERM $$", mark))
        with pytest.raises(UsageError, match="already running"):
            executor.start(_job(tmp_path, "fails", "true", mark))
        wrappers = executor.pids()
        assert sorted(wrappers) == ["fails", "passes", "signalled"]
        results = {result.name: result for result in executor.wait(timeout_s=60)}
    assert_nothing_left(mark, socket_name)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in wrappers.values())
    assert (results["fails"].exit_code, results["fails"].ok) == (3, False)
    assert results["passes"].ok
    assert (results["signalled"].exit_code, results["signalled"].signal) == (None, signal.SIGTERM)
    assert (tmp_path / "logs/fails.log").read_text() == "out\nerr\nWORKER_DONE_3\n"
    assert (tmp_path / "logs/passes.log").read_text() == f"worker two in {tmp_path}\nWORKER_DONE_0\n"


@pytest.mark.parametrize("kind", EXECUTORS)
def test_timeout_and_cancel_kill_the_whole_tree(kind: str, tmp_path: Path, socket_name: str, mark: str) -> None:
    # Each job leaves a grandchild in a session of its own, and a child that ignores SIGTERM.
    tree = "setsid sleep 3600 & (trap '' TERM; sleep 3600) & sleep 3600"
    with make_executor(kind, socket_name) as executor:
        executor.start(_job(tmp_path, "slow", tree, mark, timeout_s=1.0))
        executor.start(_job(tmp_path, "unwanted", tree, mark))
        executor.start(_job(tmp_path, "quick", "true", mark, timeout_s=600))
        wait_for(lambda: _sleepers(mark, "unwanted") == 3, "the unwanted job's three sleeps")
        executor.cancel("unwanted", "superseded by a better hypothesis")
        with pytest.raises(UsageError, match="not running"):
            executor.cancel("never-started")
        results = {result.name: result for result in executor.wait(timeout_s=60)}
        assert [p for p in processes_marked(mark) if p.status() != psutil.STATUS_ZOMBIE] == []
    assert_nothing_left(mark, socket_name)
    slow, unwanted = results["slow"], results["unwanted"]
    assert slow.timed_out and not slow.cancelled and slow.exit_code == 137
    assert "timeout" in slow.reason
    assert unwanted.cancelled and not unwanted.timed_out
    assert unwanted.reason == "superseded by a better hypothesis"
    assert results["quick"].ok
    assert "killing the worker's processes" in (tmp_path / "logs/slow.log").read_text()


@pytest.mark.parametrize("kind", EXECUTORS)
def test_close_kills_running_workers_and_everything_the_executor_started(
    kind: str, tmp_path: Path, socket_name: str, mark: str
) -> None:
    executor = make_executor(kind, socket_name)
    executor.start(_job(tmp_path, "forever", "setsid sleep 3600 & sleep 3600", mark))
    wait_for(lambda: _sleepers(mark, "forever") == 2, "both sleeps")
    executor.close()
    executor.close()  # twice is harmless
    assert_nothing_left(mark, socket_name)
    with pytest.raises(RuntimeError, match="closed"):
        executor.start(_job(tmp_path, "late", "true", mark))


CTRL_C_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from orchard.lab.workers.executors import make_executor
    from orchard.lab.workers.jobs.job import Job
    kind, socket_name, mark, where = sys.argv[1:5]
    with make_executor(kind, socket_name) as executor:
        executor.start(Job("stuck", "setsid sleep 3600 & sleep 3600", Path(where),
                           Path(where) / "stuck.log", env={"ORCHARD_TEST_MARK": mark, "JOB": "stuck"}))
        print("started", flush=True)
        executor.wait()
    """
)


@pytest.mark.parametrize("kind", EXECUTORS)
def test_ctrl_c_leaves_nothing_running(kind: str, tmp_path: Path, socket_name: str, mark: str) -> None:
    script = tmp_path / "lab.py"
    script.write_text(CTRL_C_SCRIPT)
    lab = subprocess.Popen([sys.executable, str(script), kind, socket_name, mark, str(tmp_path)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert lab.stdout is not None and lab.stdout.readline() == "started\n"
    wait_for(lambda: _sleepers(mark, "stuck") == 2, "both sleeps")
    lab.send_signal(signal.SIGINT)
    _, stderr = lab.communicate(timeout=60)
    assert "KeyboardInterrupt" in stderr
    assert_nothing_left(mark, socket_name)


def test_tmux_windows_are_named_after_experiments_and_attachable(
    tmp_path: Path, socket_name: str, mark: str
) -> None:
    with make_executor("tmux", socket_name) as executor:
        assert executor.attach_command() == f"tmux -L {socket_name} attach -t orchard"
        executor.start(_job(tmp_path, "exp-a", "sleep 3600", mark))
        executor.start(_job(tmp_path, "exp-b", "sleep 3600", mark))
        server = libtmux.Server(socket_name=socket_name)
        expected = [f"exp-a {tmp_path}", f"exp-b {tmp_path}"]
        # tmux fills a new pane's current path a moment after the window exists
        deadline = time.monotonic() + 10
        while True:
            rows = server.cmd("list-windows", "-t", "orchard", "-F", "#{window_name} #{pane_current_path}").stdout
            if sorted(rows) == expected or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert sorted(rows) == expected
    assert_nothing_left(mark, socket_name)


def test_auto_picks_tmux_when_installed(socket_name: str) -> None:
    with make_executor("auto", socket_name) as executor:
        assert executor.kind == "tmux"
    with pytest.raises(UsageError, match="unknown executor"):
        make_executor("docker", socket_name)


@pytest.mark.parametrize("kind", slow_but(EXECUTORS, "subprocess"))
def test_duration_is_the_workers_real_exit_not_when_the_loop_got_to_it(
    kind: str, tmp_path: Path, socket_name: str, mark: str
) -> None:
    """A loop busy judging for seconds collects late; the worker's duration stays its own."""
    with make_executor(kind, socket_name) as executor:
        before = time.time()
        executor.start(_job(tmp_path, "quick", "sleep 0.3", mark))
        wait_for(lambda: "WORKER_DONE_0" in (tmp_path / "logs/quick.log").read_text()
                 if (tmp_path / "logs/quick.log").exists() else False, "the worker's exit line")
        seen_s = time.time() - before  # the worker had ended by then, however loaded the machine
        time.sleep(3.0)  # the loop is busy elsewhere
        (result,) = executor.wait(timeout_s=60)
    assert result.ok
    assert 0 < result.duration_s <= seen_s + 0.01, (result.duration_s, seen_s)  # collected 3 s after that


def test_the_tmux_executor_asks_tmux_only_when_a_job_may_have_ended(
    tmp_path: Path, socket_name: str, mark: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop polls every half second: each tmux call is a process started on the orchestrator's time.

    tmux is asked when a wrapper's status file appears, when orchard ended a job itself, or every few
    seconds (a wrapper killed from outside: that fallback is pushed out of the way here); never while
    nothing runs."""
    monkeypatch.setattr(tmux, "RECHECK_S", 3600.0)
    with make_executor("tmux", socket_name) as executor:
        assert isinstance(executor, TmuxExecutor)
        server = executor.server
        asked: list[str] = []
        cmd = server.cmd

        def counted(name: str, *args: object, **kwargs: object) -> object:
            asked.append(name)
            return cmd(name, *args, **kwargs)

        server.cmd = counted
        assert executor.poll() == [] and executor.poll() == [] and asked == []  # idle: no tmux process
        assert not libtmux.Server(socket_name=socket_name).is_alive()  # and no server started for it
        executor.start(_job(tmp_path, "one", "sleep 30", mark))
        asked.clear()
        assert executor.poll() == [] and asked == ["list-panes"]  # once at first
        asked.clear()
        assert executor.poll() == [] and asked == []  # and not again while nothing says it ended
        executor.start(_job(tmp_path, "quick", "true", mark))
        wait_for(lambda: "WORKER_DONE_0" in (tmp_path / "logs/quick.log").read_text()
                 if (tmp_path / "logs/quick.log").exists() else False, "the quick job's exit line")
        wait_for(lambda: [r.name for r in executor.poll()] == ["quick"], "the quick job collected")
        asked.clear()
        assert executor.poll() == [] and asked == []  # "one" runs on, nothing says it ended
        executor.cancel("one")
        (result,) = executor.wait(timeout_s=60)
    assert result.cancelled and "list-panes" in asked
    assert_nothing_left(mark, socket_name)
