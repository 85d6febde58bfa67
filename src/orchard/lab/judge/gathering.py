"""Candidates waiting on the same base measured together: the judge threads' meeting point before a verdict.

A judge thread that has built and tested its candidate hands the pair (baseline, candidate) here and waits.
One campaign runs at a time; the thread that runs next takes every candidate then waiting on its baseline (up to
`[workers] shared_baseline`) into one shared-baseline campaign (`bench.run_shared_verdicts`: one baseline run per
round for all of them, one verdict each) and hands each waiting thread its own verdict. A candidate that finds no
other waiting is measured by `measuring.measure`, exactly as without this; so is every candidate of a bench with
its own verdict command, which judges one pair at a time. While candidates wait here they do not hold a judge's
build slot (`waiting`): the loop starts building the next candidates meanwhile, which is how several come to
wait together.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from orchard.lab.judge.measuring import (
    BinaryChanged,
    MeasureProgress,
    Verdict,
    check_built,
    measure,
    measure_together,
)
from orchard.lab.records.build import BuiltBinary
from orchard.lab.workers.workspace.workspace import Workspace


@dataclass(frozen=True)
class _Waiting:
    candidate: BuiltBinary
    verdict: Future[Verdict] = field(default_factory=Future)


class Gathering:
    """Where built candidates wait for their verdict; `measure` is `measuring.measure`'s drop-in."""

    def __init__(self, most: int) -> None:
        self.most = most  # candidates in one campaign at most
        self._lock = threading.Lock()  # guards _waiting
        self._campaign = threading.Lock()  # one campaign at a time (their runs would take turns anyway)
        self._waiting: dict[str, list[_Waiting]] = {}  # by baseline binary: one base, one baseline
        self._inside = 0  # judge threads in `measure`: waiting for their campaign or in it

    def jobs(self, judges: int, *, most: bool = False) -> int:
        """Candidates the loop may have in judging now (`most`: ever): `judges` building, and those built and
        waiting here for their verdict, which hold no build slot, up to a campaign's worth: the next candidates
        are built meanwhile, so candidates on the same base come to wait together. One at most: `judges`."""
        with self._lock:
            return judges + min(self.most - 1 if most else self._inside, self.most - 1)

    def measure(self, ws: Workspace, baseline: BuiltBinary, candidate: BuiltBinary, *,
                progress: MeasureProgress | None = None) -> Verdict:
        """The verdict of `candidate` against `baseline`, measured alone or beside others waiting on it."""
        if self.most <= 1 or ws.config.bench.verdict:
            return measure(ws, baseline, candidate, progress=progress)
        mine = _Waiting(candidate)
        key = str(baseline.path)
        with self._lock:
            self._waiting.setdefault(key, []).append(mine)
            self._inside += 1
        try:
            with self._campaign:
                if not mine.verdict.done():
                    with self._lock:
                        queue = self._waiting.get(key, [])
                        batch = [mine, *(w for w in queue if w is not mine)][: self.most]
                        self._waiting[key] = [w for w in queue if w not in batch]
                    _measure_together(ws, baseline, batch, progress)
            return mine.verdict.result()
        finally:
            with self._lock:
                self._inside -= 1


def _measure_together(ws: Workspace, baseline: BuiltBinary, batch: list[_Waiting],
                      progress: MeasureProgress | None) -> None:
    """One campaign for `batch`, each waiting thread's verdict (or error) set; one candidate is `measure`."""
    if len(batch) == 1:
        _alone(ws, baseline, batch[0], progress)
        return

    def unchanged() -> None:
        for waiting in batch:
            check_built(baseline, waiting.candidate)

    try:
        unchanged()
        verdicts = measure_together(ws, baseline, [w.candidate for w in batch], unchanged, progress)
        unchanged()
    except BinaryChanged:
        # a binary changed under the campaign: nothing it measured counts; each candidate is measured on its
        # own, so only the one whose binary changed is refused (and a changed baseline is handled as today)
        for waiting in batch:
            _alone(ws, baseline, waiting, progress)
        return
    except BaseException as error:  # every waiting thread raises it, as `measure` would have in each
        for waiting in batch:
            waiting.verdict.set_exception(error)
        return
    for waiting, verdict in zip(batch, verdicts, strict=True):
        waiting.verdict.set_result(verdict)


def _alone(ws: Workspace, baseline: BuiltBinary, waiting: _Waiting, progress: MeasureProgress | None) -> None:
    try:
        waiting.verdict.set_result(measure(ws, baseline, waiting.candidate, progress=progress))
    except BaseException as error:  # the waiting thread raises it, as `measure` would have in that thread
        waiting.verdict.set_exception(error)
