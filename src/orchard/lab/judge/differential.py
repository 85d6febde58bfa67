"""Differential checks beyond the bench: before a win lands, the baseline is the oracle on inputs the bench lacks.

A verdict sees only the bench's inputs, so a change that is fast there and
wrong elsewhere (a shortcut that holds for the one fixture, a lookup that
falls back badly) passes it even when the target's tests do. After the
verdict passes, both binaries, untimed and confined as measured runs are,
run each command scenario's command with its input file replaced by each
input of a corpus wider than the bench: the bench's own inputs, inputs made
from them (each half, the input twice, each section alone), the files of
`[bench] corpus`, and the target's own test inputs and documentation of the
same kind (its suffix). Any difference (stdout, exit status) is a
regression the bench was too narrow to see, named by its first input. A
hypothesis on the output's size (`stdout_bytes`, a token estimate, tool
calls) means to change the output: then only the exit status is compared.
The cost is bounded by `[bench] corpus_inputs`, `corpus_kb` and
`corpus_seconds` (docs/security.md).
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchard import confine
from orchard.lab.judge.measuring import confinement, load_suite
from orchard.lab.records.build import BuiltBinary, Check, CheckName
from orchard.lab.workers.sandbox.allowlist import judge_env
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.process import run
from orchard.scratch import held_directory

PROGRAMS = (".py", ".sh", ".pl", ".rb", ".js", ".exe")  # a command word naming one is the program, not its input
TARGET_DIRS = frozenset({"test", "tests", "testdata", "doc", "docs", "example", "examples", "fixtures"})
OUTPUT_METRICS = ("stdout_bytes", "tool_call_count")  # besides token estimates: metrics of the output itself
SECTIONS = 8  # an input is cut at blank lines into at most this many sections, each run alone
INPUT_BYTES = 1 << 20  # a larger file of the target's is not an input worth running
ADMITTED = 16 << 20  # stdout compared per run


@dataclass(frozen=True)
class Input:
    """One input of the corpus: where it came from (as the journal names it) and its bytes."""

    name: str
    data: bytes


@dataclass(frozen=True)
class Differential:
    """What the check found: how many inputs both binaries agreed on, the first they did not, what it left out."""

    compared: int
    differs: str | None = None  # "<input>: <what differed>"
    stdout_compared: bool = True
    limits: tuple[str, ...] = ()  # why inputs were left out (a bound reached, a scenario without an input)

    @property
    def detail(self) -> str:
        if self.differs is not None:
            return f"differs from the baseline on {self.differs}"
        what = "output and exit status" if self.stdout_compared else "exit status (the hypothesis changes output)"
        said = (f"same {what} as the baseline on {self.compared} input(s) beyond the bench" if self.compared
                else "no corpus: no input beyond the bench was run")
        return "; ".join([said, *self.limits])

    def check(self) -> Check:
        return Check(CheckName.DIFFERENTIAL, self.differs is None, self.detail)


@dataclass(frozen=True)
class _Scenario:
    """A command scenario the check can run: its argv template and which word is its input."""

    name: str
    argv: tuple[str, ...]
    input_index: int
    timeout_s: float
    env: tuple[tuple[str, str], ...]
    loopback: bool


def output_may_change(metric: str) -> bool:
    """Whether a hypothesis on `metric` (`scenario/metric`) means to change what the program prints; a change judged
    without one ("") may, so honest output changes are not KILLed for it."""
    name = metric.rsplit("/", 1)[-1]
    if not name:
        return True
    return name in OUTPUT_METRICS or "tokens" in name


def applies(ws: Workspace) -> bool:
    """Whether the lab runs the check: a suite of orchard's (not the bench's own verdict script) and a corpus bound
    above zero."""
    return bool(ws.config.bench.corpus_inputs and ws.suite(ws.bench_dir) and not ws.config.bench.verdict)


def check(ws: Workspace, baseline: BuiltBinary, candidate: BuiltBinary, base: str, metric: str) -> Check:
    """The differential check of `candidate` against `baseline` (built from `base`), as a check of the judge."""
    with held_directory(prefix="orchard-differential-") as held:
        return compare(ws, (baseline, candidate), base, held, stdout=not output_may_change(metric)).check()


def compare(ws: Workspace, binaries: tuple[BuiltBinary, BuiltBinary], base: str, scratch: Path, *,
            stdout: bool) -> Differential:
    """Run both binaries on every corpus input of every runnable scenario, within the bounds; the first difference."""
    settings = ws.config.bench
    scenarios, limits = _scenarios(ws)
    deadline = time.monotonic() + settings.corpus_seconds
    runner = _Runner(ws, binaries, scratch)
    compared = 0
    for scenario in scenarios:
        inputs, cut = _bounded(_corpus(ws, scenario, base), settings.corpus_inputs - compared,
                               settings.corpus_kb * 1024)
        limits += cut
        for item in inputs:
            if time.monotonic() > deadline:
                return Differential(compared, None, stdout, (*limits, f"stopped at {settings.corpus_seconds:g} s "
                                                             f"([bench] corpus_seconds)"))
            differs = runner.differs(scenario, item, stdout)
            if differs is not None:
                return Differential(compared, f"{item.name} ({scenario.name}): {differs}", stdout, tuple(limits))
            compared += 1
    return Differential(compared, None, stdout, tuple(limits))


def _scenarios(ws: Workspace) -> tuple[list[_Scenario], list[str]]:
    """The suite's scenarios the check can run (argv commands naming an input file in the bench), and why others
    are left out."""
    suite = load_suite(ws.suite(ws.bench_dir) or ws.bench_dir)
    runnable, left = [], []
    for scenario in suite.scenarios:
        if scenario.holdout or scenario.kind != "command":
            continue
        command = scenario.command
        found = None if not isinstance(command, list) else _input_word(ws, command)
        if found is None:
            left.append(f"scenario {scenario.name} names no input file of the bench")
            continue
        runnable.append(_Scenario(scenario.name, tuple(command or ()), found, scenario.timeout_s,
                                  tuple(scenario.env.items()), scenario.loopback))
    return runnable, left


def _input_word(ws: Workspace, command: Sequence[str]) -> int | None:
    """The last word of `command` naming a file of the bench that is not a program (`{suite_dir}/doc.md`)."""
    for index in reversed(range(len(command))):
        word = command[index]
        if "{fixture." in word or "{bin}" in word or "{workdir}" in word:
            continue
        path = Path(word.replace("{suite_dir}", str(ws.bench_dir)))
        path = path if path.is_absolute() else ws.bench_dir / path
        if path.is_file() and path.suffix not in PROGRAMS and not os.access(path, os.X_OK):
            return index
    return None


def _bench_input(ws: Workspace, scenario: _Scenario) -> Path:
    word = Path(scenario.argv[scenario.input_index].replace("{suite_dir}", str(ws.bench_dir)))
    return word if word.is_absolute() else ws.bench_dir / word


def _corpus(ws: Workspace, scenario: _Scenario, base: str) -> Iterator[Input]:
    """The scenario's corpus, in order: the bench's input, inputs made from it, the declared corpus, the target's
    own test inputs and documentation with the same suffix."""
    source = _bench_input(ws, scenario)
    data = source.read_bytes()
    yield Input(f"the bench's {source.name}", data)
    yield from _made_from(source.name, data)
    yield from _declared(ws, base)
    yield from _targets_own(ws.baseline_dir(base), source.suffix, ws.config.target.ignore)


def _made_from(name: str, data: bytes) -> Iterator[Input]:
    """Inputs made from a bench input: each half (at a line), the input twice, each section (at blank lines)."""
    lines = data.splitlines(keepends=True)
    half = len(lines) // 2
    if half:
        yield Input(f"the first half of {name}", b"".join(lines[:half]))
        yield Input(f"the second half of {name}", b"".join(lines[half:]))
    yield Input(f"{name} twice", data + (b"" if data.endswith(b"\n") else b"\n") + data)
    blocks = [b for b in data.replace(b"\r\n", b"\n").split(b"\n\n") if b.strip()]
    per = -(-len(blocks) // SECTIONS) if blocks else 0
    sections = [b"\n\n".join(blocks[i:i + per]) + b"\n" for i in range(0, len(blocks), per)] if per else []
    if len(sections) > 1:
        yield from (Input(f"section {n} of {len(sections)} of {name}", s) for n, s in enumerate(sections, 1))


def _declared(ws: Workspace, base: str) -> Iterator[Input]:
    """`[bench] corpus`: globs relative to the target at `base` (`bench:` before one: relative to the bench)."""
    for pattern in ws.config.bench.corpus:
        root, glob = (ws.bench_dir, pattern[6:]) if pattern.startswith("bench:") else (ws.baseline_dir(base), pattern)
        for path in sorted(root.glob(glob)):
            if path.is_file() and not path.is_symlink():
                yield Input(f"{'bench:' if root == ws.bench_dir else ''}{path.relative_to(root)}", path.read_bytes())


def _targets_own(checkout: Path, suffix: str, ignore: Sequence[str]) -> Iterator[Input]:
    """The target's test inputs and documentation: files under tests/, docs/, examples/ ... and READMEs, of the
    bench input's suffix, outside hidden directories and build outputs."""
    skip = {entry.strip("/") for entry in ignore}
    for root, dirs, files in os.walk(checkout):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not any(fnmatch.fnmatch(d, s) for s in skip))
        relative = Path(root).relative_to(checkout)
        for name in sorted(files):
            path = Path(root, name)
            own = TARGET_DIRS & {part.lower() for part in relative.parts} or name.upper().startswith("README")
            if own and path.suffix == suffix and not path.is_symlink() and path.stat().st_size <= INPUT_BYTES:
                yield Input(str(relative / name), path.read_bytes())


def _bounded(inputs: Iterator[Input], count: int, budget: int) -> tuple[list[Input], list[str]]:
    """At most `count` inputs of `budget` bytes in all; what was left out, said once."""
    kept: list[Input] = []
    seen: set[bytes] = set()
    for item in inputs:
        if item.data in seen:
            continue
        if len(kept) >= count or len(item.data) > budget:
            why = "corpus_inputs" if len(kept) >= count else "corpus_kb"
            return kept, [f"left out {item.name} and later inputs ([bench] {why})"]
        seen.add(item.data)
        budget -= len(item.data)
        kept.append(item)
    return kept, []


class _Runner:
    """Runs one scenario's command on one input file, for each binary, confined as a measured run is."""

    def __init__(self, ws: Workspace, binaries: tuple[BuiltBinary, BuiltBinary], scratch: Path) -> None:
        self.ws = ws
        self.binaries = binaries
        self.scratch = scratch
        self.confinement = confinement(ws, *binaries)
        self.count = 0

    def differs(self, scenario: _Scenario, item: Input, stdout: bool) -> str | None:
        """What differs between the baseline's and the candidate's run on `item`, or None. A baseline that
        disagrees with itself on it (its output is not a function of its input) leaves the input out."""
        self.count += 1
        path = self.scratch / "fixtures" / f"input-{self.count}" / f"input{_bench_suffix(scenario)}"
        path.parent.mkdir(parents=True)
        path.write_bytes(item.data)
        confine.hand_over([self.scratch / "fixtures"])
        baseline, candidate = (self._run(scenario, built, path) for built in self.binaries)
        said = _difference(baseline, candidate, stdout)
        if said is not None and _difference(baseline, self._run(scenario, self.binaries[0], path), stdout):
            return None
        return said

    def _run(self, scenario: _Scenario, built: BuiltBinary, path: Path) -> tuple[int | None, bytes]:
        values = {"bin": str(built.path), "suite_dir": str(self.ws.bench_dir), "workdir": str(self.scratch / "work")}
        argv = [word.format_map(values) for word in scenario.argv]
        argv[scenario.input_index] = str(path)
        wrapped = self.confinement.wrap(argv, binary=built.path, suite_dir=self.ws.bench_dir, root=self.scratch,
                                        results_file=None, loopback=scenario.loopback)
        env = self.confinement.env({**judge_env(self.ws.config.lab.pass_env), **dict(scenario.env)})
        capture = run(wrapped, cwd=self.ws.bench_dir, env=env, timeout_s=scenario.timeout_s, admitted_chars=ADMITTED)
        own = built.path.parent
        return (None if capture.timed_out else capture.returncode), capture.stdout.replace(bytes(own), b"{bin_dir}")


def _bench_suffix(scenario: _Scenario) -> str:
    return Path(scenario.argv[scenario.input_index]).suffix


def _difference(baseline: tuple[int | None, bytes], candidate: tuple[int | None, bytes], stdout: bool) -> str | None:
    """How two runs differ, in words, or None."""
    if baseline[0] != candidate[0]:
        return f"exit status {_status(candidate[0])}, the baseline's {_status(baseline[0])}"
    if stdout and baseline[1] != candidate[1]:
        at = next((i for i, (a, b) in enumerate(zip(baseline[1], candidate[1], strict=False)) if a != b),
                  min(len(baseline[1]), len(candidate[1])))
        return (f"stdout differs at byte {at:,} ({len(candidate[1]):,} bytes, the baseline's "
                f"{len(baseline[1]):,}): {shlex.quote(candidate[1][at:at + 40].decode(errors='replace'))}")
    return None


def _status(code: int | None) -> str:
    return "timed out" if code is None else str(code)

