"""The process runner (`orchard.process`), against real processes: kills, output limits, resources."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from orchard.process import run

PY = sys.executable


def is_gone(pid: int, within_s: float = 10.0) -> bool:
    """True once `pid` no longer runs (exited, or a zombie nobody has reaped yet).

    SIGKILL is delivered asynchronously, so this polls; the bound only keeps a
    broken runner from hanging the test.
    """
    deadline = time.monotonic() + within_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def wait_for_file(path: Path, within_s: float = 30.0) -> str:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def kill_if_running(pid: int) -> None:
    """Test cleanup for a process the runner was supposed to kill."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def sig_ignored(status_line: str, signum: int) -> bool:
    """Whether /proc/<pid>/status's SigIgn mask includes `signum`."""
    mask = int(status_line.split(":", 1)[1].strip(), 16)
    return bool(mask & (1 << (signum - 1)))


def test_timeout_kills_the_group_including_a_grandchild_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    # The grandchild ignores SIGTERM (inherited across exec) and records its pid
    # and signal mask; the child waits for it forever.
    script = (
        f"sh -c 'trap \"\" TERM; grep SigIgn /proc/$$/status > {pidfile}.mask; "
        f"echo $$ > {pidfile}; exec sleep 600' & "
        "echo started; wait"
    )
    capture = run(script, timeout_s=3)
    grandchild = int(wait_for_file(pidfile))
    try:
        assert capture.timed_out
        assert capture.returncode is None
        assert not capture.ok
        assert capture.stdout == b"started\n"  # output up to the kill is kept
        assert sig_ignored((tmp_path / "grandchild.pid.mask").read_text(), signal.SIGTERM)
        assert is_gone(grandchild), "the SIGTERM-ignoring grandchild survived the timeout"
    finally:
        kill_if_running(grandchild)


@pytest.mark.parametrize(
    "script",
    ["sleep 600 & echo $!", "sleep 600 >/dev/null 2>&1 </dev/null & echo $!"],
    ids=["holding-the-pipes", "detached-from-the-pipes"],
)
def test_grandchild_left_in_background_after_the_child_exits_is_killed(script: str) -> None:
    capture = run(script, timeout_s=60)
    grandchild = int(capture.stdout_text)
    try:
        assert capture.returncode == 0 and not capture.timed_out
        assert is_gone(grandchild)
    finally:
        kill_if_running(grandchild)


def test_interrupting_the_launcher_kills_the_measured_group(tmp_path: Path) -> None:
    """Ctrl-C in the middle of a measurement leaves nothing running."""
    child_pid, grandchild_pid = tmp_path / "child.pid", tmp_path / "grandchild.pid"
    driver = textwrap.dedent(
        f"""
        from orchard.process import run
        run("echo $$ > {child_pid}; sleep 600 & echo $! > {grandchild_pid}; wait", timeout_s=600)
        """
    )
    launcher = subprocess.Popen([PY, "-c", driver], stderr=subprocess.PIPE)
    try:
        wait_for_file(grandchild_pid)
        child, grandchild = int(wait_for_file(child_pid)), int(wait_for_file(grandchild_pid))
        launcher.send_signal(signal.SIGINT)
        _, err = launcher.communicate(timeout=60)
        assert b"KeyboardInterrupt" in err
        assert is_gone(child) and is_gone(grandchild)
    finally:
        launcher.kill()
        launcher.wait()
        for pidfile in (child_pid, grandchild_pid):
            if pidfile.exists() and pidfile.read_text().strip():
                kill_if_running(int(pidfile.read_text()))


def _assert_interrupted_and_gone(driver: str, child_pid: Path) -> None:
    """`driver` runs a command that writes its pid to `child_pid` and is Ctrl-C'd: it ends so, and the child too."""
    launcher = subprocess.Popen([PY, "-c", driver], stderr=subprocess.PIPE)
    try:
        _, err = launcher.communicate(timeout=60)
        assert b"KeyboardInterrupt" in err
        assert is_gone(int(wait_for_file(child_pid)))
    finally:
        launcher.kill()
        launcher.wait()
        if child_pid.exists() and child_pid.read_text().strip():
            kill_if_running(int(child_pid.read_text()))


def test_ctrl_c_while_the_child_is_being_started_still_kills_its_group(tmp_path: Path) -> None:
    """A Ctrl-C that lands inside Popen (the child started, Popen not yet returned) is held, then the group dies."""
    child_pid = tmp_path / "child.pid"
    driver = textwrap.dedent(
        f"""
        import os, signal, subprocess, time
        from orchard.process import run
        real = subprocess.Popen
        class Interrupted(real):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                deadline = time.monotonic() + 30
                while not os.path.exists({str(child_pid)!r}) and time.monotonic() < deadline:
                    time.sleep(0.01)
                os.kill(os.getpid(), signal.SIGINT)  # before Popen returns to the runner
        subprocess.Popen = Interrupted
        run("echo $$ > {child_pid}; exec sleep 600", timeout_s=600)
        """
    )
    _assert_interrupted_and_gone(driver, child_pid)


def test_ctrl_c_the_moment_the_runner_stops_holding_it_still_kills_the_group(tmp_path: Path) -> None:
    """The held Ctrl-C's way out: one that lands right as the runner gives SIGINT back its handler (the child
    started, the runner not yet watching it) kills the group too. It once came between the two under load, and the
    measured command outlived its runner (test_interrupting_the_launcher_kills_the_measured_group, in a fast tier)."""
    child_pid = tmp_path / "child.pid"
    driver = textwrap.dedent(
        f"""
        import os, signal, time
        from orchard.process import run
        real = signal.signal
        def restored_then_interrupted(signum, handler):
            previous = real(signum, handler)
            if signum == signal.SIGINT and handler is signal.default_int_handler:
                deadline = time.monotonic() + 30
                while not os.path.exists({str(child_pid)!r}) and time.monotonic() < deadline:
                    time.sleep(0.01)
                os.kill(os.getpid(), signal.SIGINT)  # the first moment it is not held
            return previous
        signal.signal = restored_then_interrupted
        run("echo $$ > {child_pid}; exec sleep 600", timeout_s=600)
        """
    )
    _assert_interrupted_and_gone(driver, child_pid)


def test_admitted_output_is_truncated_and_the_totals_are_exact() -> None:
    code = "import sys; sys.stdout.write('a' * 100_000); sys.stderr.write('b' * 5_000)"
    capture = run([PY, "-c", code], admitted_chars=1_000)
    assert capture.stdout == b"a" * 1_000
    assert capture.stderr == b"b" * 1_000
    assert (capture.stdout_bytes, capture.stderr_bytes) == (100_000, 5_000)
    assert capture.stdout_truncated and capture.stderr_truncated


def test_output_within_the_limit_is_kept_whole_and_not_flagged() -> None:
    capture = run([PY, "-c", "print('x' * 999, end='')"], admitted_chars=1_000)
    assert capture.stdout == b"x" * 999 and capture.stdout_bytes == 999
    assert not capture.stdout_truncated and not capture.stderr_truncated
    assert capture.stderr_bytes == 0


def test_binary_output_is_kept_as_bytes() -> None:
    capture = run([PY, "-c", "import sys; sys.stdout.buffer.write(bytes(range(256)))"])
    assert capture.stdout == bytes(range(256))


def test_stdin_is_fed_to_the_child() -> None:
    capture = run(["cat"], stdin=b"hello\nworld\n")
    assert capture.stdout == b"hello\nworld\n"


def test_stdin_larger_than_a_pipe_while_the_child_writes_it_back() -> None:
    """Writing stdin must not block while the child waits for us to read its stdout."""
    payload = os.urandom(2_000_000)
    capture = run(["cat"], stdin=payload, timeout_s=120, admitted_chars=len(payload))
    assert not capture.timed_out
    assert capture.stdout == payload and capture.stdout_bytes == len(payload)


def test_timeout_holds_for_a_child_that_never_reads_its_stdin() -> None:
    capture = run(["sleep", "600"], stdin=b"x" * 1_000_000, timeout_s=1)
    assert capture.timed_out and capture.returncode is None


def test_without_stdin_the_child_reads_end_of_file() -> None:
    capture = run(["cat"], timeout_s=60)  # would wait forever on an inherited terminal
    assert capture.returncode == 0 and capture.stdout == b""


@pytest.mark.parametrize("code", [0, 1, 3, 77, 255])
def test_exit_codes_are_reported(code: int) -> None:
    capture = run([PY, "-c", f"import sys; sys.exit({code})"])
    assert capture.returncode == code
    assert capture.ok == (code == 0)
    assert not capture.timed_out


def test_a_child_killed_by_a_signal_reports_the_negative_signal() -> None:
    capture = run("kill -KILL $$")
    assert capture.returncode == -signal.SIGKILL
    assert not capture.timed_out and not capture.ok


def test_a_missing_program_raises() -> None:
    with pytest.raises(FileNotFoundError):
        run(["/nonexistent/orchard-no-such-binary"])


def test_cpu_and_peak_rss_of_a_child_that_allocates_100_mb() -> None:
    # 100 MB beyond what this test process already holds: the launcher's own peak is
    # carried into the child at exec, and a peak below it cannot be measured
    launcher = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    size = launcher + (100 << 20)
    code = f"import time; b = b'x' * {size}; t = time.process_time(); \nwhile time.process_time() - t < 0.2: pass"
    capture = run([PY, "-c", code])
    assert capture.returncode == 0
    assert capture.peak_rss_bytes is not None
    assert size <= capture.peak_rss_bytes < size + (300 << 20)
    assert capture.cpu_ms is not None and capture.cpu_ms >= 200


def test_peak_rss_of_a_tiny_child_is_unmeasured_not_the_launchers() -> None:
    """Linux carries the launcher's peak RSS into the child at exec: no honest figure exists."""
    capture = run(["/bin/true"])
    assert capture.returncode == 0
    assert capture.peak_rss_bytes is None
    assert capture.cpu_ms is not None and capture.cpu_ms >= 0


def test_resources_of_a_timed_out_child_are_still_read() -> None:
    capture = run([PY, "-c", "while True: pass"], timeout_s=1)
    assert capture.timed_out
    assert capture.cpu_ms is not None and capture.cpu_ms > 0


def test_a_shell_string_runs_through_sh_and_an_argv_does_not() -> None:
    shell = run("echo $((40 + 2)) | tr 4 X")
    assert shell.stdout == b"X2\n"
    assert shell.command == "echo $((40 + 2)) | tr 4 X"
    argv = run(["echo", "$((40 + 2))", "|", "tr"])
    assert argv.stdout == b"$((40 + 2)) | tr\n"
    assert argv.command == ["echo", "$((40 + 2))", "|", "tr"]


def test_argv_parts_are_converted_to_strings(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("content")
    capture = run(["cat", tmp_path / "f"])
    assert capture.stdout == b"content"
    assert capture.command == ["cat", str(tmp_path / "f")]


def test_cwd_and_env_are_the_ones_given(tmp_path: Path) -> None:
    env = {"ORCHARD_T": "v", "PATH": "/usr/bin:/bin"}
    capture = run("pwd; echo $ORCHARD_T; echo ${HOME:-unset}", cwd=tmp_path, env=env)
    assert capture.stdout_text.splitlines() == [str(tmp_path), "v", "unset"]


def test_elapsed_time_covers_the_run_and_the_bounds_are_ordered() -> None:
    capture = run(["sleep", "0.3"])
    assert capture.elapsed_ms >= 300
    assert capture.ended_ns > capture.started_ns
    assert capture.started_at <= capture.ended_at
