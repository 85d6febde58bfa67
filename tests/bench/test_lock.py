"""The machine-wide measurement lock, between real processes on a private lock file."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from orchard.bench.lock import (
    ENV_PATH,
    ENV_SWITCH,
    MACHINE_LOCK_PATH,
    LockStatus,
    MeasurementLock,
    lock_status,
    read_holder,
)

# Enters the lock `times` times; inside, prints its metadata and the monotonic
# bounds of the section, then holds it until the release file exists.
HOLDER = """
import json, os, sys, time
from pathlib import Path
from orchard.bench.lock import MeasurementLock
label, release, times = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
lock = MeasurementLock(label)
for _ in range(times):
    with lock:
        start = time.monotonic_ns()
        while not release.exists():
            time.sleep(0.005)
        end = time.monotonic_ns()
        print(json.dumps({"pid": os.getpid(), "start": start, "end": end, **lock.metadata()}), flush=True)
"""


class Party:
    """One process using the lock; its stderr goes to a file the test can poll."""

    def __init__(self, tmp: Path, label: str, env: dict[str, str], times: int = 1, released: bool = False) -> None:
        self.lock_path = Path(env.get(ENV_PATH, MACHINE_LOCK_PATH))
        self.release = tmp / f"release-{label.replace(' ', '_')}"
        if released:
            self.release.touch()
        self.err_path = tmp / f"stderr-{label.replace(' ', '_')}"
        self._err: IO[bytes] = open(self.err_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, label, str(self.release), str(times)],
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=env,
            text=True,
        )

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def wait_stderr(self, needle: str, within_s: float = 60.0) -> str:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if needle in self.stderr:
                return self.stderr
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise AssertionError(f"never printed {needle!r}; stderr: {self.stderr!r}")

    def wait_holding(self) -> None:
        """Blocks until the process has taken the lock and named itself its holder."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            holder = read_holder(self.lock_path)
            if holder and holder.get("pid") == self.proc.pid:
                return
            time.sleep(0.01)
        raise AssertionError("the holder never took the lock")

    def finish(self) -> list[dict[str, object]]:
        self.release.touch()
        out, _ = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, self.stderr
        return [json.loads(line) for line in out.splitlines()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._err.close()


@pytest.fixture
def lock_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_SWITCH}
    env[ENV_PATH] = str(tmp_path / "private.lock")
    return env


@pytest.fixture
def parties() -> Iterator[list[Party]]:
    started: list[Party] = []
    yield started
    for party in started:
        party.stop()


def _start(parties: list[Party], tmp: Path, label: str, env: dict[str, str], **kwargs: object) -> Party:
    party = Party(tmp, label, env, **kwargs)  # type: ignore[arg-type]
    parties.append(party)
    return party


def test_a_waiter_names_the_holder_and_records_its_wait(
    tmp_path: Path, lock_env: dict[str, str], parties: list[Party]
) -> None:
    holder = _start(parties, tmp_path, "orchard verdict demo", lock_env)
    holder.wait_holding()
    waiter = _start(parties, tmp_path, "second", lock_env, released=True)
    line = waiter.wait_stderr("[runlock] waiting")
    assert line.strip() == f"[runlock] waiting for pid {holder.proc.pid} (orchard verdict demo) ..."
    assert waiter.proc.poll() is None  # still blocked while the holder holds
    (held,) = holder.finish()
    (waited,) = waiter.finish()
    assert waited["measurement_lock"] == "private"  # ORCHARD_LOCK_FILE: not the machine-wide lock
    assert waited["lock_file"] == lock_env[ENV_PATH]
    assert waited["lock_wait_ms"] > 0
    assert waited["start"] > held["end"]
    assert "[runlock]" not in holder.stderr
    assert Path(lock_env[ENV_PATH]).exists()  # the private path was used


def test_the_status_names_the_holder_and_the_queue_as_dashboard_and_status_show_them(
    tmp_path: Path, lock_env: dict[str, str], parties: list[Party], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    path = Path(lock_env[ENV_PATH])
    holder = _start(parties, tmp_path, "orchard lab verdict", lock_env)
    holder.wait_holding()
    waiter = _start(parties, tmp_path, "queued", lock_env, released=True)
    waiter.wait_stderr("[runlock] waiting")
    status = lock_status(path)
    assert (status.state, status.path, status.holder_pid, status.holder_label) == (
        "held", str(path), holder.proc.pid, "orchard lab verdict")
    assert status.queue == (waiter.proc.pid,)
    holder.finish()
    waiter.finish()
    after = lock_status(path)
    assert (after.state, after.holder_pid, after.holder_label, after.queue) == ("free", waiter.proc.pid, "queued", ())
    monkeypatch.setenv(ENV_SWITCH, "off")
    assert lock_status(path) == LockStatus("disabled", str(path), None, None, None, ())


def test_the_lock_is_released_when_the_holder_is_killed(
    tmp_path: Path, lock_env: dict[str, str], parties: list[Party]
) -> None:
    holder = _start(parties, tmp_path, "doomed", lock_env)
    holder.wait_holding()
    waiter = _start(parties, tmp_path, "survivor", lock_env, released=True)
    waiter.wait_stderr(f"waiting for pid {holder.proc.pid} (doomed)")
    holder.proc.kill()  # SIGKILL: no chance to release anything itself
    holder.proc.wait()
    (waited,) = waiter.finish()
    assert waited["measurement_lock"] == "private"
    holder_now = read_holder(Path(lock_env[ENV_PATH]))
    assert holder_now is not None
    assert (holder_now["pid"], holder_now["label"]) == (waiter.proc.pid, "survivor")


def test_sections_of_two_processes_never_overlap(
    tmp_path: Path, lock_env: dict[str, str], parties: list[Party]
) -> None:
    first = _start(parties, tmp_path, "a", lock_env, times=15, released=True)
    second = _start(parties, tmp_path, "b", lock_env, times=15, released=True)
    sections = sorted(
        (row["start"], row["end"])
        for row in first.finish() + second.finish()  # type: ignore[misc]
    )
    assert len(sections) == 30
    for (_, end), (start, _) in itertools.pairwise(sections):
        assert start > end


def test_switching_the_lock_off_warns_loudly_once_and_is_recorded(
    tmp_path: Path, lock_env: dict[str, str], parties: list[Party]
) -> None:
    holder = _start(parties, tmp_path, "holder", lock_env)
    holder.wait_holding()
    unlocked = _start(parties, tmp_path, "unlocked", {**lock_env, ENV_SWITCH: "off"}, times=2, released=True)
    rows = unlocked.finish()  # does not wait for the holder
    assert [row["measurement_lock"] for row in rows] == ["disabled", "disabled"]
    assert all(row["lock_wait_ms"] == 0 for row in rows)
    assert unlocked.stderr.count(f"[runlock] WARNING: {ENV_SWITCH}=off") == 1
    assert "NOT serialized" in unlocked.stderr
    assert "waiting" not in unlocked.stderr
    holder.finish()


def test_an_uncontended_lock_is_held_without_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    out = io.StringIO()
    lock = MeasurementLock("alone", path=tmp_path / "alone.lock", out=out)
    with lock:
        assert read_holder(tmp_path / "alone.lock") is not None
    assert lock.metadata()["measurement_lock"] == "private"
    assert lock.metadata()["lock_file"] == str(tmp_path / "alone.lock")
    assert out.getvalue() == ""


RAW_FLOCK = """
import fcntl, sys, time
handle = open(sys.argv[1], "a")
fcntl.flock(handle, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(600)
"""


def test_a_waiter_never_names_itself_from_its_own_stale_holder_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between taking the lock and naming itself, a new holder leaves the last holder's entry."""
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    path = tmp_path / "stale.lock"
    out = io.StringIO()
    lock = MeasurementLock("me", path=path, out=out)
    with lock:
        pass
    assert read_holder(path)["pid"] == os.getpid()  # type: ignore[index]
    # another process takes the kernel lock without (yet) naming itself
    other = subprocess.Popen([sys.executable, "-c", RAW_FLOCK, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline() == "locked\n"
        waiter = threading.Thread(target=lambda: lock.__enter__())
        waiter.start()
        deadline = time.monotonic() + 60
        while "waiting" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        other.kill()
        other.wait()
        waiter.join(timeout=60)
        assert not waiter.is_alive()
        lock.__exit__(None, None, None)
    finally:
        other.kill()
        other.wait()
        if other.stdout:
            other.stdout.close()
    assert out.getvalue().strip() == "[runlock] waiting for a holder that has not named itself yet ..."


def test_a_campaign_waiting_for_another_of_its_own_process_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lab judges and confirms in threads of one process: the waiter names the other campaign, not 'unknown'."""
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    path = tmp_path / "threads.lock"
    out = io.StringIO()
    holder, waiter = MeasurementLock("orchard confirm wordfreq", path=path), MeasurementLock("me", path=path, out=out)
    with holder:
        thread = threading.Thread(target=lambda: waiter.__enter__())
        thread.start()
        deadline = time.monotonic() + 60
        while "waiting" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    thread.join(timeout=60)
    waiter.__exit__(None, None, None)
    assert out.getvalue().strip() == "[runlock] waiting for orchard confirm wordfreq in this process ..."


# Enters the lock `times` times, holding it ~20 ms each time, like a campaign's pairs.
CAMPAIGN = """
import json, os, sys, time
from orchard.bench.lock import MeasurementLock
lock = MeasurementLock(sys.argv[1])
for _ in range(int(sys.argv[2])):
    with lock:
        start = time.monotonic_ns()
        time.sleep(0.02)
        print(json.dumps({"pid": os.getpid(), "start": start}), flush=True)
lock.print_total()
"""


@pytest.mark.slow
def test_two_campaigns_take_turns_instead_of_one_keeping_the_machine(tmp_path: Path, lock_env: dict[str, str]) -> None:
    """flock has no queue: without the courtesy pause, whoever holds it re-acquires between pairs."""
    procs = [
        subprocess.Popen([sys.executable, "-c", CAMPAIGN, name, "40"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=lock_env, text=True)
        for name in ("first", "second")
    ]
    rows = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        # one line per wait for one holder, not one per pair; the total at the end
        assert err.count("[runlock] waiting") <= 1, err
        if "[runlock] waiting" in err:
            assert "[runlock] waited" in err and "in total" in err
        rows += [json.loads(line) for line in out.splitlines()]
    order = [row["pid"] for row in sorted(rows, key=lambda row: row["start"])]
    switches = sum(1 for a, b in itertools.pairwise(order) if a != b)
    assert len(order) == 80
    assert switches >= 10, f"only {switches} hand-overs: one campaign kept the lock"


PATH_PROBE = """
import json
from orchard.bench.lock import MeasurementLock, default_lock_path
lock = MeasurementLock("probe")
print(json.dumps({"default": str(default_lock_path()), **lock.metadata()}))
"""


def test_the_machine_wide_lock_is_one_path_whatever_tmpdir_says(tmp_path: Path) -> None:
    """Two campaigns with different TMPDIR overlapped while both rows said `held`.

    Only where the lock lives is checked here (without taking it: the real
    machine-wide lock may be held by a real measurement right now).
    """
    env = {k: v for k, v in os.environ.items() if k not in (ENV_SWITCH, ENV_PATH)}
    seen = []
    for name in ("tmp-a", "tmp-b"):
        (tmp_path / name).mkdir()
        probe = subprocess.run([sys.executable, "-c", PATH_PROBE], env={**env, "TMPDIR": str(tmp_path / name)},
                               capture_output=True, text=True, check=True)
        seen.append(json.loads(probe.stdout))
    assert seen[0] == seen[1]
    assert seen[0] == {"default": str(MACHINE_LOCK_PATH), "measurement_lock": "held",
                       "lock_file": str(MACHINE_LOCK_PATH), "lock_wait_ms": 0.0}
    moved = subprocess.run([sys.executable, "-c", PATH_PROBE], env={**env, ENV_PATH: str(tmp_path / "own.lock")},
                           capture_output=True, text=True, check=True)
    assert json.loads(moved.stdout)["measurement_lock"] == "private"



# The CLI's root group with its flags (and a command that does nothing), then a judge thread of the process
# waiting for the lock another campaign holds, as the lab's judges and landing do.
QUIET_JUDGE = """
import sys, threading, time
from pathlib import Path
from orchard.bench.lock import MeasurementLock
from orchard.cli import cli
cli.main([*sys.argv[2:], "status", "--help"], standalone_mode=False)
path = Path(sys.argv[1])
holder, judge = MeasurementLock("orchard verdict wordfreq", path=path), MeasurementLock("judge", path=path)
with holder:
    thread = threading.Thread(target=judge.__enter__, name="judge_0")
    thread.start()
    deadline = time.monotonic() + 60
    while not judge.waits and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # the waiting line is said right after the count
thread.join(timeout=60)
judge.__exit__(None, None, None)
judge.print_total()
"""


@pytest.mark.parametrize("flags", [["-q"], []], ids=["orchard -q", "orchard"])
def test_quiet_silences_the_waiting_notes_of_every_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str]
) -> None:
    """`orchard -q run` and `orchard -q demo` wait for the lock in the lab's judge threads, not the CLI's own:
    -q holds for the whole process, and without it the judge thread's waiting line is said."""
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    done = subprocess.run([sys.executable, "-c", QUIET_JUDGE, str(tmp_path / "judges.lock"), *flags],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if flags:
        assert done.stderr == ""
    else:
        assert done.stderr.startswith("[runlock] waiting for orchard verdict wordfreq in this process ...\n"
                                      "[runlock] waited ")
