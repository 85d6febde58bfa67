"""Where a win's landing measures: on this machine, or on the judge host that judged it.

A landing takes up to three measurements besides its git steps: the patch
judged again when main moved (`rejudge`), the confirmation verdict on fresh
samples (`confirm`) and main after the merge against the previous main
(`main_check`). `OnThisMachine` takes them here, as the lab always did;
`judge_hosts.OnJudgeHost` sends each to the judge host that judged the win,
and nowhere else, so no verdict's pairs or baseline span two machines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from orchard.lab.judge.ladder import Progress, judge
from orchard.lab.judge.measuring import BinaryChanged, MeasureProgress, Verdict, measure
from orchard.lab.landing.land_checks import landing_checkout
from orchard.lab.records.build import CheckName
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judge_host import JudgeHost
from orchard.lab.records.judgment import Judgment
from orchard.lab.workers.workspace.builds import baseline_binary, candidate_step, hash_build, placeholders
from orchard.lab.workers.workspace.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState


class Measurements(Protocol):
    """A landing's measurements, wherever they run (`judge`: the judge host, None for this machine)."""

    @property
    def judge(self) -> JudgeHost | None: ...

    def rejudge(self, ws: Workspace, state: LabState, name: str, candidate: Candidate, base: str, bench_base: str,
                progress: Progress, measure_progress: MeasureProgress | None) -> Judgment: ...

    def confirm(self, ws: Workspace, state: LabState, main_head: str, current: Judgment, name: str,
                hypothesis: Hypothesis, measure_progress: MeasureProgress | None) -> Verdict | str: ...

    def main_check(self, ws: Workspace, state: LabState, previous: str, commit: str,
                   measure_progress: MeasureProgress | None) -> tuple[Verdict, JudgeHost | None]:
        """Main after the merge against the previous main, and the judge host that measured both (None: here)."""


class OnThisMachine:
    """The landing's measurements on the lab's own machine, under its lock, against its own baselines."""

    judge: JudgeHost | None = None

    def rejudge(self, ws: Workspace, state: LabState, name: str, candidate: Candidate, base: str, bench_base: str,
                progress: Progress, measure_progress: MeasureProgress | None) -> Judgment:
        return judge(ws, state, name, candidate, base, bench_base, progress=progress,
                     measure_progress=measure_progress)

    def confirm(self, ws: Workspace, state: LabState, main_head: str, current: Judgment, name: str,
                hypothesis: Hypothesis, measure_progress: MeasureProgress | None) -> Verdict | str:
        return confirmation(ws, state, main_head, current, name, hypothesis, measure_progress)

    def main_check(self, ws: Workspace, state: LabState, previous: str, commit: str,
                   measure_progress: MeasureProgress | None) -> tuple[Verdict, JudgeHost | None]:
        return measure(ws, baseline_binary(ws, state, previous), baseline_binary(ws, state, commit),
                       progress=measure_progress), None


def confirmation(ws: Workspace, state: LabState, main_head: str, current: Judgment, name: str,
                 hypothesis: Hypothesis, measure_progress: MeasureProgress | None) -> Verdict | str:
    """The confirmation verdict of exactly what lands, built and tested again from clean; or why there is none.

    No binary a record names is measured: the judged patch (checked as for
    the commit) is applied to a fresh checkout of main and built here.
    """
    checkout = landing_checkout(ws, name, main_head, current, hypothesis, purpose="confirm")
    binary = ws.binary_in(checkout)
    values, logs = placeholders(ws, checkout, binary), checkout.parent / "confirm-logs"
    for step, command in ((CheckName.BUILD, ws.config.target.build), (CheckName.TESTS, ws.config.target.test)):
        check = candidate_step(ws, step, command, checkout, values, logs)
        if not check.passed:
            return f"what lands fails its {step} from clean for the confirmation: {check.detail}"
    if binary is None or not binary.exists():
        return f"what lands builds no binary at {ws.config.target.binary}"
    built = hash_build(binary)
    for attempt in (1, 2):
        try:
            return measure(ws, baseline_binary(ws, state, main_head), built, progress=measure_progress)
        except BinaryChanged as changed:
            if changed.role != "baseline" or attempt == 2:
                return str(changed)
    raise AssertionError("unreachable")

