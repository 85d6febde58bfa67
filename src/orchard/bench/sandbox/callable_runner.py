"""The part of a confined `python` scenario that runs inside the sandbox: load the callable, call it, write.

Run by path as `python -I callable_runner.py DOCUMENT` (standard library only:
importing orchard's bench there would cost every run its start-up); the
document names the callable, the suite's directory, the arguments and the
results file. `python_scenario.py` is orchard's side; it imports `load` and
`call` from here for unconfined runs, so both call the function alike.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast


def load(callable_name: str, suite_dir: Path) -> Callable[..., Any]:
    """`module:function` from `suite_dir` (ImportError or AttributeError when it cannot be loaded)."""
    module_name, _, function_name = callable_name.partition(":")
    if str(suite_dir) not in sys.path:
        sys.path.insert(0, str(suite_dir))
    return cast(Callable[..., Any], getattr(importlib.import_module(module_name), function_name))


def call(function: Callable[..., Any], arguments: Mapping[str, Any]) -> tuple[list[Any], str, int, int]:
    """One call, timed: its rows, its failure ("" when none: its exception is its failure), its bounds in ns."""
    started, failure = time.perf_counter_ns(), ""
    try:
        produced = list(function(**arguments))
    except Exception as error:  # the lane's failure is the candidate's failure, recorded
        produced, failure = [], f"{type(error).__name__}: {error}"
    return produced, failure, started, time.perf_counter_ns()


def main(document: str) -> int:
    spec = json.loads(document)
    arguments = dict(spec["arguments"])
    arguments["binary"], arguments["workdir"] = Path(arguments["binary"]), Path(arguments["workdir"])
    arguments["fixtures"] = {name: Path(path) for name, path in arguments["fixtures"].items()}
    rows, failure, started, ended = call(load(spec["callable"], Path(spec["suite_dir"])), arguments)
    Path(spec["results"]).write_text(json.dumps({"rows": rows, "failure": failure, "started_ns": started,
                                                 "ended_ns": ended}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
