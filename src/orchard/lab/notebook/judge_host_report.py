"""Each judge host's share of a lab, as FINAL_REPORT.md, report.html and the dashboard say it: what it judged and how.

A lab with judge hosts spreads its verdicts over several machines, each
with its own lock, A/A calibration and baselines, so a reader of the
report needs each host's account: how many verdicts it started (`JudgeStarted`,
a rebase verdict counted too), how many candidates its judgments decided
and how many of its wins reached main, the steps lost when it left the
cluster (`JudgeLost`), and the calibration its latest verdict was measured
against: the A/A pairs and the noise floor of each metric. A lab without
judge hosts has none of this (its judge is this machine).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchard.lab.judge.verdict_view import floor_pct
from orchard.lab.records.db import ExperimentRecord, JournalEvent
from orchard.lab.records.judge_host import JudgeLost, JudgeStarted, JudgeStep
from orchard.lab.records.judgment import Decision
from orchard.lab.records.verdict import Verdict
from orchard.lab.text import inline

VERDICT_STEPS = (JudgeStep.VERDICT, JudgeStep.REBASE)


@dataclass(frozen=True)
class HostCalibration:
    """The A/A calibration a judge host's latest verdict used: its pairs, its machine, each metric's floor."""

    pairs: int
    machine: str
    floors: tuple[tuple[str, float], ...]  # (metric key, noise floor as a share of the baseline)

    def text(self) -> str:
        floors = ", ".join(f"{key} {floor_pct(floor)}" for key, floor in self.floors) or "no metric"
        return f"{self.pairs} A/A pairs on machine {self.machine}, floors {floors}"


@dataclass(frozen=True)
class JudgeHostAccount:
    """One judge host's share of the lab."""

    judge: str  # its label: host name and dask worker address
    verdicts: int  # verdicts started on it (rebase verdicts included)
    landing_steps: int  # confirmations and post-merge checks started on it
    judged: int  # candidates whose judgment it made
    wins: int  # of those, judged LAND
    landed: int  # of those wins, merged into main
    lost: tuple[str, ...]  # the steps lost when it left the cluster, each as its reason says
    calibration: HostCalibration | None  # None: none of its judgments carries a measured verdict

    def text(self) -> str:
        """Its account in one plain sentence (the dashboard's and report.html's line)."""
        calibration = "no measured verdict" if self.calibration is None else self.calibration.text()
        lost = f"steps lost {len(self.lost)}" + (f" ({'; '.join(self.lost)})" if self.lost else "")
        return (f"judge host {self.judge}: verdicts run {self.verdicts}, landing steps {self.landing_steps}, "
                f"candidates judged {self.judged} (wins {self.wins}, landed {self.landed}), {lost}; "
                f"calibration: {calibration}")


def judge_host_accounts(started: Sequence[JournalEvent[JudgeStarted]], lost: Sequence[JournalEvent[JudgeLost]],
                        rows: Sequence[ExperimentRecord]) -> list[JudgeHostAccount]:
    """Each judge host the journal names, in the order it first started a step."""
    hosts = list(dict.fromkeys([*(e.event.judge for e in started), *(e.event.judge for e in lost)]))
    accounts = []
    for host in hosts:
        steps = [e.event.step for e in started if e.event.judge == host]
        mine = [r for r in rows if r.judgment is not None and r.judgment.judge == host]
        wins = [r for r in mine if r.decision == Decision.LAND]
        measured = [r.judgment.verdict for r in mine if r.judgment is not None and r.judgment.verdict is not None
                    and r.judgment.verdict.calibration is not None]
        accounts.append(JudgeHostAccount(
            judge=host.label, verdicts=sum(1 for s in steps if s in VERDICT_STEPS),
            landing_steps=sum(1 for s in steps if s not in VERDICT_STEPS), judged=len(mine), wins=len(wins),
            landed=sum(1 for r in wins if r.merge_commit is not None),
            lost=tuple(e.event.reason for e in lost if e.event.judge == host),
            calibration=_calibration(measured[-1]) if measured else None))
    return accounts


def _calibration(verdict: Verdict) -> HostCalibration:
    note = verdict.calibration
    assert note is not None
    return HostCalibration(note.runs, note.machine_fingerprint, tuple((m.key, m.floor) for m in verdict.metrics))


def judge_host_lines(accounts: Sequence[JudgeHostAccount]) -> list[str]:
    """The report's section on its judge hosts, or nothing for a lab judged on its own machine."""
    if not accounts:
        return []
    return ["## Judge hosts", "", *(f"- {inline(a.text())}" for a in accounts)]
