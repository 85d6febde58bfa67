"""REVIEW.md and each branch's pull-request body: what a person reads before merging a lab's wins one at a time.

One section per review branch: what changed (each win's hypothesis and its
lab note's numbers), the diff stat, its own verdict alone against the
starting main, the gates it passed, and what a reviewer should look at. A
branch that does not apply or no longer wins alone is said so first.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchard.lab.finalize.wins import Win
from orchard.lab.judge.verdict_view import VerdictView, markdown_head, markdown_table, pct, short_commit
from orchard.lab.records.build import CheckName
from orchard.lab.records.review_branches import Review, ReviewBranch, ReviewOutcome
from orchard.lab.text import code, inline, with_code, within

UNCLEAR = ("inconclusive", "regressed")


def _changed(branch: ReviewBranch, wins: Mapping[str, Win]) -> list[str]:
    lines = []
    for name in branch.wins:
        win = wins[name]
        h = win.hypothesis
        lines.append(f"- `{name}`: {inline(h.title)}. {inline(h.change)} (aimed at {code(h.metric)}, predicted "
                     f"{within(h.predicted_text)}; merged in the lab as `{short_commit(win.merge_commit)}`)")
    if len(branch.wins) > 1:
        lines.append(f"- these {len(branch.wins)} wins touch the same files, so they go together, in the order the "
                     "lab merged them (one commit each)")
    return lines


def _gates(branch: ReviewBranch, gates: Sequence[str]) -> list[str]:
    """The judge's checks, then the suite's gates (a verdict records only the gates that failed)."""
    judgment = branch.judgment
    if judgment is None:
        return ["- none: it was not judged"]
    lines = [f"- {c.name}: {'passed' if c.passed else 'FAILED'} ({with_code(c.detail)})" for c in judgment.checks
             if c.detail != "not configured"]
    verdict = judgment.verdict
    if verdict is None:
        return lines
    failed = {g.name: g for g in verdict.gates if not g.passed}
    lines += [f"- gate `{name}`: FAILED ({inline(failed[name].detail)})" if name in failed else
              f"- gate `{name}`: passed on every run" for name in dict.fromkeys([*gates, *failed])]
    return lines


def _look_at(branch: ReviewBranch, wins: Mapping[str, Win]) -> list[str]:
    """What deserves a human eye: the files, flags, rebases, and metrics the verdict did not call improved."""
    lines = [f"- the files: {', '.join(code(f) for f in branch.files)}"]
    tests = [f for f in branch.files if "test" in f.lower()]
    if tests:
        lines.append(f"- it changes test files ({', '.join(code(f) for f in tests)}): check nothing was "
                     "weakened")
    for name in branch.wins:
        win = wins[name]
        lines += [f"- `{name}` was flagged: {inline(c.detail)}" for c in win.judgment.checks
                  if c.name in (CheckName.PLAUSIBLE, CheckName.REVIEW)]
        if win.rebased:
            lines.append(f"- `{name}` was rebased in the lab onto a main that had moved and judged again there")
    verdict = branch.judgment.verdict if branch.judgment else None
    unclear = [f"`{m.key}` {m.verdict} ({pct(m.effect)})" for m in (verdict.metrics if verdict else ())
               if m.verdict in UNCLEAR]
    if unclear:
        lines.append(f"- metrics not improved alone: {', '.join(unclear)}")
    return lines


@dataclass(frozen=True)
class FetchFrom:
    """Where a review branch is taken from: the target once `--push` published it there, else the lab's clone."""

    repo: str
    published: bool

    def take(self, branch: str) -> str:
        """The commands that bring the branch into the user's checkout, run there."""
        where = "" if self.published else (" (from the lab's own clone: `orchard finalize --push` publishes it to "
                                           "the target)")
        return f"`git fetch {shlex.quote(self.repo)} {branch}` then `git merge FETCH_HEAD`{where}"


def section(branch: ReviewBranch, wins: Mapping[str, Win], source: FetchFrom, gates: Sequence[str]) -> list[str]:
    """One branch: its state first, then what changed, its diff stat, its verdict, its gates, what to look at."""
    lines = [f"## `{branch.branch}`", "",
             f"**{branch.outcome}**" + (f": {inline('; '.join(branch.reasons))}" if branch.reasons else ""), ""]
    lines += ["What changed:", "", *_changed(branch, wins), ""]
    if branch.outcome == ReviewOutcome.DOES_NOT_APPLY:
        return lines
    lines += ["Diff stat against the starting main:", "", "```", branch.diff_stat or "(empty)", "```", ""]
    verdict = VerdictView.from_verdict(branch.judgment.verdict if branch.judgment else None)
    if verdict is not None:
        lines += [f"Its own verdict alone against the starting main `{short_commit(branch.start)}` (paired, the "
                  f"lab's suite and calibration): {markdown_head(verdict)}.", "", *markdown_table(verdict), ""]
    lines += ["Gates it passed:", "", *_gates(branch, gates), "", "What a reviewer should look at:", "",
              *_look_at(branch, wins), "",
              f"To take it: {source.take(branch.branch)} (commit "
              f"`{short_commit(branch.commit)}`, on `{short_commit(branch.start)}`).", ""]
    return lines


def _many(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "es" if word.endswith("ch") else "s")


def render_review(review: Review, wins: Sequence[Win], sources: Mapping[str, FetchFrom], main: str,
                  gates: Sequence[str]) -> str:
    """REVIEW.md whole: a summary table, then one section per branch."""
    by_name = {w.name: w for w in wins}
    lines = ["# Review branches", "",
             f"The lab's landed wins as branches on its starting main `{short_commit(review.start)}` (`{main}` when "
             f"the lab started), to merge one at a time. {_many(len(wins), 'win')} in "
             f"{_many(len(review.branches), 'branch')}; wins "
             "whose files overlap share one. Each branch was judged again alone against the starting main.", ""]
    if not review.branches:
        return "\n".join([*lines, "No landed wins: nothing to review."]) + "\n"
    lines += ["| branch | wins | state | verdict alone |", "|---|---|---|---|"]
    for b in review.branches:
        word = b.judgment.verdict.verdict if b.judgment and b.judgment.verdict else "-"
        lines.append(f"| `{b.branch}` | {', '.join(f'`{w}`' for w in b.wins)} | {b.outcome} | {word} |")
    lines.append("")
    for b in review.branches:
        lines += section(b, by_name, sources[b.branch], gates)
    return "\n".join(lines).rstrip() + "\n"


def pull_request_body(branch: ReviewBranch, wins: Sequence[Win], source: FetchFrom, gates: Sequence[str]) -> str:
    """A branch's pull-request body: its REVIEW.md section, with the lab's words for where it came from."""
    body = section(branch, {w.name: w for w in wins}, source, gates)
    body[0] = f"# {inline(wins[0].hypothesis.title) if len(branch.wins) == 1 else branch.branch}"
    return "\n".join([*body, "Made by `orchard finalize` from the lab's landed wins."]).rstrip() + "\n"
