"""A `python` scenario's callable, run confined: in its own process inside the run's sandbox.

The callable is the suite's (trusted) code, but it runs the binary under
test, which is not: called in orchard's own process, the binary it starts
would see your home, the network and a `$TMPDIR` kept from one run to the
next. Confined, the callable runs in its own Python inside the same sandbox
as a `command` scenario's run (`callable_runner.py`, by path); it times its
own call and writes its rows, failure and time as one JSON document to a
results file orchard reads back.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard import process
from orchard.bench.sandbox import callable_runner
from orchard.bench.sandbox.confinement import RunConfinement
from orchard.errors import UsageError

RUNNER = Path(callable_runner.__file__)


@dataclass(frozen=True)
class CallableRun:
    """What one call of a scenario's callable gave: its rows, its failure ("" when none), its bounds in ns."""

    rows: list[Any]
    failure: str
    started_ns: int
    ended_ns: int


def load(callable_name: str, suite_dir: Path) -> Callable[..., Any]:
    """`module:function` from `suite_dir`, or a UsageError naming why it cannot be loaded."""
    try:
        return callable_runner.load(callable_name, suite_dir)
    except (ImportError, AttributeError) as error:
        raise UsageError(f"cannot load callable {callable_name}: {error}") from None


def call(function: Callable[..., Any], arguments: Mapping[str, Any]) -> CallableRun:
    """One call of the scenario's function in orchard's own process (runs not confined)."""
    return CallableRun(*callable_runner.call(function, arguments))


def run_confined(confinement: RunConfinement, callable_name: str, arguments: Mapping[str, Any], *, suite_dir: Path,
                 root: Path, loopback: bool, timeout_s: float | None, env: Mapping[str, str]) -> CallableRun:
    """The call made in its own process inside the run's sandbox (`confinement`), as a `command` run is."""
    results = root / "python-scenario.json"
    results.unlink(missing_ok=True)
    argv = command(callable_name, suite_dir, arguments, results)
    wrapped = confinement.wrap(argv, binary=Path(arguments["binary"]), suite_dir=suite_dir, root=root,
                               results_file=results, loopback=loopback)
    capture = process.run(wrapped, cwd=suite_dir, env=confinement.env(env), timeout_s=timeout_s)
    return read(capture, results)


def command(callable_name: str, suite_dir: Path, arguments: Mapping[str, Any], results: Path) -> list[str]:
    """The command line that makes `call` inside a sandbox and writes what it gave to `results`."""
    document = json.dumps({"callable": callable_name, "suite_dir": str(suite_dir), "results": str(results),
                           "arguments": {key: _plain(value) for key, value in arguments.items()}})
    return [sys.executable, "-I", str(RUNNER), document]


def read(capture: process.Capture, results: Path) -> CallableRun:
    """What the confined call wrote; a run that wrote nothing failed (its exit and stderr say how)."""
    try:
        data = json.loads(results.read_text(errors="replace"))
        rows, failure = data["rows"], str(data["failure"])
        started, ended = int(data["started_ns"]), int(data["ended_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        tail = capture.stderr_text.strip().splitlines()[-1:] or [f"exit {capture.returncode}"]
        why = "timed out" if capture.timed_out else tail[0][:200]
        return CallableRun([], f"the confined callable gave no rows: {why}", capture.started_ns, capture.ended_ns)
    return CallableRun(rows if isinstance(rows, list) else [], failure, started, ended)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return str(value) if isinstance(value, Path) else value

