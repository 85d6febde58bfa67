"""Reading flow files: a flow TOML checked key by key (unknown keys, missing steps, placeholders a step may not
use, each named with its path) into the `Flow` record of `flows.py`; the shipped flows and extra ones."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from orchard.bench.suites.flows import (
    CONTENTION_KEYS,
    CONTENTION_PLACEHOLDERS,
    CORE_KEYS,
    CORE_PLACEHOLDERS,
    CWDS,
    ENV_NAME,
    LANDED_PLACEHOLDERS,
    LOOP_PLACEHOLDERS,
    MATERIALIZATION_KEYS,
    REMOTES,
    SERVED_KEYS,
    SERVED_PLACEHOLDERS,
    STEP_KINDS,
    STEPS,
    TOP_KEYS,
    VERIFY,
    Command,
    Flow,
    Probe,
    PublishProtocol,
    Served,
)
from orchard.errors import UsageError
from orchard.tomlfile import read_toml, unknown_key


def _fields(template: str) -> Iterable[str]:
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None:
            yield name


class _FlowReader:
    """Validates one flow file, naming the file and the place of every problem."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.flow_env: dict[str, str] = {}

    def fail(self, where: str, problem: str) -> UsageError:
        return UsageError(f"flow {self.path}: {where}: {problem}")

    def table(self, where: str, value: Any, allowed: Iterable[str]) -> dict[str, Any]:
        """A TOML table whose keys must all be known."""
        if not isinstance(value, dict):
            raise self.fail(where, "must be a table")
        problem = unknown_key(value, allowed)
        if problem:
            raise self.fail(where, problem)
        return value

    def template(self, where: str, part: str, known: frozenset[str]) -> None:
        try:
            names = list(_fields(part))
        except ValueError as error:
            raise self.fail(where, f"bad template {part!r}: {error}") from error
        unknown = [name for name in names if name not in known]
        if unknown:
            raise self.fail(where, f"unknown placeholder {{{unknown[0]}}}; known: {', '.join(sorted(known))}")

    def argv(self, where: str, value: Any, known: frozenset[str]) -> tuple[str, ...]:
        if not isinstance(value, list) or not value or not all(isinstance(p, str) for p in value):
            raise self.fail(where, "`argv` must be a non-empty list of strings")
        for part in value:
            self.template(where, part, known)
        return tuple(value)

    def env(self, where: str, value: Any, known: frozenset[str]) -> dict[str, str]:
        """`env = { NAME = "value" }`: laid over the pinned environment; values may use placeholders."""
        if not isinstance(value, dict):
            raise self.fail(where, "`env` must be a table of NAME = \"value\"")
        for name, text in value.items():
            if not ENV_NAME.match(name):
                raise self.fail(where, f"`env`: {name!r} is not a variable name")
            if not isinstance(text, str):
                raise self.fail(where, f"`env`: {name} must be a string, not {type(text).__name__}")
            self.template(where, text, known)
        return dict(value)

    def cwd(self, where: str, value: Any) -> str:
        if value not in CWDS:
            raise self.fail(where, f"`cwd` must be one of {', '.join(CWDS)}, not {value!r}")
        return str(value)

    def command(self, where: str, value: Any, known: frozenset[str]) -> Command:
        if not isinstance(value, dict):
            raise self.fail(where, "each command must be a table")
        self.table(where, value, ("argv", "name", "cwd", "kind", "unmeasured", "env"))
        name = value.get("name")
        if name is not None and not isinstance(name, str):
            raise self.fail(where, "`name` must be a string")
        kind = value.get("kind", "vcs")
        if kind not in STEP_KINDS:
            raise self.fail(where, f"`kind` must be one of {', '.join(STEP_KINDS)}")
        cwd = self.cwd(where, value.get("cwd", "workspace"))
        env = {**self.flow_env, **self.env(where, value.get("env", {}), known)}
        if "unmeasured" in value:
            if not isinstance(value["unmeasured"], str) or not value["unmeasured"].strip():
                raise self.fail(where, "`unmeasured` must give the reason")
            if "argv" in value:
                raise self.fail(where, "give `argv` or `unmeasured`, not both")
            return Command((), name, cwd, kind, value["unmeasured"], env)
        return Command(self.argv(where, value.get("argv"), known), name, cwd, kind, None, env)

    def commands(
        self, where: str, value: Any, *, named: bool = False, known: frozenset[str] = LOOP_PLACEHOLDERS
    ) -> tuple[Command, ...]:
        if not isinstance(value, list):
            raise self.fail(where, "must be a list of command tables")
        result = tuple(self.command(f"{where}[{i}]", item, known) for i, item in enumerate(value))
        if named or len(result) > 1:
            names = [command.name for command in result]
            if any(not name for name in names) or len(set(names)) != len(names):
                raise self.fail(where, "several commands need distinct `name`s")
        return result

    def probe(self, where: str, value: Any, known: frozenset[str] = LOOP_PLACEHOLDERS) -> Probe:
        value = self.table(where, value, ("argv", "cwd", "pattern", "env"))
        pattern = value.get("pattern")
        if pattern is not None:
            if not isinstance(pattern, str):
                raise self.fail(where, "`pattern` must be a string")
            try:
                re.compile(pattern)
            except re.error as error:
                raise self.fail(where, f"`pattern` is not a regular expression: {error}") from error
        env = {**self.flow_env, **self.env(where, value.get("env", {}), known)}
        argv = self.argv(where, value.get("argv"), known)
        return Probe(argv, self.cwd(where, value.get("cwd", "workspace")), pattern, env)

    def section(
        self, name: str, value: Any, keys: Iterable[str], known: frozenset[str], extra: Iterable[str] = ()
    ) -> dict[str, tuple[Command, ...]]:
        """An optional lane section: each key a non-empty command list."""
        keys = tuple(keys)
        table = self.table(name, value, (*keys, *extra))
        result = {}
        for key in keys:
            if key in table:
                result[key] = self.commands(f"{name}.{key}", table[key], known=known)
                if not result[key]:
                    raise self.fail(f"{name}.{key}", "must give at least one command")
        return result


def _steps(reader: _FlowReader, data: dict[str, Any], notes: dict[str, str],
           remote: str) -> dict[str, tuple[Command, ...]]:
    raw = reader.table("steps", data.get("steps"), (*STEPS, VERIFY)) if "steps" in data else None
    if raw is None:
        raise reader.fail("steps", "missing [steps] table")
    steps: dict[str, tuple[Command, ...]] = {}
    for name in STEPS:
        if name not in raw:
            raise reader.fail(f"step {name!r}", f"missing (a flow needs {', '.join(STEPS)})")
        steps[name] = reader.commands(f"step {name!r}", raw[name])
        if not steps[name] and name not in notes:
            raise reader.fail(f"step {name!r}", f"empty step needs [notes] {name} = \"why\"")
    if remote == "git" and VERIFY in raw:
        raise reader.fail(
            f"step {VERIFY!r}",
            "a flow with remote = \"git\" is verified by the harness's own git (a fresh clone of the pushed "
            "branch), never by the subject: remove it",
        )
    if remote != "git":
        if not raw.get(VERIFY):
            raise reader.fail(
                f"step {VERIFY!r}",
                f"missing (remote = {remote!r} needs commands that fetch the branch into {{verifier}})",
            )
        steps[VERIFY] = reader.commands(f"step {VERIFY!r}", raw[VERIFY])
    return steps


def _notes(reader: _FlowReader, notes: Any) -> dict[str, str]:
    """`[notes]`: why a step of this CLI differs from the others, one string per step."""
    if not isinstance(notes, dict):
        raise reader.fail("notes", "must be a table of strings")
    for key, note in notes.items():
        if not isinstance(note, str) or not note.strip():
            raise reader.fail("notes", f"`{key}` must be a string saying why")
    return notes


def _branch(reader: _FlowReader, branch: Any) -> tuple[str | None, Probe | None]:
    """`branch`: a template string, or a [branch] probe whose pattern's group 1 is the branch."""
    if isinstance(branch, str):
        reader.argv("branch", [branch], LOOP_PLACEHOLDERS)
        return branch, None
    if isinstance(branch, dict):
        probe = reader.probe("branch.probe", reader.table("branch", branch, ("probe",)).get("probe"))
        if not probe.pattern:
            raise reader.fail("branch.probe", "needs a `pattern` whose group 1 is the branch")
        return None, probe
    raise reader.fail("branch", "give a template string or a [branch] probe")


def _lost_race(reader: _FlowReader, lost_race: Any) -> str | None:
    """`[contention] lost_race`: a regular expression, when given."""
    if lost_race is None:
        return None
    if not isinstance(lost_race, str):
        raise reader.fail("contention.lost_race", "must be a regular expression string")
    try:
        re.compile(lost_race)
    except re.error as error:
        raise reader.fail("contention.lost_race", f"not a regular expression: {error}") from error
    return lost_race


def load_flow(path: Path) -> Flow:
    """Read and validate a flow file; any problem is a UsageError naming file and key."""
    path = Path(path)
    reader = _FlowReader(path)
    data = read_toml(path, "flow")
    kind, remote, payload_file = _identity(reader, data)
    reader.flow_env = reader.env("env", data.get("env", {}), LOOP_PLACEHOLDERS)
    notes = _notes(reader, data.get("notes", {}))
    steps = _steps(reader, data, notes, remote)
    branch_template, branch_probe = _branch(reader, data.get("branch"))
    raw_probes = data.get("probes", {})
    if not isinstance(raw_probes, dict):
        raise reader.fail("probes", "must be a table of probes")
    probes = {name: reader.probe(f"probes.{name}", value) for name, value in raw_probes.items()}
    raw_interrupted = data.get("interrupted", {})
    if not isinstance(raw_interrupted, dict):
        raise reader.fail("interrupted", "must be a table")
    raw_contention = data.get("contention", {})
    lost_race = _lost_race(reader, raw_contention.get("lost_race") if isinstance(raw_contention, dict) else None)
    return Flow(
        kind=kind, path=path, remote=remote, payload_file=payload_file, steps=steps,
        notes={str(k): str(v) for k, v in notes.items()}, branch_template=branch_template, branch_probe=branch_probe,
        prepare=reader.commands("prepare", data.get("prepare", [])),
        cleanup=reader.commands("cleanup", data.get("cleanup", [])),
        probes=probes,
        agent_task=_agent_task(reader, data.get("agent_task")),
        env=reader.flow_env,
        publish_protocol=_protocol(reader, data.get("publish_protocol")),
        interrupted=reader.section("interrupted", raw_interrupted, ("acquire", "publish"), LOOP_PLACEHOLDERS,
                                   ("landed",)),
        landed=None if "landed" not in raw_interrupted
        else reader.probe("interrupted.landed", raw_interrupted["landed"], LANDED_PLACEHOLDERS),
        contention=reader.section("contention", raw_contention, CONTENTION_KEYS, CONTENTION_PLACEHOLDERS,
                                  ("lost_race",)),
        lost_race=lost_race,
        core=reader.section("core", data.get("core", {}), CORE_KEYS, CORE_PLACEHOLDERS),
        served=_served(reader, data.get("served"), remote),
        materialization=reader.section("materialization", data.get("materialization", {}), MATERIALIZATION_KEYS,
                                       SERVED_PLACEHOLDERS),
    )


def _identity(reader: _FlowReader, data: dict[str, Any]) -> tuple[str, str, str]:
    """The flow's kind, its remote and its payload file; no key a flow does not have."""
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise reader.fail(unknown[0], f"unknown key; a flow has {', '.join(sorted(TOP_KEYS))}")
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise reader.fail("kind", "missing `kind`")
    remote = data.get("remote")
    if remote not in REMOTES:
        raise reader.fail("remote", f"`remote` must be one of {', '.join(REMOTES)}")
    payload_file = data.get("payload_file", "task-notes.md")
    if not isinstance(payload_file, str) or not payload_file:
        raise reader.fail("payload_file", "must be a file name")
    return kind, str(remote), payload_file


def _protocol(reader: _FlowReader, protocol: object) -> PublishProtocol | None:
    if protocol is not None and protocol not in set(PublishProtocol):
        raise reader.fail("publish_protocol", f"must be one of {', '.join(PublishProtocol)}, not {protocol!r}")
    return None if protocol is None else PublishProtocol(str(protocol))


def _phases(
    reader: _FlowReader, where: str, raw: dict[str, Any], others: Iterable[str], known: frozenset[str]
) -> dict[str, tuple[Command, ...]]:
    """`phases` names the ordered phases; each phase is a list of named commands; `others` are the other keys."""
    phases = raw.get("phases")
    if not isinstance(phases, list) or not phases or not all(isinstance(p, str) and p for p in phases):
        raise reader.fail(where, "`phases` must be a non-empty list of phase names")
    absent = [phase for phase in phases if phase not in raw]
    if absent:
        raise reader.fail(where, f"phase {absent[0]!r} has no command list")
    reader.table(where, {k: v for k, v in raw.items() if k not in phases}, ("phases", *others))
    return {phase: reader.commands(f"{where}.{phase}", raw[phase], named=True, known=known) for phase in phases}


def _agent_task(reader: _FlowReader, raw: Any) -> dict[str, tuple[Command, ...]]:
    """`[agent_task]`: ordered phases of named commands."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise reader.fail("agent_task", "must be a table")
    return _phases(reader, "agent_task", raw, (), LOOP_PLACEHOLDERS)


def _served(reader: _FlowReader, raw: Any, remote: str) -> Served:
    """`[served]`: serve (exactly one command), seed, verify, branch, and ordered phases."""
    if raw is None:
        return Served()
    if not isinstance(raw, dict):
        raise reader.fail("served", "must be a table")
    others = (*SERVED_KEYS, "branch", "url")
    phases = _phases(reader, "served", raw, others, SERVED_PLACEHOLDERS)
    lists = {key: reader.commands(f"served.{key}", raw.get(key, []), known=SERVED_PLACEHOLDERS) for key in SERVED_KEYS}
    if len(lists["serve"]) != 1:
        raise reader.fail("served.serve", "give exactly one (long-lived) server command")
    branch = None if "branch" not in raw else reader.probe("served.branch", raw["branch"], SERVED_PLACEHOLDERS)
    url = raw.get("url")
    if remote == "git":
        if lists["verify"]:
            raise reader.fail("served.verify", "a flow with remote = \"git\" is verified by the harness's own git: "
                              "give `url` (where it clones the branch from) instead")
        if not isinstance(url, str) or not url:
            raise reader.fail("served.url", "missing: where the harness's git clones the served branch from")
        reader.argv("served.url", [url], SERVED_PLACEHOLDERS)
    elif url is not None or not lists["verify"]:
        raise reader.fail("served.verify", f"remote = {remote!r} needs `verify` commands (and no `url`)")
    return Served(lists["serve"], lists["seed"], lists["verify"], phases, branch, url)


def shipped_flow_files() -> dict[str, Path]:
    folder = resources.files("orchard.bench").joinpath("flows")
    return {Path(item.name).stem: Path(str(item)) for item in folder.iterdir() if item.name.endswith(".toml")}


def load_flows(extra_files: Iterable[Path] = ()) -> dict[str, Flow]:
    """Every shipped flow, then user flow files (which win for their kind)."""
    flows = {kind: load_flow(path) for kind, path in shipped_flow_files().items()}
    for path in extra_files:
        flow = load_flow(Path(path))
        flows[flow.kind] = flow
    return flows
