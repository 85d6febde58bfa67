"""The research loop's own cost with real agent CLI workers, beside the `patch` launcher's, and the CLIs' start-up.

    python benchmarks/agent_loop.py [--runs 3] [--launchers claude,codex,aider,patch] [--out FILE]

Needs the pinned CLIs in .agents/ (`make agents`) and runs from the repository's root (it borrows the tests'
scripted model endpoint, tests/agents/endpoint, and their demo labs, tests/agents/demo_lab.py).

Each run of a launcher makes a fresh demo lab whose workers are that CLI, talking to the scripted endpoint
(the tests' own scripts: claude-demo-three.toml, codex-demo.toml, aider-demo.toml; `network = "api"`, through
the egress proxy), one worker and one hypothesis, the demo's count-with-dict (a LAND: the same judge, landing
and confirmation for every launcher), and runs `Lab.run()` to its stop in this process, timed as
`loop_overhead.py` times the `patch` lab: the orchestrator's time is the loop's, judge's and landing threads'
time outside waiting for workers, build and test steps, verdicts and calibration, and here also outside
pre-flight's test request (the CLI's own run, reported apart) and its `--version` and login status commands.
Launchers are interleaved run by run (claude, codex, aider, patch, claude, ...) so that all meet the same load.

Alone, each CLI's start-up: `<cli> --version`, and pre-flight's test request (one short answer through the CLI,
inside the worker's sandbox and egress proxy, against the endpoint: `agent_probe.probe`), each timed `--alone`
times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' endpoint and demo labs

import loop_overhead  # noqa: E402  (benchmarks/, beside this file)

from orchard.bench.machine import machine_facts  # noqa: E402
from orchard.lab.config.orchard_toml import LauncherConfig, WorkersConfig  # noqa: E402
from orchard.lab.db.state import LabState  # noqa: E402
from orchard.lab.loop.lab import Lab  # noqa: E402
from orchard.lab.workers.launchers import agent_probe  # noqa: E402
from orchard.lab.workers.launchers.launcher_base import Launcher  # noqa: E402
from orchard.lab.workers.launchers.launchers import make_launcher  # noqa: E402
from tests.agents import clis  # noqa: E402
from tests.agents.demo_lab import PATCHES, agent_env, demo_lab  # noqa: E402
from tests.agents.endpoint import ScriptedEndpoint  # noqa: E402

# One hypothesis for every launcher, the same change made the same way (its ready patch, or the CLI's tools as
# scripted) and the same decision (LAND: a merge and its confirmation), one worker.
ONE = {"count-with-dict": ""}
PROBE = "pre-flight test request"
CHECKS = "pre-flight CLI checks"
# launcher: (its script, its [launcher] table given the endpoint's URL)
SETUPS: dict[str, tuple[str, Any]] = {
    "claude": ("claude-demo-three.toml", lambda url: {"name": "claude", "base_url": url}),
    "codex": ("codex-demo.toml", lambda url: {"name": "codex", "model": "scripted", "base_url": f"{url}/v1"}),
    "aider": ("aider-demo.toml", lambda url: {"name": "aider", "model": "openai/scripted", "base_url": f"{url}/v1",
                                              "args": ["--edit-format", "diff", "--no-show-model-warnings"]}),
    "patch": ("", lambda url: {"name": "patch"}),
}
VERSIONS = {"claude": clis.claude, "codex": clis.codex, "aider": clis.aider}


@contextmanager
def agent_environment() -> Iterator[None]:
    """This process's environment as the agents' labs give orchard: the CLIs on PATH, scripted keys, no others."""
    saved, wanted = dict(os.environ), agent_env()
    os.environ.clear()
    os.environ.update(wanted)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def endpoint(script: str, log: Path) -> Iterator[ScriptedEndpoint | None]:
    if not script:
        yield None
        return
    server = ScriptedEndpoint.start(ROOT / "tests/agents/scripts" / script, log,
                                    {"ENDPOINT_VALUE_patches": str(PATCHES)})
    try:
        yield server
    finally:
        server.stop()


def one_lab(name: str, root: Path) -> dict[str, Any]:
    script, table = SETUPS[name]
    with endpoint(script, root / "endpoint.jsonl") as server:
        ws = demo_lab(root / "lab", {"default": table(server.url if server else "")}, ONE, workers=1)
        state = LabState.open(ws.root)
        profile = loop_overhead.Profile()
        load = os.getloadavg()
        try:
            with loop_overhead.instrumented(profile):
                profile.wrap(agent_probe, "probe", PROBE)
                profile.wrap(Launcher, "preflight", CHECKS)  # `<cli> --version`
                profile.wrap(Launcher, "check_login", CHECKS)  # its login status command
                with agent_environment():
                    started = time.perf_counter()
                    reason = Lab(ws, state, say=lambda _: None).run()
                    wall = time.perf_counter() - started
            decisions = Counter(e.decision for e in state.experiments())
        finally:
            state.close()
    excluded = (*loop_overhead.EXCLUDED, PROBE, CHECKS)
    orchestrator = sum(seconds for category, seconds in profile.seconds.items() if category not in excluded)
    experiments = sum(decisions.values())
    return {"launcher": name, "experiments": experiments, "orchestrator_s": orchestrator, "wall_s": wall,
            "workers_s": profile.seconds.get("waiting for workers", 0.0), "probe_s": profile.seconds.get(PROBE, 0.0),
            "checks_s": profile.seconds.get(CHECKS, 0.0), "seconds": dict(profile.seconds),
            "decisions": dict(decisions), "reason": reason, "load": load}


def alone(name: str, times: int, scratch: Path) -> dict[str, list[float]]:
    """`<cli> --version` and pre-flight's test request, each timed alone `times` times."""
    version: list[float] = []
    probe: list[float] = []
    executable = str(VERSIONS[name]())
    script, table = SETUPS[name]
    with endpoint(script, scratch / f"{name}-alone.jsonl") as server, agent_environment():
        assert server is not None
        launcher = make_launcher(LauncherConfig(**{**table(server.url), "executable": executable}))
        for _ in range(times):
            started = time.perf_counter()
            subprocess.run([executable, "--version"], capture_output=True, check=True, timeout=120)
            version.append(time.perf_counter() - started)
            started = time.perf_counter()
            answer = agent_probe.probe(launcher, WorkersConfig())
            probe.append(time.perf_counter() - started)
            assert answer.problem is None, answer.problem
    return {"version_s": version, "probe_s": probe}


def spread(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    return (f"{statistics.median(values) * scale:.{digits}f} ({min(values) * scale:.{digits}f}-"
            f"{max(values) * scale:.{digits}f})")


def report(runs: list[dict[str, Any]], starts: dict[str, dict[str, list[float]]], command: str, began: datetime,
           per_launcher: int) -> str:
    lines = [
        "| launcher | experiments per run (decisions) | **orchestrator, ms per experiment** | the loop's poll "
        "sleeps (workers, judge and verdicts under way), s per experiment | pre-flight test request, s | "
        "`--version`, s (alone) | one short answer in the sandbox, s (alone) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name in dict.fromkeys(r["launcher"] for r in runs):
        mine = [r for r in runs if r["launcher"] == name]
        decisions = Counter(", ".join(f"{n} {d}" for d, n in sorted(r["decisions"].items())) for r in mine)
        start = starts.get(name, {})
        lines.append(
            f"| `{name}` | {mine[0]['experiments']} ({'; '.join(decisions)}) | "
            f"**{spread([r['orchestrator_s'] / r['experiments'] for r in mine], 1000, 0)}** | "
            f"{spread([r['workers_s'] / r['experiments'] for r in mine])} | "
            + (f"{spread([r['probe_s'] for r in mine])} | " if name != "patch" else "none | ")
            + (f"{spread(start['version_s'], 1, 2)} | {spread(start['probe_s'])} |" if start else "- | - |"))
    load_text = "; ".join(", ".join(f"{v:.1f}" for v in r["load"]) for r in runs)
    return "\n".join([
        f"Measured {began:%Y-%m-%d %H:%M}-{datetime.now(UTC):%H:%M} UTC on {machine_facts().describe()}, "
        f"`{command}`: median (min-max) of {per_launcher} runs per launcher, interleaved. Load average "
        f"(1, 5, 15 min) at each lab's start: {load_text}.",
        "", *lines, ""])


def command_of(args: argparse.Namespace) -> str:
    return f"python benchmarks/agent_loop.py --runs {args.runs} --alone {args.alone} --launchers {args.launchers}"


def save(path: Path | None, item: dict[str, Any]) -> None:
    if path is not None:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({**item, "at": datetime.now(UTC).isoformat()}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--alone", type=int, default=5, help="times each CLI's start-up is timed alone")
    parser.add_argument("--launchers", default=",".join(SETUPS))
    parser.add_argument("--out", type=Path, default=None, help="also write the Markdown here")
    parser.add_argument("--json", type=Path, default=None, help="also append each lab and the start-up times here")
    parser.add_argument("--report-from", type=Path, default=None, help="run nothing: report a --json file's runs")
    args = parser.parse_args()
    names = [name for name in args.launchers.split(",") if name]
    if args.report_from is not None:
        saved = [json.loads(line) for line in args.report_from.read_text().splitlines() if line.strip()]
        starts = {item["alone"]: item for item in saved if "alone" in item}
        labs = [item for item in saved if "alone" not in item]
        began = datetime.fromisoformat(saved[0]["at"])
        print(report(labs, starts, f"{command_of(args)} --json FILE", began, len(labs) // len(names)))
        return
    command = command_of(args)
    began = datetime.now(UTC)
    cache = Path(tempfile.mkdtemp(prefix="orchard-agent-loop-"))
    os.environ["ORCHARD_CACHE_DIR"] = str(cache / "cache")  # this benchmark's calibrations stay its own
    runs: list[dict[str, Any]] = []
    try:
        starts = {name: alone(name, args.alone, cache) for name in names if name in VERSIONS}
        for name, start in starts.items():
            save(args.json, {"alone": name, **start})
        for index in range(args.runs):
            for name in names:
                root = cache / f"{name}-{index}"
                root.mkdir()
                run = one_lab(name, root)
                shutil.rmtree(root, ignore_errors=True)
                runs.append(run)
                save(args.json, run)
                print(f"run {index + 1}/{args.runs} {name}: {run['experiments']} experiments {run['decisions']}, "
                      f"orchestrator {run['orchestrator_s']:.2f} s, wall {run['wall_s']:.1f} s, "
                      f"load {run['load'][0]:.1f}", flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    text = report(runs, starts, command, began, args.runs)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
