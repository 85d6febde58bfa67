"""What the sandbox's uid can run: programs out of its reach named before a lab starts, and when a step fails.

When orchard runs as root, every sandbox runs as an unprivileged uid
(`confine.sandbox_id`), and nothing gives it orchard's uid back. A program
the sandbox must run (a launcher's CLI, the first word of `[target] build`
or `test`, a script's `#!` interpreter) in a directory only root can enter
fails inside the sandbox with a bare "Permission denied". `orchard run`
refuses such a lab up front (exit 2), naming the path and what to do; a
judge step that fails adds the same words to its reason. A build or test
step has no network unless `[target] build_network`: one that fails with a
network or package-index error in its output (an offline `pip install`)
names that key in its reason.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

from orchard import confine
from orchard.lab.config.orchard_toml import Config
from orchard.lab.workers.sandbox.sandbox import Confinement, SandboxMode, worker_mounts

# What a build prints when it needs a network its sandbox does not give it: a host it cannot resolve or reach,
# a package index it cannot read (pip, npm, cargo, go, git, curl)
_OFFLINE = re.compile(
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|Could not resolve host"
    r"|Failed to establish a new connection|No matching distribution found|Could not find a version that satisfies"
    r"|getaddrinfo|EAI_AGAIN|ENOTFOUND|ENETUNREACH|dial tcp|failed to fetch|Couldn't resolve host", re.IGNORECASE)


def program(command: str) -> str | None:
    """The program a shell command starts (its first word after `NAME=value` assignments), or None."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    words = [word for word in words if not ("=" in word and word.split("=", 1)[0].isidentifier())]
    return words[0] if words and "{" not in words[0] else None


def blocked(name: str, mounts: confine.Mounts, path: str) -> str | None:
    """Why the sandbox uid cannot run `name` (found on `path`) inside `mounts`, or None (not found: its own error)."""
    found = shutil.which(name, path=path)
    if found is None or not confine.dropping():
        return None
    interpreter = confine.shebang(Path(found))
    for what, target in ((f"`{name}` ({found})", Path(found)), (f"the interpreter of `{name}`", interpreter)):
        stop = None if target is None else mounts.cannot_read(target)
        if stop is not None:
            mode = f"mode {stop.stat().st_mode & 0o777:04o}, owner uid {stop.stat().st_uid}"
            return (f"{what} cannot be read by the sandbox's uid {confine.sandbox_id()}: {stop} is closed to it "
                    f"({mode}); sandboxes run as that uid when orchard is root, never as orchard's own: make {stop} "
                    "readable by others (`chmod o+rX`), or install the program where they can read it")
    return None


def launch_problem(config: Config, workspace: Path, launcher: str, executable: str) -> str | None:
    """Why a worker's sandbox cannot run `executable` (a launcher's CLI), or None."""
    if config.workers.sandbox != SandboxMode.BWRAP:
        return None
    path = os.environ.get("PATH", "")
    mounts = worker_mounts(workspace, path, executable, config.workers.sandbox_read)
    problem = blocked(executable, mounts, path)
    return None if problem is None else f"launcher {launcher!r}: {problem}"


def step_problems(config: Config, workspace: Path) -> list[str]:
    """Why the judge's sandboxed steps (`[target] build`, `test`, `test_count`) cannot run their programs."""
    if config.workers.sandbox != SandboxMode.BWRAP:
        return []
    path = os.environ.get("PATH", "")
    mounts = worker_mounts(workspace, path)
    steps = (("build", config.target.build), ("test", config.target.test), ("test_count", config.target.test_count))
    found = [(key, problem) for key, command in steps if command
             for problem in [blocked(name, mounts, path) for name in [program(command)] if name] if problem]
    return [f"[target] {key}: {problem}" for key, problem in found]


def step_hint(command: str, confinement: Confinement | None, output: str = "") -> str:
    """For a failed judge step: why its sandbox could not run its program, or reach the network its output says
    it needed ("" when neither is why)."""
    name = program(command)
    if confinement is None or confinement.mode != SandboxMode.BWRAP or name is None:
        return ""
    problem = blocked(name, confinement.mounts(), os.environ.get("PATH", ""))
    if problem is None and not confinement.network and _OFFLINE.search(output):
        problem = ("its output shows a network or package-index error, and the judge's build and test steps have "
                   "no network: set `[target] build_network = true` in orchard.toml if the build must download "
                   "packages")
    return "" if problem is None else f" ({problem})"
