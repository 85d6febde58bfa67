"""A measured run that cannot tell it is measured: the same program in other surroundings must print the same.

Every timed run is shaped like an ordinary user's run (HOME in /home, TMPDIR
/tmp, nothing named after orchard: `confinement.Shape`). A candidate could
still learn that shape (the worker measures in it too) and answer from a
stored result only there. So after the pairs, each scenario runs once more
for each binary, untimed, in the ordinary shape and in another one (HOME and
TMPDIR elsewhere, another working directory, variables added and removed):
a candidate whose output differs between the two while the baseline's does
not (and whose output is the same from run to run in one shape) fails the
gate, and the verdict is REGRESSED.

Only output is compared: a candidate that is faster in one shape and prints
the same is not caught here (docs/security.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from orchard.bench.deciding.verdict import GateResult
from orchard.bench.measuring.measure import Observation, RunSpec, Workbench, observe
from orchard.bench.sandbox.confinement import Shape
from orchard.bench.suites.suite import Scenario, Suite

GATE = "behaves differently when it can tell it is measured"


def check(suite: Suite, bench: Workbench, baseline: Path, candidate: Path,
          fields: Callable[[str], tuple[str, ...]], metric_names: set[str]) -> list[GateResult]:
    """The failed gate (at most one) of a confined campaign; nothing when its runs are not confined.

    `fields`: a scenario's determinism fields (what a `rows` scenario's output is compared on).
    """
    if not bench.confinement.confined:
        return []
    binaries = {"baseline": baseline, "candidate": candidate}
    other = dataclasses.replace(bench, confinement=dataclasses.replace(bench.confinement, shape=Shape.OTHER))
    for scenario in suite.scenarios:
        if scenario.kind == "python":
            continue

        def run(workbench: Workbench, role: str, scenario: Scenario = scenario) -> Observation:
            spec = RunSpec(role, {"name": role, "kind": "binary"}, 0, {"role": role}, metric_names,
                           fields(scenario.name))
            return observe(workbench, scenario, binaries[role], spec, count=False)

        base_seen, base_other = run(bench, "baseline"), run(other, "baseline")
        if not (base_seen.ok and base_other.ok) or base_seen.output_digest != base_other.output_digest:
            continue  # the baseline's own output depends on its surroundings: nothing to hold the candidate to
        seen, elsewhere = run(bench, "candidate"), run(other, "candidate")
        if seen.output_digest == elsewhere.output_digest or run(bench, "candidate").output_digest != \
                seen.output_digest:
            continue  # the same in both, or not the same from run to run anyway (the determinism gate's matter)
        return [GateResult(GATE, False, f"{scenario.name}: the candidate's output in an ordinary user's "
                                        "surroundings differs from its output in others (HOME, TMPDIR, working "
                                        "directory, variables), while the baseline's does not")]
    return []
