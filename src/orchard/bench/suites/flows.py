"""Flows: the commands of an agent's loop for one kind of CLI, as data.

A flow file (TOML) gives, for each step of the loop (acquire a workspace,
inspect, edit, snapshot, publish, describe, end), the command templates an
agent would run, and optionally the commands of the other lanes (`[agent_task]`,
`[interrupted]`, `[contention]`, `[core]`, and for a CLI that runs its own
server `[served]` and `[materialization]`). Measuring a new git-like CLI means
writing a flow, not code; a lane whose keys a flow lacks is a skip row naming
them. A step may be an empty list only when the flow says why in `[notes]`
(git's task description is its commit message, so git has no describe call):
asymmetries are stated, never hidden.

Flows are read strictly, like suites: an unknown key, a missing step or an
unknown placeholder is a UsageError naming the file and the key, so a typo
never silently measures something else. `env` tables (per flow, per command)
are laid over the pinned environment of `orchard.bench.sandbox.environment`.
Oracles are never the subject's: for a flow that publishes to a git remote
the harness's own git reads the pushed branch back, so such a flow may not
give `verify` commands. Flows shipped with orchard live in
`orchard/bench/flows/<kind>.toml`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

STEPS = ("acquire", "inspect", "edit", "snapshot", "publish", "describe", "end")
VERIFY = "verify"
CWDS = ("workspace", "base", "root", "verifier")
STEP_KINDS = ("vcs", "edit")
REMOTES = ("git", "oak")
LOOP_PLACEHOLDERS = frozenset(
    {
        "bin", "workspace", "base", "root", "verifier", "branch", "payload",
        "message", "remote", "repo", "run", "phase", "bench_id", "subject",
    }
)
CONTENTION_PLACEHOLDERS = frozenset({"bin", "workspace", "root", "remote", "message", "path", "ref", "worker"})
CORE_PLACEHOLDERS = frozenset({"bin", "workspace", "root", "fixture", "message"})
# An owned loopback server ([served], [materialization]): where it keeps its data, where it listens, and the
# harness-built git repository a fixture is imported from.
SERVED_PLACEHOLDERS = LOOP_PLACEHOLDERS | {"server_dir", "host", "port", "source"}
# [interrupted] landed: the harness's git and the fault fixture's served repository on disk.
LANDED_PLACEHOLDERS = LOOP_PLACEHOLDERS | {"git", "remote_dir"}
SERVED_KEYS = ("serve", "seed", "verify")
MATERIALIZATION_KEYS = ("import", "acquire", "status", "commit")
CONTENTION_KEYS = ("clone", "commit_path", "commit_all", "publish", "sync")
CORE_KEYS = ("acquire", "stage", "status", "diff", "log", "show")
CORE_MEASURED = ("status", "diff", "log", "show")
TOP_KEYS = frozenset(
    {
        "kind", "remote", "payload_file", "branch", "prepare", "cleanup", "env", "notes",
        "steps", "probes", "agent_task", "publish_protocol", "interrupted", "contention", "core",
        "served", "materialization",
    }
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PublishProtocol(StrEnum):
    """What the interrupted-publication fixture must speak to cut a publication."""

    GIT = "git"  # git's smart protocol (receive-pack) over the fixture's transport
    OAK_HTTP = "oak-http"  # oak's HTTP push endpoint


@dataclass(frozen=True)
class Command:
    """One tool call of a step; `unmeasured` marks a call this lane cannot make here."""

    argv: tuple[str, ...]
    name: str | None = None
    cwd: str = "workspace"
    kind: str = "vcs"
    unmeasured: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # the flow's env with the command's laid over it

    def render(self, values: Mapping[str, Any]) -> list[str]:
        return [part.format_map(values) for part in self.argv]

    def environment(self, values: Mapping[str, Any]) -> dict[str, str]:
        return {name: value.format_map(values) for name, value in self.env.items()}


@dataclass(frozen=True)
class Probe:
    """A harness command whose output answers a question (head, unpublished work)."""

    argv: tuple[str, ...]
    cwd: str = "workspace"
    pattern: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def render(self, values: Mapping[str, Any]) -> list[str]:
        return [part.format_map(values) for part in self.argv]

    def environment(self, values: Mapping[str, Any]) -> dict[str, str]:
        return {name: value.format_map(values) for name, value in self.env.items()}


@dataclass(frozen=True)
class Served:
    """`[served]`: a server the lane starts on loopback, the repository seeded on it, phases run against it.

    `serve` is one long-lived command ({server_dir} {host} {port}); `seed`
    (harness, untimed) publishes the seed directory as {repo} to {remote};
    each phase is a list of named, measured commands; `verify` (harness)
    fetches {branch} into {verifier}; `branch` reads the branch the first
    phase works on. A flow with `remote = "git"` gives `url` (where the
    harness's own git clones {branch} from) instead of `verify`: the oracle is
    never the subject.
    """

    serve: tuple[Command, ...] = ()
    seed: tuple[Command, ...] = ()
    verify: tuple[Command, ...] = ()
    phases: dict[str, tuple[Command, ...]] = field(default_factory=dict)
    branch: Probe | None = None
    url: str | None = None

    def __contains__(self, key: object) -> bool:
        return bool(getattr(self, str(key), None))

    def __bool__(self) -> bool:
        return bool(self.serve)


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
    env: dict[str, str] = field(default_factory=dict)
    publish_protocol: PublishProtocol | None = None
    interrupted: dict[str, tuple[Command, ...]] = field(default_factory=dict)
    contention: dict[str, tuple[Command, ...]] = field(default_factory=dict)
    lost_race: str | None = None
    core: dict[str, tuple[Command, ...]] = field(default_factory=dict)
    served: Served = field(default_factory=Served)
    materialization: dict[str, tuple[Command, ...]] = field(default_factory=dict)
    landed: Probe | None = None  # [interrupted] landed: did the cut publication reach the remote?

    def step(self, name: str) -> tuple[Command, ...]:
        return self.steps[name]

    @property
    def harness_verifies(self) -> bool:
        """A git remote is read back by the harness's git, never by the subject."""
        return self.remote == "git"

    @property
    def served_scheme(self) -> str:
        """The URL scheme of the flow's own server (`[served] serve`): oak serves HTTP, a git remote git://."""
        return "http" if self.remote == "oak" else "git"

    def missing(self, needs: Iterable[str]) -> list[str]:
        """Which of the keys a lane needs (`[section] key` or `key`) this flow lacks."""
        absent = []
        for need in needs:
            section, _, key = need.partition("] ")
            held = getattr(self, section.strip("[]"))
            if not (key in held if key else held):
                absent.append(need)
        return absent

    def skip_reason(self, lane: str, needs: Iterable[str]) -> str | None:
        """The skip reason for a lane this flow cannot enter, or None."""
        absent = self.missing(needs)
        if not absent:
            return None
        return f"the {self.kind} flow ({self.path.name}) cannot enter {lane}: it has no {', '.join(absent)}"


