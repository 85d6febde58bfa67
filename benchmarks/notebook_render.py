"""What the notebook costs per experiment in a big lab: the render after one more judgment, at 1,000 experiments.

    PYTHONPATH=. python benchmarks/notebook_render.py [--experiments 1000] [--runs 5] [--updates 20] [--json out.json]

Each run makes a workspace (small git target and bench) whose lab.db holds
`--experiments` judged experiments (a LAND in ten, with its landing steps,
the rest KILLed; every one with its start and judgment in the journal, its
candidate, judgment and verdict in its row), written as rows in lab.db's
on-disk format, which this orchard and the one before typed events share.
Then, `--updates` times, one more experiment is judged (KILL, and a LAND
in five) and the notebook brought up to date, as the loop does after each
decision; each update is timed. Reported: the median update per run, for
KILL and for LAND, and the median of those over the runs. Run it against
each version of orchard (for the older one, put its `src/` first on
PYTHONPATH): the older renders the whole notebook (`write_notebook`), this
one updates it (`notebook/files.Notebook`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from loop_idle import _repo  # benchmarks/ is the script's own directory on sys.path

from orchard.lab.db.state import LabState
from orchard.lab.notebook import files as records
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.loop_support import bare_candidate, metric, verdict_of

BASE, BENCH = "a1" * 20, "b2" * 20
PATCH = "--- a/src/f.txt\n+++ b/src/f.txt\n@@ -1 +1 @@\n-0\n+1\n" * 20  # a small change, as most are
WIN = verdict_of([metric("report/wall_ms", "improved", -0.20, baseline=64.0, floor=0.05),
                  metric("report/stdout_bytes", "no-change", 0.0, interval=(0.0, 0.0), baseline=11502.0)]).to_dict()
FLAT = verdict_of([metric("report/wall_ms", "no-change", -0.01, interval=(-0.03, 0.02), baseline=64.0,
                          floor=0.05)]).to_dict()


def _event(state: LabState, at: float, kind: str, experiment: str | None, data: dict[str, Any]) -> None:
    state.db.execute("INSERT INTO events (at, kind, experiment, data) VALUES (?, ?, ?, ?)",
                     (at, kind, experiment, json.dumps(data, sort_keys=True)))


def judged(state: LabState, index: int, land: bool) -> None:
    """One experiment, started, collected and judged, as the loop leaves it in lab.db (a LAND landed and merged)."""
    name, at = f"h{index}", 1_780_000_000.0 + index
    with state.transaction():
        hypothesis = Hypothesis(id=name, metric="report/wall_ms", change=f"idea {index}", title=f"idea {index}",
                                suspected_cause="a loop", scope=(f"src/f{index}.txt",))
        state.db.execute("INSERT INTO hypotheses VALUES (?, ?, ?, 'user', NULL, 1, ?, ?)",
                         (name, json.dumps(hypothesis.to_dict(), sort_keys=True), "landed" if land else "killed",
                          at, at))
        state.add_experiment(name, name, "w1", "exploit", index, BASE, BENCH, "starting")  # type: ignore[arg-type]
        verdict, decision = (WIN, "LAND") if land else (FLAT, "KILL")
        reasons = ["report/wall_ms improved by -20.00%"] if land else ["no effect beyond the noise floor"]
        judgment = {"decision": decision, "reasons": reasons, "rule": None, "checks": [], "verdict": verdict,
                    "checkout": None, "binary": None, "base": BASE, "built": None, "patch": PATCH,
                    "patch_sha256": "ab" * 32}
        state.update_experiment(name, status="done", candidate=bare_candidate(patch=PATCH, target_base=BASE),
                                judgment=judgment, decision=decision, reasons=reasons, finished_at=at + 1,
                                **({"branch": f"lab/{name}", "land_commit": "c3" * 20, "merge_commit": "d4" * 20}
                                   if land else {}))
        _event(state, at, "experiment-start", name, {"hypothesis": name, "worker": "w1", "lane": "exploit",
                                                     "base": BASE, "launcher": "command", "title": f"idea {index}",
                                                     "prompt": f"prompts/{name}.md", "log": f"logs/{name}.log"})
        _event(state, at + 1, "judgment", name, {
            "hypothesis": name, "title": f"idea {index}", "metric": "report/wall_ms", "predicted": "-",
            "cause": "a loop", "decision": decision, "reasons": reasons, "rule": None, "verdict": verdict,
            "checks": ["build: ok"], "usage": {"cost_usd": 0.1}, "sandbox": "bwrap", "patch_sha256": "ab" * 32})
        if land:
            for kind, data in (("land", {"branch": f"lab/{name}", "commit": "c3" * 20}),
                               ("rebase", {"needed": False, "main": BASE, "branch": f"lab/{name}",
                                           "commit": "c3" * 20}),
                               ("confirm", {"verdict": WIN}),
                               ("push", {"branch": f"lab/{name}", "commit": "c3" * 20, "reachable": True}),
                               ("merge", {"branch": f"lab/{name}", "into": "main", "commit": "d4" * 20,
                                          "previous": BASE}),
                               ("publish", {"branch": "main", "commit": "d4" * 20, "reachable": True}),
                               ("main-check", {"verdict": FLAT, "regressed": False, "before": {}})):
                _event(state, at + 2, kind, name, data)
            state.add_measurement("main", "d4" * 20, {"report/wall_ms": 51.0}, name)


def workspace(root: Path, experiments: int) -> Workspace:
    target = _repo(root / "target", {"README": "target\n"})
    bench = _repo(root / "bench", {"bench.py": "print('x')\n"})
    config = root / "orchard.toml"
    config.write_text('[target]\nbinary = "README"\n\n[bench]\nverdict = "echo NO-CHANGE"\n')
    ws = init_workspace(root / "ws", str(target), str(bench), config)
    state = LabState.open(ws.root)
    state.db.execute("PRAGMA synchronous=OFF")  # filling only: the updates measured write as the lab does
    try:
        state.set_meta("metric_directions", json.dumps({"report/wall_ms": "lower", "report/stdout_bytes": "lower"}))
        state.set_meta("started_at", "1780000000.0")
        with state.transaction():
            _event(state, 1_779_999_999.0, "lab-start", None, {
                "base": BASE, "bench_base": BENCH, "binary": "README", "calibration": "20 A/A pairs",
                "baseline": {"report/wall_ms": 64.0, "report/stdout_bytes": 11502.0},
                "floors": {"report/wall_ms": 0.05, "report/stdout_bytes": 0.0}})
            state.add_measurement("baseline", BASE, {"report/wall_ms": 64.0, "report/stdout_bytes": 11502.0})
        for index in range(experiments):
            judged(state, index, land=index % 10 == 0)
    finally:
        state.close()
    return ws


def one_run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    ws = workspace(root, args.experiments)
    state = LabState.open(ws.root)
    notebook = getattr(records, "Notebook", None)
    if notebook is not None:  # this orchard: the notebook a running lab keeps, brought up to date per event
        kept = notebook(ws)
        update = lambda: kept.update(state)  # noqa: E731
    else:  # the orchard before: every record rendered whole
        update = lambda: records.write_notebook(ws, state)  # noqa: E731
    update()  # the lab's first render, at its start
    times: dict[str, list[float]] = {"KILL": [], "LAND": []}
    try:
        for step in range(args.updates):
            land = step % 5 == 4
            judged(state, args.experiments + step, land=land)
            started = time.perf_counter()
            update()
            times["LAND" if land else "KILL"].append(time.perf_counter() - started)
    finally:
        state.close()
    journal = (ws.root / "JOURNAL.md").read_text()
    return {"kill_ms": 1000 * statistics.median(times["KILL"]), "land_ms": 1000 * statistics.median(times["LAND"]),
            "journal_entries": journal.count("\n## ")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="notebook-render-") as tmp:
            result = one_run(Path(tmp), args)
        runs.append(result)
        print(f"run {run + 1}: after a KILL {result['kill_ms']:.1f} ms, after a LAND {result['land_ms']:.1f} ms "
              f"({result['journal_entries']} journal entries)", flush=True)
    summary = {"experiments": args.experiments, "runs": runs, "load": os.getloadavg(),
               "kill_ms": statistics.median(r["kill_ms"] for r in runs),
               "land_ms": statistics.median(r["land_ms"] for r in runs)}
    print(f"median over {args.runs} runs at {args.experiments} experiments: after a KILL {summary['kill_ms']:.1f} ms, "
          f"after a LAND {summary['land_ms']:.1f} ms (load {summary['load'][0]:.2f})")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
