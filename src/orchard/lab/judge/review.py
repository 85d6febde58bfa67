"""The review step: a configured reviewer reads a win before it lands.

Statistics cannot tell a faster program from one that special-cases its
benchmark; a reader of the diff often can. With `[review]` in orchard.toml,
every candidate the hard rules would LAND is first given to a reviewer (any
launcher, the `command` one included, run by the same executor as workers):
a prompt with the hypothesis, the diff and the verdict, and a file to answer
in, `{"decision": "approve" | "reject", "reasons": [...]}`. Anything but a
readable approval (a rejection, no answer, garbage, a reviewer that timed
out) is a rejection with its reason, and the judge KILLs on it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import string
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path

from orchard.lab.config.sections import LauncherConfig
from orchard.lab.judge.measuring import Verdict
from orchard.lab.judge.verdict_view import MetricEffect, cells
from orchard.lab.records.build import Check, CheckName
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.experiment import Commands, Experiment, ExperimentPaths
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.network import Network
from orchard.lab.records.worker import WorkerCheckout
from orchard.lab.workers.executors.subprocess import SubprocessExecutor
from orchard.lab.workers.jobs.job import Job
from orchard.lab.workers.launchers.launcher_base import LaunchContext
from orchard.lab.workers.launchers.launchers import launcher_for, make_launcher
from orchard.lab.workers.workspace.workspace import Workspace

ANSWER, DIFF = "answer.json", "change.diff"
ANSWER_MAX_BYTES = 64 * 1024
DIFF_MAX_CHARS = 200_000  # the prompt shows at most this much of the diff; the file beside it has all of it
REASON_MAX_CHARS = 300


class ReviewDecision(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


@dataclass(frozen=True)
class ReviewAnswer:
    decision: ReviewDecision
    reasons: tuple[str, ...]

    @property
    def approved(self) -> bool:
        return self.decision == ReviewDecision.APPROVE


def configured(ws: Workspace) -> bool:
    return bool(ws.config.review.launcher or ws.config.review.template)


def review_dir(ws: Workspace, experiment: str) -> Path:
    return ws.root / "reviews" / experiment


def _verdict_lines(verdict: Verdict) -> str:
    rows = [" | ".join(cells(MetricEffect.from_metric(m))[:4]) for m in verdict.metrics]
    rows += [f"gate {g.name}: {'passed' if g.passed else 'FAILED'} {g.detail}" for g in verdict.gates]
    return "\n".join(f"- {row}" for row in rows) or "- (no metrics)"


def prompt_text(hypothesis: Hypothesis, candidate: Candidate, verdict: Verdict, checks: list[Check],
                checkout: Path, directory: Path) -> str:
    """The review prompt: the idea, the verdict, the judge's checks and the diff."""
    answer, diff_file = directory / ANSWER, directory / DIFF
    template = resources.files("orchard.lab").joinpath("templates/review.md").read_text(encoding="utf-8")
    diff = candidate.patch if len(candidate.patch) <= DIFF_MAX_CHARS else (
        candidate.patch[:DIFF_MAX_CHARS] + f"\n... (cut; the whole diff is in {diff_file})\n")
    return string.Template(template).substitute(
        experiment=candidate.experiment, title=hypothesis.title, metric=hypothesis.metric, change=hypothesis.change,
        cause=hypothesis.suspected_cause or "(not given)", predicted=hypothesis.predicted_text,
        scope=", ".join(hypothesis.scope) or "(none named)", verdict=verdict.verdict,
        reasons="; ".join(verdict.reasons), table=_verdict_lines(verdict),
        checks="\n".join(f"- {c.name}: {'ok' if c.passed else 'FAILED'} {c.detail}" for c in checks),
        diff=diff, diff_file=diff_file, answer=answer, checkout=checkout)


def read_answer(path: Path) -> ReviewAnswer:
    """The reviewer's answer, opened as a regular file only and size-capped; anything unreadable rejects."""
    def reject(why: str) -> ReviewAnswer:
        return ReviewAnswer(ReviewDecision.REJECT, (f"the reviewer's answer is unreadable: {why}",))

    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return reject("it wrote no answer" if error.errno == errno.ENOENT else
                      "a symlink" if error.errno == errno.ELOOP else error.strerror or str(error))
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return reject("not a regular file")
        raw = os.read(handle, ANSWER_MAX_BYTES + 1)
    finally:
        os.close(handle)
    if len(raw) > ANSWER_MAX_BYTES:
        return reject(f"larger than {ANSWER_MAX_BYTES // 1024} KB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        return reject(f"not JSON ({str(error)[:100]})")
    decision = data.get("decision") if isinstance(data, dict) else None
    reasons = data.get("reasons", []) if isinstance(data, dict) else None
    if decision not in tuple(ReviewDecision):
        return reject(f"'decision' must be \"approve\" or \"reject\", not {str(decision)[:40]!r}")
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        return reject("'reasons' must be a list of strings")
    return ReviewAnswer(ReviewDecision(decision), tuple(r[:REASON_MAX_CHARS] for r in reasons[:10]))


def review(ws: Workspace, experiment: Experiment, candidate: Candidate, verdict: Verdict, checks: list[Check],
           checkout: Path) -> Check:
    """Run the configured reviewer on a win; its answer as the `review` check."""
    directory = review_dir(ws, experiment.name)
    directory.mkdir(parents=True, exist_ok=True)
    answer, prompt, diff_file = directory / ANSWER, directory / "prompt.md", directory / DIFF
    for stale in (answer, directory / "review.log"):
        stale.unlink(missing_ok=True)
    diff_file.write_text(candidate.patch, encoding="utf-8", errors="surrogateescape")
    prompt.write_text(prompt_text(experiment.hypothesis, candidate, verdict, checks, checkout, directory),
                      encoding="utf-8", errors="surrogateescape")
    settings = ws.config.review
    launcher = (launcher_for(ws.config, settings.launcher) if settings.launcher
                else make_launcher(LauncherConfig(name="command", template=settings.template,
                                                network=Network.ALL.value), "review"))
    paths = ExperimentPaths(workspace=ws.root, experiment=experiment.name, target_dir=checkout, bench_dir=directory,
                            binary=None, baseline=None, suite=None, report=answer, prompt_file=prompt,
                            log_file=directory / "review.log")
    context = LaunchContext(experiment, paths, Commands("", "", ""), directory, ws.config.target.vcs,
                            ws.config.workers.sandbox)
    # sandboxed like a worker: it may write only its review directory and read the checkout it reviews
    confinement = launcher.confinement(ws, context, cwd=directory, own=[directory], home=directory / "home",
                                       tmp=directory / "tmp", reads=(checkout,))
    job = Job(name=f"review-{experiment.name}", command=launcher.command(context), cwd=directory,
              log_path=paths.log_file, timeout_s=settings.timeout_minutes * 60.0, sandbox=confinement)
    with SubprocessExecutor() as executor:
        executor.start(job)
        (result,) = executor.wait()
    who = f"reviewer {launcher.label}"
    if result.timed_out:
        return Check(CheckName.REVIEW, False, f"{who} timed out; no approval", str(paths.log_file))
    reading = read_answer(answer)
    said = "; ".join(reading.reasons) or "no reasons given"
    if reading.approved:
        return Check(CheckName.REVIEW, True, f"{who} approved: {said}", str(paths.log_file))
    return Check(CheckName.REVIEW, False, f"{who}: {said}", str(paths.log_file))


def experiment_for(name: str, hypothesis: Hypothesis, candidate: Candidate, ws: Workspace) -> Experiment:
    """What a launcher renders from: judgment `name` (a re-judgment on a moved main has its own)."""
    checkout = WorkerCheckout(ws.worker(candidate.worker), candidate.target_base, candidate.bench_base)
    return Experiment(name, hypothesis, checkout)
