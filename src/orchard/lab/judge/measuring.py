"""Verdicts for the lab: the one lab module that measures through `orchard.bench`.

The judge, the landing steps, the lab's start and the sweep ask here for a
verdict of a candidate binary against a baseline binary (from the bench's
suite, or from the bench's own verdict script), for the lab-start
calibration, for the ranked opportunities, and (for the dashboard and
`orchard status`) for who holds the measurement lock. Around every verdict the
lab's own bench clone is checked: nothing measured with a changed harness
counts; and both binaries are checked against the hashes recorded when the
judge built them, before and after: a binary changed by anyone is never
measured, and a verdict taken while one changed does not count
(`BinaryChanged`).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchard import bench
from orchard.bench import (
    Direction,
    LockState,
    LockStatus,
    MeasurementLock,
    Method,
    Opportunity,
    Unjudged,
    lock_status,
    rank_opportunities,
)
from orchard.errors import OrchardError
from orchard.jsonlines import last_json_object
from orchard.lab.records.build import BuiltBinary
from orchard.lab.records.experiment import render_command
from orchard.lab.records.verdict import ExternalRun, GateResult, MetricResult, MetricVerdict, Verdict, VerdictWord
from orchard.lab.text import a_few
from orchard.lab.workers.sandbox.allowlist import judge_env
from orchard.lab.workers.sandbox.sandbox import SandboxMode
from orchard.lab.workers.workspace.builds import STEP_TIMEOUT_S, files_changed, placeholders
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.process import run
from orchard.scratch import held_directory

__all__ = ["ClosedTree", "Direction", "GateResult", "LockState", "LockStatus", "Method", "MetricResult",
           "MetricVerdict", "Opportunity", "Unjudged", "Verdict", "VerdictWord", "is_held_out", "lock_status"]
is_held_out = bench.is_held_out
ClosedTree = bench.ClosedTree

MeasureProgress = Callable[[int, int, str], None]
VERDICT_WORDS = re.compile(r"\b(PASS|REGRESSED|NO-CHANGE|INCONCLUSIVE)\b")


class LabIntegrityError(OrchardError):
    """The lab's own clones changed behind its back: nothing measured or merged from them can be trusted."""


class BinaryChanged(OrchardError):
    """A binary the judge built no longer matches its recorded hashes: no verdict was taken from it."""

    def __init__(self, role: str, built: BuiltBinary, changed: list[str]) -> None:
        super().__init__(f"judge binary changed: the {role} {built.path} ({a_few(changed)}) differs from "
                         "what the judge built")
        self.role = role
        self.built = built


def check_built(baseline: BuiltBinary, candidate: BuiltBinary) -> None:
    """Both binaries as the judge built them, or `BinaryChanged` naming the one that is not."""
    for role, built in (("baseline", baseline), ("candidate", candidate)):
        changed = files_changed(built)
        if changed:
            raise BinaryChanged(role, built, changed)


def assert_bench_untouched(ws: Workspace, bench_base: str) -> None:
    """Hard rule: the lab's own bench clone is never modified (else nothing it says counts).

    Its head must be `bench_base` and its status clean (no edit, no file its ignores do not cover):
    one status, no diff, since nothing of a change is kept but the names of its files.
    """
    head = ws.bench_vcs.head(ws.bench_dir)
    files = list(dict.fromkeys(ws.bench_vcs.status(ws.bench_dir)))  # a file staged and edited is named once
    if files or head != bench_base:
        raise LabIntegrityError(
            f"the lab's bench clone {ws.bench_dir} differs from {bench_base[:12]} "
            f"({a_few(files) or 'head moved'}): fix it by hand; no verdict was taken"
        )


def external_verdict(ws: Workspace, baseline: Path, candidate: Path, *built: BuiltBinary) -> Verdict:
    """Run the bench's own verdict script under the lock; record its output, map its result.

    A JSON object with a `verdict` key on stdout is taken as it is (metrics
    and gates in orchard's shape are kept); otherwise the last verdict word
    the script printed decides, and no word at all is INCONCLUSIVE. The
    script runs the binaries, so it is confined as measured runs are
    (`confined_script`).
    """
    values = placeholders(ws, ws.reference_target, candidate)
    values["baseline"] = str(baseline)
    command = render_command(ws.config.bench.verdict, values)
    lock = MeasurementLock(f"orchard lab verdict command ({ws.root.name})")
    with lock, held_directory(prefix="orchard-verdict-") as held:
        argv, env = confined_script(ws, command, baseline, candidate, held, *built)
        capture = run(argv, cwd=ws.bench_dir, env=env, timeout_s=STEP_TIMEOUT_S, admitted_chars=1 << 24)
    text = capture.stdout_text
    parsed = last_json_object(text, key="verdict") or {}
    words = VERDICT_WORDS.findall(text)
    said = str(parsed.get("verdict") or (words[-1] if words else VerdictWord.INCONCLUSIVE))
    known = (VerdictWord.PASS, VerdictWord.REGRESSED, VerdictWord.NO_CHANGE, VerdictWord.INCONCLUSIVE)
    outcome = VerdictWord(said) if said in known else VerdictWord.INCONCLUSIVE
    reasons = [str(r) for r in parsed.get("reasons", [])] or [
        f"the bench's verdict command said {outcome}" + ("" if words or parsed else " (it printed no verdict word)")]
    unjudged = None
    if not capture.ok and outcome == VerdictWord.PASS:
        outcome, unjudged = VerdictWord.ERROR, Unjudged.COMMAND_FAILED
        reasons = [f"the verdict command failed ({capture.returncode}) yet printed PASS"]
    return Verdict(
        verdict=outcome, reasons=reasons, baseline=baseline, candidate=candidate,
        metrics=[MetricResult.from_dict(m) for m in parsed.get("metrics", [])],
        gates=[GateResult.from_dict(g) for g in parsed.get("gates", [])],
        seed=parsed.get("seed"), pairs=parsed.get("pairs"), lock_wait_ms=lock.last_wait_ms,
        external=ExternalRun(command, capture.returncode, text[-4000:]), unjudged=unjudged,
    )


def confined_script(ws: Workspace, command: str, baseline: Path, candidate: Path, scratch: Path,
                    *built: BuiltBinary) -> tuple[list[str], dict[str, str]]:
    """The bench's verdict script in a measured run's sandbox (when the lab's workers are sandboxed): fresh HOME
    and TMPDIR, no network, the bench's clone, both binaries (and their build trees) and the absolute paths its
    command names readable, nothing writable but its `{workdir}`-like scratch."""
    named = [Path(word) for word in shlex.split(command) if word.startswith("/") and Path(word).exists()]
    confined = confinement(ws, *built)
    confined = dataclasses.replace(confined, trees=(*confined.trees, baseline.parent, *named))
    argv = confined.wrap(["bash", "-c", command], binary=candidate, suite_dir=ws.bench_dir, root=scratch,
                         results_file=None, loopback=False)
    return argv, confined.env(judge_env(ws.config.lab.pass_env))


def measure(ws: Workspace, baseline: BuiltBinary, candidate: BuiltBinary, *, runs: int | None = None,
            seed: int | None = None, progress: MeasureProgress | None = None) -> Verdict:
    """The bench's verdict of `candidate` against `baseline`, both checked against their build records."""
    check_built(baseline, candidate)
    if ws.config.bench.verdict:
        verdict = external_verdict(ws, baseline.path, candidate.path, baseline, candidate)
    else:
        suite = bench.load_suite(suite_path(ws))
        verdict = bench.run_verdict(suite, baseline.path, candidate.path, runs=runs, seed=seed,
                                    results=ws.results_dir, progress=progress or (lambda *_: None),
                                    confinement=confinement(ws, baseline, candidate),
                                    between_pairs=lambda: check_built(baseline, candidate))
    check_built(baseline, candidate)
    return verdict


def measure_together(ws: Workspace, baseline: BuiltBinary, candidates: list[BuiltBinary],
                     unchanged: Callable[[], None], progress: MeasureProgress | None = None) -> tuple[Verdict, ...]:
    """The suite's verdicts of several candidates against one baseline, in one shared-baseline campaign
    (`judge/gathering.py` checks the binaries, `unchanged`, after each round)."""
    suite = bench.load_suite(suite_path(ws))
    return bench.run_shared_verdicts(suite, baseline.path, [c.path for c in candidates], results=ws.results_dir,
                                     progress=progress or (lambda *_: None),
                                     confinement=confinement(ws, baseline, *candidates),
                                     between_rounds=unchanged).verdicts


def confinement(ws: Workspace, *built: BuiltBinary) -> bench.RunConfinement:
    """How the lab's measured runs are confined: in bubblewrap with the workers' sandbox (its workspace hidden but
    for the judge's checkouts the binaries were built in: a virtualenv's python needs its tree), under the
    workers' limits, and never as orchard's own uid: the trees are opened to the sandbox uid first, whatever
    modes the candidate's build and tests left (`ClosedTree` when one stays closed)."""
    depth = len(Path(ws.config.target.binary).parts)
    trees = [b.path.parents[depth - 1] for b in built if depth and len(b.path.parents) >= depth]
    confined = ws.config.workers.sandbox == SandboxMode.BWRAP
    if confined:
        bench.open_to_sandbox(trees)
    return bench.confine_runs(confined, hide=(ws.root,), trees=trees, limits=ws.config.workers.limits(), owner=False)


def metric_keys(ws: Workspace) -> list[str]:
    """The suite's metric keys (`scenario/metric`) a hypothesis may name; empty without a suite."""
    path = ws.suite(ws.bench_dir)
    return [spec.key for spec in bench.load_suite(path).metrics] if path is not None else []


def gate_names(ws: Workspace) -> list[str]:
    """The suite's gates, checked on every run of every verdict (a verdict records only those that failed)."""
    path = ws.suite(ws.bench_dir)
    return [gate.name for gate in bench.load_suite(path).gates] if path is not None else []


def plausible_bound(ws: Workspace) -> float:
    """The suite's `plausible` factor (the bench's default without a suite)."""
    path = ws.suite(ws.bench_dir)
    return bench.load_suite(path).plausible if path is not None else bench.Suite.plausible


def suite_text(ws: Workspace) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The suite's fixture and scenario commands as text, and every fact its scenarios expect (held-out ones too):
    what the hack review holds a patch against. Empty without a suite."""
    path = ws.suite(ws.bench_dir)
    if path is None:
        return (), ()
    suite = bench.load_suite(path)
    commands = [f.command for f in suite.fixtures] + [s.command for s in suite.scenarios if s.command is not None]
    return (tuple(c if isinstance(c, str) else shlex.join(c) for c in commands),
            tuple(fact for scenario in suite.scenarios for fact in scenario.expect))


def load_suite(path: Path) -> bench.Suite:
    """The suite file at `path`, read whole (the judge's other checks read its scenarios)."""
    return bench.load_suite(path)


def suite_path(ws: Workspace) -> Path:
    suite_path = ws.suite(ws.bench_dir)
    if suite_path is None:
        raise OrchardError("bench.suite is not configured: the lab has nothing to judge with")
    return suite_path


@dataclass(frozen=True)
class Baseline:
    """The lab-start measurement every later delta is anchored to."""

    medians: dict[str, float]  # metrics never measured in the A/A runs have none
    floors: dict[str, float]
    directions: dict[str, Direction]
    calibration: str  # how it was calibrated, for the journal


def calibrate(ws: Workspace, binary: BuiltBinary, progress: MeasureProgress | None = None,
              say: Callable[[str], None] = lambda _: None) -> Baseline:
    """A/A-calibrate the suite on this machine with `binary` and read the baseline from it."""
    suite = bench.load_suite(suite_path(ws))
    say(f"calibrating the verdict (A/A, {suite.calibration_runs} pairs) on this machine")
    check_built(binary, binary)
    cal = bench.calibrate(suite, binary.path, results=ws.results_dir, progress=progress or (lambda *_: None),
                          confinement=confinement(ws, binary))
    check_built(binary, binary)  # changed before the campaign hashed it: it calibrated something else
    return Baseline(
        medians={key: m.median for key, m in cal.metrics.items() if m.median is not None},
        floors={spec.key: spec.floor(cal.metrics[spec.key].noise()) for spec in suite.metrics
                if spec.key in cal.metrics},
        directions={spec.key: spec.direction for spec in suite.metrics},
        calibration=f"{cal.runs} A/A pairs, seed {cal.seed}, machine {cal.machine_fingerprint}",
    )


def opportunities(ws: Workspace) -> tuple[Opportunity, ...]:
    """The largest gaps in the lab's results, ranked by the bench."""
    return rank_opportunities(ws.results_dir).items
