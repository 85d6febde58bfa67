"""Each judge host's queue, as `orchard status` and the dashboard show it: what it works on now.

A lab with judge hosts journals every step it starts on one (`JudgeStarted`).
An experiment at the judge or landing is on the host its latest step
started on, doing that step; one not yet started on any host is waiting
for a judge. Every host the lab has used is listed, an idle one too. A lab
without judge hosts has no queues here: its judge is this machine, and the
measurement lock's line says what it does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchard.lab.records.db import JournalEvent
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.judge_host import JudgeStarted

AT_THE_JUDGE = (ExperimentStatus.COLLECTED, ExperimentStatus.JUDGING, ExperimentStatus.LANDING)
WAITING = "waiting for a judge host"


@dataclass(frozen=True)
class JudgeQueue:
    """One judge host (or, `WAITING`, none yet) and the experiments on it, each with its step."""

    judge: str
    work: tuple[str, ...]  # "count-with-dict (confirm)"

    def line(self) -> str:
        return f"{self.judge}: {', '.join(self.work) or 'idle'}"


def judge_queues(started: Sequence[JournalEvent[JudgeStarted]], active: Sequence[tuple[str, str]]) -> list[JudgeQueue]:
    """The queues from the journal's judge-host starts and the experiments (name, status) now active."""
    if not started:
        return []
    latest = {e.experiment: e.event for e in started if e.experiment}
    queues: dict[str, list[str]] = {e.event.judge.label: [] for e in started}
    for name, status in active:
        if status not in AT_THE_JUDGE:
            continue
        step = latest.get(name)
        if step is None or status == ExperimentStatus.COLLECTED:
            queues.setdefault(WAITING, []).append(name)
        else:
            queues[step.judge.label].append(f"{name} ({step.step})")
    return [JudgeQueue(judge, tuple(work)) for judge, work in queues.items()]
