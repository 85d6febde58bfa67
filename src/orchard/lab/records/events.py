"""The journal's events: one kind each (`EventKind`), one frozen record each.

A writer hands `LabState.log` a record and a reader gets the record back
(`records/db.JournalEvent`), so no stage reads another stage's event by key.
lab.db stores each as the JSON of its `to_dict`, the JSON earlier orchards
wrote: a lab they journaled still reads (`from_dict` fills in what an older
entry lacks). The events that carry a verdict are in `judgment` (the
judgment), `land_steps` (the landing steps) and `measured_events`; this
module imports no other record but the verdict, so any stage can journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Self

if TYPE_CHECKING:
    from orchard.lab.records.verdict import Verdict



class EventKind(StrEnum):
    """What happened, as the journal's headings name it."""

    LAB_START = "lab-start"
    EXPERIMENT_START = "experiment-start"
    EXPERIMENT_HOST = "experiment-host"
    JUDGE_HOST = "judge-host"  # a step of an experiment started on a judge host
    JUDGE_LOST = "judge-lost"  # a win's judge host left before its merge: judged again from scratch
    JUDGMENT = "judgment"
    HELD = "held"  # a win the hack review doubted, waiting for a person
    SETTLED = "settled"  # a person landed or killed a held win (`orchard review`)
    STOP_ASKED = "stop-asked"  # a person asked to stop one experiment's worker (`orchard stop`)
    STOPPED = "experiment-stopped"  # ... and the lab stopped it
    PAUSE = "pause"  # a person paused the lab: no new workers (`orchard pause`)
    RESUME = "resume"  # ... and resumed it, with the limits they changed (`orchard resume`)
    BACKLOG = "backlog"
    REVISIT = "revisit"  # a KILLed hypothesis offered again once, after a win changed what it was about
    LAUNCHER_FAILURE = "launcher-failure"
    AGENT_RETRY = "agent-retry"  # rate limited or overloaded: back to the backlog, tried again after a wait
    AGENT_HUNG = "agent-hung"  # no result within the worker timeout: back to the backlog once
    EXPERIMENT_ERROR = "experiment-error"
    WORKER_STOPPED = "worker-stopped-by-lab"
    SANDBOX_NOTE = "sandbox-note"  # how workers and judge steps are confined, said at each start
    BASELINE_REBUILT = "baseline-rebuilt"
    REFILL = "refill"
    OPPORTUNITIES = "opportunities"
    SWEEP = "sweep"
    FINAL_VERDICT = "final-verdict"
    STOP = "stop"
    # the landing steps (`land_steps.LandStep`), in their order
    LAND = "land"
    REBASE = "rebase"
    CONFIRM = "confirm"
    PUSH = "push"
    MERGE = "merge"
    PUBLISH = "publish"
    MAIN_CHECK = "main-check"
    REVERT = "revert"
    PUBLISH_REVERT = "publish-revert"


def plain(value: Any) -> Any:
    """A field as JSON holds it: a record as its `to_dict`, a tuple as a list."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def texts(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()


def text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Event:
    """One journal event's record. `OMITTED` fields are left out of the JSON when None, as they always were."""

    kind: ClassVar[EventKind]
    OMITTED: ClassVar[frozenset[str]] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)
                if not (f.name in self.OMITTED and getattr(self, f.name) is None)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        raise NotImplementedError(cls.__name__)

    @property
    def measured(self) -> Verdict | None:
        """The verdict this event took under the measurement lock, if it took one (its wait is contention)."""
        return None


@dataclass(frozen=True)
class ExperimentStarted(Event):
    """A worker took a hypothesis: where it runs and where its prompt and log are."""

    kind = EventKind.EXPERIMENT_START
    OMITTED = frozenset({"prompt", "executor", "scheduler"})
    hypothesis: str
    worker: str
    lane: str
    base: str
    launcher: str
    title: str
    log: str
    prompt: str | None = None  # a local worker's
    executor: str | None = None  # "dask" for a worker on the cluster
    scheduler: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["hypothesis"]), str(data["worker"]), str(data["lane"]), str(data["base"]),
                   str(data.get("launcher", "?")), str(data.get("title", "")), str(data.get("log", "")),
                   text(data.get("prompt")), text(data.get("executor")), text(data.get("scheduler")))


@dataclass(frozen=True)
class ExperimentHost(Event):
    """The dask worker an experiment runs on (again, when its first was lost)."""

    kind = EventKind.EXPERIMENT_HOST
    host: str
    address: str
    requeued_from: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["host"]), str(data.get("address", "")), text(data.get("requeued_from")))


@dataclass(frozen=True)
class BacklogChanged(Event):
    """The backlog moved outside an experiment's own hypothesis: siblings of a kill lowered, a plan added (and
    the near-duplicates it proposed refused, each with its reason)."""

    kind = EventKind.BACKLOG
    lowered: tuple[str, ...] | None = None
    because: str | None = None
    planner: str | None = None
    added: tuple[str, ...] | None = None
    refused: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        named = {"lowered confidence": self.lowered, "because": self.because, "planner": self.planner,
                 "added": self.added, "refused": self.refused}
        return {key: plain(value) for key, value in named.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        lowered, added, refused = data.get("lowered confidence"), data.get("added"), data.get("refused")
        return cls(None if lowered is None else texts(lowered), text(data.get("because")),
                   text(data.get("planner")), None if added is None else texts(added),
                   None if refused is None else texts(refused))


@dataclass(frozen=True)
class LauncherFailed(Event):
    """The agent could not work at all; its hypothesis went back to the backlog."""

    kind = EventKind.LAUNCHER_FAILURE
    hypothesis: str
    launcher: str
    exit_code: int | None
    reason: str
    log: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        code = data.get("exit_code")
        return cls(str(data["hypothesis"]), str(data.get("launcher", "")), code if isinstance(code, int) else None,
                   str(data["reason"]), text(data.get("log")))


@dataclass(frozen=True)
class AgentRetried(Event):
    """The agent's service was rate limited or overloaded: not judged; the hypothesis went back to the backlog."""

    kind = EventKind.AGENT_RETRY
    hypothesis: str
    launcher: str
    reason: str
    wait_s: float
    in_a_row: int
    log: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["hypothesis"]), str(data.get("launcher", "")), str(data["reason"]),
                   float(data.get("wait_s", 0.0)), int(data.get("in_a_row", 0)), text(data.get("log")))


@dataclass(frozen=True)
class AgentHung(AgentRetried):
    """The agent printed no result within the worker timeout: its hypothesis goes back to the backlog once."""

    kind = EventKind.AGENT_HUNG


@dataclass(frozen=True)
class SandboxNoted(Event):
    """How this run confines its workers and judge steps (unsandboxed, or a build with the network), said at each
    start."""

    kind = EventKind.SANDBOX_NOTE
    note: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data.get("note", "")))


@dataclass(frozen=True)
class ExperimentFailed(Event):
    """One experiment failed at a stage (`isolation`): re-queued or killed, with the error as its reason."""

    kind = EventKind.EXPERIMENT_ERROR
    hypothesis: str
    stage: str
    reason: str
    requeued: bool

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["hypothesis"]), str(data["stage"]), str(data["reason"]), bool(data.get("requeued")))


@dataclass(frozen=True)
class WorkerStopped(Event):
    """The lab itself stopped a running worker (Ctrl-C, SIGTERM): started again from clean, never collected."""

    kind = EventKind.WORKER_STOPPED
    why: str
    worker: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data.get("why", "")), str(data.get("worker", "")))


@dataclass(frozen=True)
class BaselineRebuilt(Event):
    """The cached baseline's files changed since the judge built them: built again."""

    kind = EventKind.BASELINE_REBUILT
    commit: str
    binary: str
    changed: tuple[str, ...]
    why: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["commit"]), str(data.get("binary", "")), texts(data.get("changed")),
                   str(data.get("why", "")))


@dataclass(frozen=True)
class RefillStopped(Event):
    """Refilling the backlog stopped for the rest of the run, and why."""

    kind = EventKind.REFILL
    stopped: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data.get("stopped", "")))


@dataclass(frozen=True)
class OpportunitiesRead(Event):
    """The opportunities ranking read again after a win: how many, and the top three."""

    kind = EventKind.OPPORTUNITIES
    items: int
    top: tuple[str, ...]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(int(data.get("items", 0)), texts(data.get("top")))


@dataclass(frozen=True)
class LabStopped(Event):
    """The lab stopped, and the condition that stopped it."""

    kind = EventKind.STOP
    reason: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data.get("reason", "")))
