"""Held-out variants: inputs no worker saw, made from the bench's own at verdict time.

A suite without held-out scenarios has no second line against a change that
special-cases the one input it can see; with them, the held-out inputs are
still few. So every verdict also runs, beside each visible command scenario,
variants of the input files its command names (under the suite's directory or
a fixture's, or among its declared `inputs`): the same bytes under another
name in another directory, and content-perturbed copies (`perturbations.py`;
a scenario's `variants` list and `variant_command` choose). They are written
after the fixtures, in a directory of the campaign's own whose name comes from
a seed drawn for this verdict (recorded in it), so no worker ever had them.

A variant the baseline itself fails on is not an input of the program's and
is left out, said in the verdict; so is a perturbation that leaves an input
unchanged. How variants are judged is `variant_watch.py`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard import process
from orchard.bench.measuring.measure import RunSpec, Workbench, observe, render
from orchard.bench.sandbox import measured_view
from orchard.bench.sandbox.environment import isolated_env
from orchard.bench.suites import perturbations
from orchard.bench.suites.suite import Scenario, Suite
from orchard.within import inside

COMMAND_VARIANT = "command"  # the perturbation's name for what a scenario's `variant_command` wrote


@dataclass(frozen=True)
class Variant:
    scenario: Scenario  # the origin's scenario with the variant's path in place of the input
    perturbation: str
    source: str  # the input it was made from, as the bench names it

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def origin(self) -> str:
        return self.scenario.variant_of

    @property
    def renamed(self) -> bool:
        """Same bytes as the input: the scenario's facts hold on it unchanged."""
        return self.perturbation == perturbations.RENAME


def input_arguments(scenario: Scenario, bench: Workbench) -> list[tuple[int, Path]]:
    """(position, file) of each argument of the scenario's command that is an input file: a file under the
    suite's directory or a fixture's, not the program run (the first word, an executable, `{bin}`)."""
    if scenario.kind != "command" or not isinstance(scenario.command, list):
        return []
    values = bench.template_values(Path("/nonexistent"))
    roots = (bench.suite.directory.resolve(), (bench.root / "fixtures").resolve())
    declared = {path.resolve() for path in measured_view.declared(bench.suite.directory, scenario.inputs)}
    found = []
    for index, part in enumerate(scenario.command[1:], start=1):
        if "{bin}" in part:
            continue
        rendered = render([part], values, f"scenario '{scenario.name}'")[0]
        path = Path(bench.suite.directory, rendered).resolve()
        if path.is_file() and (path in declared or (any(inside(path, root) for root in roots)
                                                    and not path.stat().st_mode & 0o111)):
            found.append((index, path))
    return found


class _Maker:
    """Writes one verdict's variants under a fresh directory of the workbench's fixtures, named by its seed."""

    def __init__(self, bench: Workbench, seed: int) -> None:
        self.bench, self.rng = bench, random.Random(seed)
        self.home = bench.root / "fixtures" / self._word()
        self.notes: list[str] = []

    def _word(self) -> str:
        return "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))

    def _place(self, suffix: str) -> Path:
        directory = self.home / self._word()
        directory.mkdir(parents=True)
        return directory / (self._word() + suffix)

    def _shown(self, path: Path) -> str:
        for root, name in ((self.bench.suite.directory, ""), *((p, f"{{fixture.{n}}}/")
                                                                 for n, p in self.bench.fixtures.items())):
            if inside(path, root.resolve()):
                return name + path.relative_to(root.resolve()).as_posix()
        return str(path)

    def of(self, scenario: Scenario) -> list[Variant]:
        inputs = input_arguments(scenario, self.bench)
        if not inputs:
            self.notes.append(f"{scenario.name}: its command names no input file, so no variant could be made")
        made = []
        for position, path in inputs:
            data = path.read_bytes()
            names = perturbations.defaults(data) if scenario.variants is None else scenario.variants
            for name in names:
                content = perturbations.perturb(name, data, self.rng)
                if name != perturbations.RENAME and content == data:
                    self.notes.append(f"{scenario.name}: {name} leaves {self._shown(path)} unchanged")
                    continue
                target = self._place(path.suffix)
                target.write_bytes(content)
                made.append(self._variant(scenario, (position, path), target, name, len(inputs)))
            if scenario.variant_command is not None:
                made += self._by_command(scenario, (position, path), len(inputs))
        return made

    def _by_command(self, scenario: Scenario, at: tuple[int, Path], inputs: int) -> list[Variant]:
        target = self._place(at[1].suffix)
        values = {"suite_dir": str(self.bench.suite.directory), "input": str(at[1]), "output": str(target),
                  "seed": str(self.rng.randrange(2**31))}
        assert scenario.variant_command is not None
        command = render(scenario.variant_command, values, f"scenario '{scenario.name}' variant_command")
        capture = process.run(command, cwd=self.bench.suite.directory, env=isolated_env(),
                              timeout_s=scenario.timeout_s)
        if not capture.ok or not target.is_file():
            self.notes.append(f"{scenario.name}: its variant_command failed (exit {capture.returncode}): "
                              f"{capture.stderr_text[-200:].strip()}")
            return []
        return [self._variant(scenario, at, target, COMMAND_VARIANT, inputs)]

    def _variant(self, scenario: Scenario, at: tuple[int, Path], target: Path, name: str, inputs: int) -> Variant:
        position, path = at
        assert isinstance(scenario.command, list)
        command = list(scenario.command)
        command[position] = str(target).replace("{", "{{").replace("}", "}}")
        tag = f"{scenario.name}~{name}" + (f"~{position}" if inputs > 1 else "")
        renamed = name == perturbations.RENAME
        return Variant(dataclasses.replace(scenario, name=tag, command=command, expect=scenario.expect if renamed
                                           else (), measure=(), variants=(), variant_command=None,
                                           variant_of=scenario.name), name, self._shown(path))


def make_variants(bench: Workbench, seed: int) -> tuple[list[Variant], list[str]]:
    """The variants of every visible command scenario's inputs, and notes on the inputs that got none."""
    maker = _Maker(bench, seed)
    variants = [v for s in bench.suite.scenarios if not s.holdout and not s.variant_of for v in maker.of(s)]
    return variants, maker.notes


def runnable(bench: Workbench, variants: Sequence[Variant], baseline: Path) -> tuple[list[Variant], list[str]]:
    """The variants the baseline runs successfully (once, untimed), and a note for each it fails on."""
    kept, notes = [], []
    subject: dict[str, Any] = {"name": "baseline", "kind": "binary", "binary": str(baseline)}
    for variant in variants:
        seen = observe(bench, variant.scenario, baseline, RunSpec("baseline", subject, 0, {}, set()), count=False)
        if seen.ok:
            kept.append(variant)
        else:
            notes.append(f"{variant.name}: left out, the baseline fails on it ({seen.failure})")
    return kept, notes


def with_variants(suite: Suite, variants: Sequence[Variant]) -> Suite:
    """The suite with the variants as scenarios of its own, each under its origin's gates; its metrics unchanged
    (variants are judged beside the verdict, never in its Holm family)."""
    gates = tuple(dataclasses.replace(g, scenarios=(*g.scenarios, *(v.name for v in variants
                                                                     if v.origin in g.scenarios)))
                  for g in suite.gates)
    return dataclasses.replace(suite, scenarios=(*suite.scenarios, *(v.scenario for v in variants)), gates=gates)
