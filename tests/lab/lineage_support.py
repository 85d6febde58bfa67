"""A hand-filled lab of many experiments for the lineage graph: ITERATE chains, LANDs merged into main one
after another (each later experiment started from the newest main), KILLs, and one worker still at work."""

from __future__ import annotations

from orchard.lab.db.state import LabState
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, Lane
from orchard.lab.records.lab_start import LabStart
from orchard.lab.records.land_steps import Merged
from tests.lab.test_state_records import BASE, BENCH

IDEAS = ("count-with-dict", "terse-report", "single-write", "read-whole-file", "tokenize-with-one-compiled-regex",
         "cache-the-stopword-set", "join-once", "skip-the-sort-when-unused", "intern-words", "buffered-output")


def fill_lineage(state: LabState, count: int) -> list[str]:
    """`count` experiments in fives: an idea ITERATEd twice then LANDed, a KILLed idea, a fifth LANDed or KILLed;
    the last experiment is at work. Their names, oldest first."""
    state.log(LabStart(BASE, BENCH, "", "20 A/A pairs, seed 11", {"report/wall_ms": 64.0}, {"report/wall_ms": 0.05}))
    main, names, parent = BASE, [], None
    for i in range(count):
        kind = i % 5
        idea = f"{IDEAS[i // 5 % len(IDEAS)]}-{i // 5}"
        hypothesis = idea if kind == 0 else f"{idea}-r{kind}" if kind in (1, 2) else f"{idea}-alt{kind}"
        state.add_hypothesis(Hypothesis(metric="report/wall_ms", change=f"try {hypothesis}", id=hypothesis),
                             source="iterate" if kind in (1, 2) else "seed", parent=parent if kind in (1, 2) else None)
        name = f"e{i:02d}-{hypothesis}"
        state.add_experiment(name, hypothesis, f"w{i % 3 + 1}", Lane.EXPLOIT, i, main, BENCH, ExperimentStatus.RUNNING)
        names.append(name)
        parent = hypothesis
        if i == count - 1:
            break  # at work
        lands = kind == 2 or (kind == 4 and i // 5 % 2 == 0)
        decision = "ITERATE" if kind in (0, 1) else "LAND" if lands else "KILL"
        merged = f"{i + 1:02x}" * 20 if lands else None
        state.update_experiment(name, status=ExperimentStatus.DONE, decision=decision, reasons=[decision.lower()],
                                merge_commit=merged)
        if merged is not None:
            state.log(Merged(f"lab/{name}", "main", merged, main), name)
            main = merged
    return names
