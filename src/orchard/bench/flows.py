"""Flows: the commands of an agent's task loop for one kind of CLI, as data.

A flow file (TOML) gives, for each step of the loop (acquire a workspace,
inspect, edit, snapshot, publish, describe, end, verify), the command
templates an agent would run. Measuring a new git-like CLI means writing a
flow, not code. A step may be an empty list only when the flow says why in
`[notes]` (git's task description is its commit message, so git has no
describe call): asymmetries are stated, never hidden. Flows shipped with
orchard live in `orchard/bench/flows/<kind>.toml`.
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from orchard.errors import UsageError

STEPS = ("acquire", "inspect", "edit", "snapshot", "publish", "describe", "end", "verify")
CWDS = ("workspace", "base", "root", "verifier")
STEP_KINDS = ("vcs", "edit")
REMOTES = ("git", "oak")
PLACEHOLDERS = frozenset(
    {
        "bin", "workspace", "base", "root", "verifier", "branch", "payload",
        "message", "remote", "repo", "run", "phase", "bench_id", "subject",
    }
)


@dataclass(frozen=True)
class Command:
    """One tool call of a step; `unmeasured` marks a call this lane cannot make here."""

    argv: tuple[str, ...]
    name: str | None = None
    cwd: str = "workspace"
    kind: str = "vcs"
    unmeasured: str | None = None

    def render(self, values: Mapping[str, Any]) -> list[str]:
        return [part.format_map(values) for part in self.argv]


@dataclass(frozen=True)
class Probe:
    """A harness command whose output answers a question (head, unpublished work)."""

    argv: tuple[str, ...]
    cwd: str = "workspace"
    pattern: str | None = None

    def render(self, values: Mapping[str, Any]) -> list[str]:
        return [part.format_map(values) for part in self.argv]


@dataclass(frozen=True)
class Flow:
    kind: str
    path: Path
    remote: str
    payload_file: str
    steps: dict[str, tuple[Command, ...]]
    notes: dict[str, str]
    branch_template: str | None = None
    branch_probe: Probe | None = None
    prepare: tuple[Command, ...] = ()
    cleanup: tuple[Command, ...] = ()
    probes: dict[str, Probe] = field(default_factory=dict)
    agent_task: dict[str, tuple[Command, ...]] = field(default_factory=dict)

    def step(self, name: str) -> tuple[Command, ...]:
        return self.steps[name]


def _fields(template: str) -> Iterable[str]:
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None:
            yield name


class _Reader:
    """Validates one flow file, naming the file and the place of every problem."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> UsageError:
        return UsageError(f"flow {self.path}: {where}: {problem}")

    def argv(self, where: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not value or not all(isinstance(p, str) for p in value):
            raise self.fail(where, "`argv` must be a non-empty list of strings")
        for part in value:
            try:
                names = list(_fields(part))
            except ValueError as error:
                raise self.fail(where, f"bad template {part!r}: {error}") from error
            unknown = [name for name in names if name not in PLACEHOLDERS]
            if unknown:
                raise self.fail(
                    where,
                    f"unknown placeholder {{{unknown[0]}}}; known: {', '.join(sorted(PLACEHOLDERS))}",
                )
        return tuple(value)

    def cwd(self, where: str, value: Any) -> str:
        if value not in CWDS:
            raise self.fail(where, f"`cwd` must be one of {', '.join(CWDS)}, not {value!r}")
        return str(value)

    def command(self, where: str, value: Any) -> Command:
        if not isinstance(value, dict):
            raise self.fail(where, "each command must be a table")
        name = value.get("name")
        if name is not None and not isinstance(name, str):
            raise self.fail(where, "`name` must be a string")
        kind = value.get("kind", "vcs")
        if kind not in STEP_KINDS:
            raise self.fail(where, f"`kind` must be one of {', '.join(STEP_KINDS)}")
        cwd = self.cwd(where, value.get("cwd", "workspace"))
        if "unmeasured" in value:
            if not isinstance(value["unmeasured"], str) or not value["unmeasured"].strip():
                raise self.fail(where, "`unmeasured` must give the reason")
            return Command((), name, cwd, kind, value["unmeasured"])
        return Command(self.argv(where, value.get("argv")), name, cwd, kind)

    def commands(self, where: str, value: Any, *, named: bool = False) -> tuple[Command, ...]:
        if not isinstance(value, list):
            raise self.fail(where, "must be a list of command tables")
        result = tuple(self.command(f"{where}[{i}]", item) for i, item in enumerate(value))
        if named or len(result) > 1:
            names = [command.name for command in result]
            if any(not name for name in names) or len(set(names)) != len(names):
                raise self.fail(where, "several commands need distinct `name`s")
        return result

    def probe(self, where: str, value: Any) -> Probe:
        if not isinstance(value, dict):
            raise self.fail(where, "must be a table with `argv`")
        pattern = value.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            raise self.fail(where, "`pattern` must be a string")
        return Probe(self.argv(where, value.get("argv")), self.cwd(where, value.get("cwd", "workspace")), pattern)


def load_flow(path: Path) -> Flow:
    """Read and validate a flow file; any problem is a UsageError naming file and step."""
    path = Path(path)
    reader = _Reader(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise UsageError(f"flow file {path} does not exist") from error
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"flow {path} is not valid TOML: {error}") from error
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise reader.fail("kind", "missing `kind`")
    if data.get("remote") not in REMOTES:
        raise reader.fail("remote", f"`remote` must be one of {', '.join(REMOTES)}")
    notes = data.get("notes", {})
    if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
        raise reader.fail("notes", "must be a table of strings")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, dict):
        raise reader.fail("steps", "missing [steps] table")
    steps: dict[str, tuple[Command, ...]] = {}
    for name in STEPS:
        if name not in raw_steps:
            raise reader.fail(f"step {name!r}", f"missing (a flow needs {', '.join(STEPS)})")
        steps[name] = reader.commands(f"step {name!r}", raw_steps[name])
        if not steps[name] and name not in notes:
            raise reader.fail(f"step {name!r}", f"empty step needs [notes] {name} = \"why\"")
    extra = sorted(set(raw_steps) - set(STEPS))
    if extra:
        raise reader.fail(f"step {extra[0]!r}", f"unknown step; steps are {', '.join(STEPS)}")
    branch = data.get("branch")
    branch_template: str | None = None
    branch_probe: Probe | None = None
    if isinstance(branch, str):
        reader.argv("branch", [branch])
        branch_template = branch
    elif isinstance(branch, dict) and "probe" in branch:
        branch_probe = reader.probe("branch.probe", branch["probe"])
        if not branch_probe.pattern:
            raise reader.fail("branch.probe", "needs a `pattern` whose group 1 is the branch")
    else:
        raise reader.fail("branch", "give a template string or a [branch] probe")
    probes = {
        name: reader.probe(f"probes.{name}", value)
        for name, value in data.get("probes", {}).items()
    }
    agent_task: dict[str, tuple[Command, ...]] = {}
    raw_agent = data.get("agent_task", {})
    for phase in raw_agent.get("phases", []):
        agent_task[phase] = reader.commands(f"agent_task.{phase}", raw_agent.get(phase), named=True)
    return Flow(
        kind=kind,
        path=path,
        remote=str(data["remote"]),
        payload_file=str(data.get("payload_file", "task-notes.md")),
        steps=steps,
        notes={str(k): str(v) for k, v in notes.items()},
        branch_template=branch_template,
        branch_probe=branch_probe,
        prepare=reader.commands("prepare", data.get("prepare", [])),
        cleanup=reader.commands("cleanup", data.get("cleanup", [])),
        probes=probes,
        agent_task=agent_task,
    )


def shipped_flow_files() -> dict[str, Path]:
    folder = resources.files("orchard.bench").joinpath("flows")
    return {
        Path(item.name).stem: Path(str(item))
        for item in folder.iterdir()
        if item.name.endswith(".toml")
    }


def load_flows(extra_files: Iterable[Path] = ()) -> dict[str, Flow]:
    """Every shipped flow, then user flow files (which win for their kind)."""
    flows = {kind: load_flow(path) for kind, path in shipped_flow_files().items()}
    for path in extra_files:
        flow = load_flow(Path(path))
        flows[flow.kind] = flow
    return flows
