"""Contention on real git: 2 and 8 workers in both modes, integrity, lost updates."""

from __future__ import annotations

import signal
import time
from typing import Any

import psutil
import pytest

from orchard.bench.lanes import contention
from orchard.bench.lanes.contention_options import parse_workers
from orchard.errors import UsageError
from tests.bench.lanes_support import LaneEnv, cli_process, invoke, latest_rows, totals, wait_for, without_oak_on_path


@pytest.mark.slow
def test_two_and_eight_workers_in_both_modes_keep_every_commit(lane_env: LaneEnv) -> None:
    result = invoke(
        "bench",
        "contention",
        "--subjects",
        "git",
        "--workers",
        "2,8",
        "--commits",
        "3",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "contention")
    runs = totals(rows, "contention.total")
    assert [(r["mode"], r["workers"]) for r in runs] == [
        ("shared_checkout", 2),
        ("shared_checkout", 8),
        ("clone_per_worker", 2),
        ("clone_per_worker", 8),
    ]
    for total in runs:
        assert total["returncode"] == 0, total.get("failure_reason")
        assert total["snapshots"] == total["commits_expected"] == total["workers"] * 3
        assert total["lost_updates"] == 0 and total["fsck_clean"] is True
        assert total["snapshots_per_second"] > 0
        assert total["tool_call_count"] >= total["snapshots"] + total["publishes"]
        assert (
            total["measurement_lock"] == "private" and total["remote_transport"] == "local_file"
        )  # ORCHARD_LOCK_FILE is set for tests
        workers = [
            r
            for r in rows
            if r["operation"] == "worker.total" and r["mode"] == total["mode"] and r["workers"] == total["workers"]
        ]
        assert sorted(r["worker"] for r in workers) == list(range(total["workers"]))
        assert sum(r["retry_count"] for r in workers) == total["retry_count"]
    clone8 = runs[3]
    assert clone8["publishes"] == 8 * 3  # every commit published to main
    assert clone8["publish_retries"] > 0  # eight workers racing for one ref must lose some races
    assert set(clone8["phase_elapsed_ms"]) >= {"snapshot", "publish"}
    assert "| `git` | clone_per_worker | 8 | 3 |" in result.output
    assert lane_env.leftovers() == []


def test_a_lost_commit_fails_the_row(lane_env: LaneEnv) -> None:
    # A CLI that reports success for one commit without making it.
    lossy = lane_env.wrapper("lossy-git", 'case "$*" in *"w1 c1"*) exit 0;; esac\nexec git "$@"\n')
    result = invoke(
        "bench",
        "contention",
        "--subjects",
        f"lossy:git={lossy}",
        "--workers",
        "2",
        "--commits",
        "3",
        "--modes",
        "clone_per_worker",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 1
    (total,) = totals(latest_rows(lane_env.results, "contention"), "contention.total")
    assert total["commits_missing_from_history"] == 1 and total["lost_updates"] == 1
    assert total["returncode"] == 1 and "lost update" in total["failure_reason"]
    assert "| `lossy` | clone_per_worker | 2 | 3 |" in result.output and "FAIL" in result.output


def test_absent_or_non_git_subjects_are_skip_rows(lane_env: LaneEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    without_oak_on_path(monkeypatch)
    result = invoke(
        "bench",
        "contention",
        "--subjects",
        "oak",
        "--workers",
        "2",
        "--modes",
        "shared_checkout",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0
    (skip,) = latest_rows(lane_env.results, "contention")
    assert skip["returncode"] == 77 and "no oak binary" in skip["skip_reason"]


@pytest.mark.parametrize("text", ["0", "2,x", "-1", ""])
def test_bad_worker_counts_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--workers"):
        parse_workers(text)


def test_cli_bad_mode_exits_2(lane_env: LaneEnv) -> None:
    result = invoke("bench", "contention", "--workers", "2", "--modes", "sideways", "--results", str(lane_env.results))
    assert result.exit_code == 2 and "unknown contention mode 'sideways'" in result.output
    assert not lane_env.results.exists()


def test_ctrl_c_stops_every_worker_command(lane_env: LaneEnv) -> None:
    slow = lane_env.wrapper("slow-git", 'if [ "$1" = commit ]; then sleep 60; fi\nexec git "$@"\n')
    args = [
        "bench",
        "contention",
        "--subjects",
        f"slow:git={slow}",
        "--workers",
        "4",
        "--commits",
        "2",
        "--modes",
        "clone_per_worker",
        "--results",
        str(lane_env.results),
    ]
    with cli_process(args, lane_env.temp) as process:
        sleepers = wait_for(process.pid, lambda p: p.name() == "sleep", count=4)
        assert len(sleepers) == 4
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert process.returncode != 0
    assert time.monotonic() - started < 20  # not the 60 s the commands would have slept
    _, alive = psutil.wait_procs(sleepers, timeout=5)
    assert not alive
    assert lane_env.leftovers() == []


def test_ctrl_c_while_the_workers_are_started_runs_none_of_their_commands(
        lane_env: LaneEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ctrl-C lands after the last worker was handed to its thread, before the lane waits for them (a moment
    that grows under load): the race must not start. It used to: the interrupt was raised outside the lane's
    handler, every worker made its commits (here a note each; with the test above's `sleep 60`, the lane had not
    exited 30 s after its SIGINT), and only then did the interrupt end the lane."""
    notes = lane_env.temp.parent / "commits-made"
    notes.mkdir()
    noting = lane_env.wrapper("noting-git", f'if [ "$1" = commit ]; then touch {notes}/$$; fi\nexec git "$@"\n')

    class InterruptedAtTheLast(contention.ThreadPoolExecutor):
        submitted = 0

        def submit(self, *args: Any, **kwargs: Any) -> Any:
            future = super().submit(*args, **kwargs)
            self.submitted += 1
            if self.submitted == 4:  # the fourth worker handed to its thread: the Ctrl-C arrives now
                raise KeyboardInterrupt
            return future

    monkeypatch.setattr(contention, "ThreadPoolExecutor", InterruptedAtTheLast)
    result = invoke("bench", "contention", "--subjects", f"noting:git={noting}", "--workers", "4", "--commits", "2",
                    "--modes", "clone_per_worker", "--results", str(lane_env.results))
    assert result.exit_code != 0
    assert list(notes.iterdir()) == []  # no worker committed after the Ctrl-C
    assert lane_env.leftovers() == []


@pytest.mark.slow
def test_thirty_two_workers_work(lane_env: LaneEnv) -> None:
    result = invoke("bench", "contention", "--workers", "32", "--commits", "2", "--results", str(lane_env.results))
    assert result.exit_code == 0, result.output
    assert all(t["lost_updates"] == 0 for t in totals(latest_rows(lane_env.results, "contention"), "contention.total"))
