"""The `contention` lane: `orchard bench contention`.

N workers, started together, each make K commits and publish them, in two
modes:

- `shared_checkout`: every worker commits in one checkout (each to its own
  tracked file, the flow's `commit_path`), so they contend for the index and
  HEAD locks; each then publishes HEAD to its own branch of the remote.
- `clone_per_worker`: one bare remote, one clone per worker; every commit
  (`commit_all`) is published to `main` at once, so workers race for the one
  ref: a rejected publication is followed by the flow's `sync` and another try.

Every command comes from the subject's flow (`[contention]`): a flow without
the keys a mode needs is a skip row naming them. The fixture and the integrity
checks use the harness's own git, never the subject.

A command that loses a race (a held lock, a rejected push) is retried with
exponential, fully jittered backoff and counted. Integrity is checked after
the run: every commit the CLI reported as made must be in the final history
and its line in the final tree (a missing one is a lost update), and `git
fsck` must be clean. Any lost update, fsck error or worker failure (a command
that failed outright or kept losing past the retry deadline; its unmade
commits are `commits_not_made`, not lost updates) fails the row.
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TextIO

from orchard import process
from orchard.bench.lanes.contention_options import ContentionOptions
from orchard.bench.lanes.race import TOTAL, Race, Worker, stop_commands
from orchard.bench.lanes.session import LaneResult, lane_context
from orchard.bench.lanes.steps import Recorder, fail
from orchard.bench.lanes.summary import skips_and_failures, subjects_section, table
from orchard.bench.measuring import rows, tokens
from orchard.bench.suites.flows import Flow
from orchard.errors import FixtureError

LANE = "contention"
SCENARIO = "contention_v1"


NEEDS = {
    "shared_checkout": ("[contention] clone", "[contention] commit_path", "[contention] publish"),
    "clone_per_worker": ("[contention] clone", "[contention] commit_all", "[contention] publish", "[contention] sync"),
}


def _worker_row(worker: Worker, rec: Recorder) -> dict[str, Any]:
    by_operation: dict[str, float] = {}
    for call in worker.calls:
        by_operation[call["operation"]] = round(by_operation.get(call["operation"], 0.0) + call["elapsed_ms"], 3)
    return {
        **rec.row("worker.total", "worker"),
        "worker": worker.index,
        "elapsed_ms": round((worker.ended - worker.started) * 1000, 3),
        "returncode": 0 if worker.error is None else 1,
        "failure_reason": worker.error,
        "commits": worker.commits,
        "publishes": worker.publishes,
        "lock_retries": worker.lock_retries,
        "publish_retries": worker.publish_retries,
        "retry_count": worker.lock_retries + worker.publish_retries,
        "tool_call_count": len(worker.calls),
        "phase_elapsed_ms": by_operation,
        **tokens.summed_fields(worker.calls),
    }


def _run_workers(race: Race, workers: Sequence[Worker]) -> None:
    """Every worker's race at once, each in its thread; on any error or Ctrl-C, every one is stopped."""
    # this thread is the barrier's last party: no worker runs a command before every future is known here, so a
    # Ctrl-C while they are being started (under load, a long moment) finds every one of them to stop
    barrier = threading.Barrier(race.n + 1)
    futures: list[Future[None]] = []
    with ThreadPoolExecutor(max_workers=race.n, thread_name_prefix="contention") as pool:
        try:
            for worker in workers:
                futures.append(pool.submit(race.work, worker, barrier))
            barrier.wait()
            for future in futures:
                future.result()
        except BaseException:
            race.stop.set()
            barrier.abort()
            stop_commands(futures)
            raise


def measure(race: Race) -> dict[str, Any]:
    """Run one race; writes a row per worker and returns the total row (written)."""
    workers = race.prepare()
    _run_workers(race, workers)
    worker_rows = [_worker_row(worker, race.rec) for worker in workers]
    for row in worker_rows:
        race.rec.emit_total(row)
    wall_s = max(w.ended for w in workers) - min(w.started for w in workers)
    checks = race.integrity(workers)
    snapshots = sum(w.commits for w in workers)
    phase_ms: dict[str, float] = {}
    for row in worker_rows:
        for operation, ms in row["phase_elapsed_ms"].items():
            phase_ms[operation] = round(phase_ms.get(operation, 0.0) + ms, 3)
    total = {
        **race.rec.row(TOTAL, "total"),
        "elapsed_ms": round(wall_s * 1000, 3),
        "returncode": 0,
        "snapshots": snapshots,
        "snapshots_per_second": round(snapshots / wall_s, 3) if wall_s > 0 else None,
        "publishes": sum(w.publishes for w in workers),
        "retry_count": sum(w.lock_retries + w.publish_retries for w in workers),
        "lock_retries": sum(w.lock_retries for w in workers),
        "publish_retries": sum(w.publish_retries for w in workers),
        "tool_call_count": sum(len(w.calls) for w in workers),
        "worker_failures": sum(w.error is not None for w in workers),
        "phase_elapsed_ms": phase_ms,
        **checks,
        **tokens.summed_fields([call for w in workers for call in w.calls]),
    }
    problems = [
        f"{checks['lost_updates']} lost update(s)" if checks["lost_updates"] else "",
        "git fsck is not clean" if not checks["fsck_clean"] else "",
        f"{total['worker_failures']} worker(s) failed" if total["worker_failures"] else "",
    ]
    if any(problems):
        fail(total, "; ".join(p for p in problems if p))
    return race.rec.emit_total(total)


def run_lane(options: ContentionOptions, out: TextIO | None = None) -> LaneResult:
    """Measure every (subject, mode, worker count); returns where the rows went."""
    options.validate()
    out = out or sys.stderr
    stop = threading.Event()
    with lane_context(
        LANE,
        options,
        summary,
        out,
        admitted_chars=process.DEFAULT_ADMITTED_CHARS,
        metadata={},
    ) as (session, ctx):
        for run_index in range(options.runs):
            for subject in options.subjects:
                for mode in options.modes:
                    for count in options.workers:
                        folder = session.root / f"{subject.name}-{mode}-{count}-r{run_index}"
                        rec = Recorder(
                            ctx,
                            subject,
                            SCENARIO,
                            run_index,
                            fields={"remote_transport": "local_file", "mode": mode, "workers": count,
                                    "commits_per_worker": options.commits},
                            fixture_id=f"contention-{mode}-v1",
                            instruction_level="scripted_workers",
                            stand_ins={str(folder): "ROOT"},
                        )
                        flow = options.flows[subject.kind]
                        reason = subject.absent_reason if subject.bin is None else _skip_reason(flow, mode)
                        if reason:
                            rec.skip(reason, operation="contention.skipped")
                            continue
                        print(
                            f"[run] contention {mode} workers={count} commits={options.commits} subject={subject.name}",
                            file=out,
                            flush=True,
                        )
                        folder.mkdir()
                        try:
                            measure(Race(rec, flow, mode, count, options, folder, stop))
                        except FixtureError as error:
                            rec.emit_total(fail({**rec.row(TOTAL, "total"), "returncode": 0}, f"fixture: {error}"))
                        if not options.keep_workdirs:
                            shutil.rmtree(folder, ignore_errors=True)
    return session.result()


def _skip_reason(flow: Flow, mode: str) -> str | None:
    """Why this flow cannot enter this mode (the keys it lacks), or None."""
    if flow.remote != "git":
        return (
            f"the {flow.kind} flow ({flow.path.name}) publishes to {flow.remote!r}; "
            'contention publishes to a git remote (remote = "git")'
        )
    return flow.skip_reason(f"contention {mode}", NEEDS[mode])


def summary(all_rows: Sequence[Mapping[str, Any]]) -> str:
    totals = [row for row in all_rows if row.get("operation") == TOTAL]
    lines = [
        "# Contention summary",
        "",
        "N workers start together; each makes K commits and publishes them. shared_checkout:",
        "one checkout, each worker commits its own file and pushes to its own branch.",
        "clone_per_worker: a clone each, every commit pushed to main (a rejected push is",
        "rebased and retried). Retries count lost races. Integrity: every commit in the final",
        "history and every written line in the final tree (lost updates fail the row), git fsck clean.",
        "Each subject's commands come from its flow's [contention] table.",
    ]
    lines += subjects_section(all_rows)
    lines += [""]
    lines += table(
        (
            "Subject",
            "Mode",
            "Workers",
            "Commits/worker",
            "Wall ms",
            "Snapshots/s",
            "Retries",
            "Tool calls",
            "Lost updates",
            "fsck clean",
            "Result",
        ),
        (
            (
                f"`{r['subject']}`",
                r.get("mode"),
                r.get("workers"),
                r.get("commits_per_worker"),
                r.get("elapsed_ms"),
                r.get("snapshots_per_second"),
                r.get("retry_count"),
                r.get("tool_call_count"),
                r.get("lost_updates"),
                r.get("fsck_clean"),
                "pass" if not rows.is_failure(r) else "FAIL",
            )
            for r in totals
        ),
    )
    lines += skips_and_failures(all_rows)
    return "\n".join(lines) + "\n"
