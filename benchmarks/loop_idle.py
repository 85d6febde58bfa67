"""How long workers sit idle while the loop judges: worker idle time per experiment.

    python benchmarks/loop_idle.py [--runs 3] [--workers 2] [--hypotheses 6] [--worker-s 20] [--judge-s 20]
                                   [--label after] [--json results.json]

Each run makes a small git target and a lab on it (real tmux workers, the
`command` launcher) whose workers take `--worker-s` seconds (a sleep, then
a one-line change in a file of their own) and whose judge takes
`--judge-s` seconds (the target's tests are a sleep; the verdict is the
bench's own command, printing NO-CHANGE). Every worker writes the epoch
time when it starts and ends into a log outside the lab; a worker slot is
idle from the end of one experiment to the start of its next. Reported per
run: idle seconds per experiment (all slots' gaps over the experiments),
the idle share of the slots' time from the first start to the last end,
and the wall time. The lab measures under a lock file of its own (its
verdicts still take turns; other users' benchmarks never hold them up).
Run it once against each version of orchard to compare
(for the older one, put its `src/` first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from orchard.lab.config.sections import WorkersConfig
from orchard.lab.db.state import LabState
from orchard.lab.loop import backlog
from orchard.lab.loop.lab import Lab
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.workspace.workspace_init import init_workspace

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}


def _repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "initial"]):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)
    return path


def one_run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    # a lock of this lab's own: its verdicts still take turns, but never wait for other users' benchmarks
    os.environ["ORCHARD_LOCK_FILE"] = str(root / "measurement.lock")
    n = args.hypotheses
    target = _repo(root / "target", {"README": "target\n", **{f"src/f{i}.txt": "0\n" for i in range(n)}})
    bench = _repo(root / "bench", {"bench.py": "print('x')\n"})
    times = root / "worker-times.log"
    judges = "judges = 2\n" if "judges" in WorkersConfig.__dataclass_fields__ else ""
    change = f"sleep {args.worker_s} && echo {{experiment}} >> src/$(echo {{experiment}} | tr -d h | sed 's/^/f/').txt"
    template = (f"echo start {{target_dir}} $(date +%s.%N) >> {times} && {change} && "
                f"echo end {{target_dir}} $(date +%s.%N) >> {times}")
    config = root / "orchard.toml"
    config.write_text(f"""
[target]
binary = "README"
test = "sleep {args.judge_s}"

[bench]
verdict = "echo NO-CHANGE"

[workers]
count = {args.workers}
exploit = {args.workers}
explore = 0
executor = "tmux"
{judges}
[launcher]
name = "command"
template = "{template}"

[stop]
top_attempted = {n}
idle_loops = {n + 1}
""")
    ws = init_workspace(root / "lab", str(target), str(bench), config)
    state = LabState.open(ws.root)
    try:
        with state.transaction():
            for i in range(n):
                backlog.add(state, Hypothesis(metric="m", change=f"h{i}", id=f"h{i}", scope=(f"src/f{i}.txt",)),
                            source="user")
        began = time.monotonic()
        Lab(ws, state, say=lambda _: None).run()
        wall = time.monotonic() - began
        decisions = [e.decision for e in state.experiments()]
    finally:
        state.close()
    by_slot: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for line in times.read_text().splitlines():
        kind, target_dir, stamp = line.split()
        by_slot[Path(target_dir).parent.name].append((kind, float(stamp)))
    idle = 0.0
    for marks in by_slot.values():
        marks.sort(key=lambda mark: mark[1])
        idle += sum(b[1] - a[1] for a, b in itertools.pairwise(marks) if a[0] == "end" and b[0] == "start")
    stamps = [stamp for marks in by_slot.values() for _, stamp in marks]
    span = (max(stamps) - min(stamps)) * args.workers
    return {"idle_s_per_experiment": idle / n, "idle_share": idle / span, "wall_s": wall,
            "decisions": decisions}


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # the lab's executor then kills its tmux server and workers


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hypotheses", type=int, default=6)
    parser.add_argument("--worker-s", type=float, default=20.0)
    parser.add_argument("--judge-s", type=float, default=20.0)
    parser.add_argument("--label", default="")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    runs = []
    for index in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="orchard-idle-") as temp:
            load = os.getloadavg()
            result = one_run(Path(temp), args)
            result["load_at_start"] = [round(x, 2) for x in load]
            runs.append(result)
            print(f"run {index + 1}: idle {result['idle_s_per_experiment']:.1f} s per experiment, "
                  f"idle share {result['idle_share']:.0%}, wall {result['wall_s']:.0f} s, load {load[0]:.1f}",
                  flush=True)
    keys = ("idle_s_per_experiment", "idle_share", "wall_s")
    summary = {key: statistics.median(r[key] for r in runs) for key in keys}
    print(f"{args.label or 'median'}: " + ", ".join(f"{k} {v:.3g}" for k, v in summary.items()))
    if args.json is not None:
        args.json.write_text(json.dumps({"label": args.label, "args": vars(args) | {"json": str(args.json)},
                                         "runs": runs, "median": summary}, indent=2))


if __name__ == "__main__":
    main()
