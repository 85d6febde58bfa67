"""Gates: absolute quality checks, applied to every run before any statistics.

A token win that loses information, breaks determinism or fails the exit
status is not a win: any failed gate makes the verdict REGRESSED whatever the
metrics say. Gates compare the candidate's run with the baseline's run of the
same pair, so they hold on every run, not on average.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from orchard import process
from orchard.bench.deciding.verdict import GateResult
from orchard.bench.measuring.harness_output import as_number
from orchard.bench.measuring.measure import Observation, Workbench, render
from orchard.bench.sandbox.environment import isolated_env
from orchard.bench.suites.suite import Gate, Scenario


class GateTracker:
    """Checks one campaign's runs as they arrive; remembers outputs for determinism."""

    def __init__(self, gates: Sequence[Gate], scenarios: Iterable[Scenario]) -> None:
        self.gates = list(gates)
        self.returncodes = {s.name: s.returncodes for s in scenarios}
        self._digests: dict[tuple[str, str], set[str | None]] = {}
        self.warnings: list[str] = []

    def determinism_fields(self, scenario: str) -> tuple[str, ...]:
        for gate in self.gates:
            if gate.kind == "determinism" and scenario in gate.scenarios and gate.fields:
                return gate.fields
        return ()

    def check_pair(self, baseline: Observation, candidate: Observation) -> list[GateResult]:
        """Failed gates for one scenario of one pair (the exit status gate always applies)."""
        scenario = candidate.scenario
        failed: list[GateResult] = []
        if not candidate.ok:
            failed.append(GateResult("exit_status", False, f"{scenario}: candidate {candidate.failure}"))
        for role, observation in (("baseline", baseline), ("candidate", candidate)):
            self._digests.setdefault((scenario, role), set()).add(observation.output_digest)
        for gate in self.gates:
            if scenario not in gate.scenarios:
                continue
            result = self._check(gate, scenario, baseline, candidate)
            if result is not None:
                failed.append(result)
        return failed

    def _check(
        self, gate: Gate, scenario: str, baseline: Observation, candidate: Observation
    ) -> GateResult | None:
        if gate.kind == "information_recall":
            base_recall, cand_recall = baseline.recall or 0.0, candidate.recall or 0.0
            minimum = float(gate.value) if gate.value is not None else 0.0
            if cand_recall < base_recall or cand_recall < minimum:
                return GateResult(
                    gate.name, False, f"{scenario}: information_recall {cand_recall:.3f} < baseline {base_recall:.3f}"
                )
        elif gate.kind == "determinism":
            cand_digests = self._digests[(scenario, "candidate")]
            base_digests = self._digests[(scenario, "baseline")]
            if len(base_digests) > 1:
                message = (
                    f"{scenario}: the baseline's output is not deterministic either; gate '{gate.name}' cannot judge"
                )
                if message not in self.warnings:
                    self.warnings.append(message)
            elif len(cand_digests) > 1:
                return GateResult(gate.name, False, f"{scenario}: candidate output differs between runs")
        elif gate.kind in ("no_drop", "hold"):
            assert gate.metric is not None
            cand = _value(candidate, gate.metric)
            if gate.kind == "hold":
                if cand != as_number(gate.value):
                    return GateResult(gate.name, False, f"{scenario}: {gate.metric}={cand} must hold at {gate.value}")
            else:
                base = _value(baseline, gate.metric)
                if base is not None and (cand is None or cand < base):
                    return GateResult(gate.name, False, f"{scenario}: {gate.metric} dropped {base} -> {cand}")
        return None


def _value(observation: Observation, name: str) -> float | None:
    if name == "information_recall":
        return observation.recall
    return observation.values.get(name)


def run_command_gates(
    gates: Sequence[Gate], bench: Workbench, binaries: Mapping[str, Path]
) -> dict[str, list[GateResult]]:
    """Run each custom command gate once per binary: exit 0 passes."""
    results: dict[str, list[GateResult]] = {role: [] for role in binaries}
    for gate in gates:
        if gate.kind != "command":
            continue
        assert gate.command is not None
        for role, binary in binaries.items():
            command = render(gate.command, bench.template_values(binary), f"gate '{gate.name}'")
            capture = process.run(
                command, cwd=bench.suite.directory, env=isolated_env(), timeout_s=bench.suite.timeout_s
            )
            detail = (
                "passed"
                if capture.ok
                else (
                    "timed out"
                    if capture.timed_out
                    else f"exit {capture.returncode}: {capture.stderr_text[-300:].strip()}"
                )
            )
            results[role].append(GateResult(gate.name, capture.ok, detail))
    return results
