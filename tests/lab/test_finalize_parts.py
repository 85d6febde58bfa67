"""`orchard finalize`'s parts without a lab: the groups, REVIEW.md for branches that fail, the share of the gain.

The whole path on real labs is tests/lab/test_finalize.py (slow tier).
"""

from __future__ import annotations

import math
import shlex
import subprocess
from pathlib import Path

import pytest

from orchard.lab.finalize.review_file import FetchFrom, render_review
from orchard.lab.finalize.wins import Win, branch_name, groups
from orchard.lab.judge.measuring import Direction
from orchard.lab.notebook.best_single import best_single_lines, composition_share
from orchard.lab.records.build import Check, CheckName
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judgment import Decision, Judgment
from orchard.lab.records.review_branches import BestSingle, Review, ReviewBranch, ReviewOutcome
from tests.lab.lab_helpers import git, make_repo


def win(name: str, *files: str) -> Win:
    return Win(name, Hypothesis(id=name, metric="report/wall_ms", change=f"change {name}", scope=files),
               Judgment(Decision.LAND, ()), files, f"{name:0<40}", None, False)


def test_wins_whose_files_overlap_share_a_group_in_merge_order_even_through_a_third() -> None:
    a, b, c, d = win("a", "x.py"), win("b", "y.py"), win("c", "z.py"), win("d", "x.py", "z.py")
    found = groups([a, b, c, d])  # d joins a and c, which shared nothing before it
    assert [[w.name for w in g] for g in found] == [["a", "c", "d"], ["b"]]
    assert [branch_name("speed", g) for g in found] == ["review/speed/a+2", "review/speed/b"]  # under the lab's name


def test_review_md_reports_a_branch_that_does_not_apply_or_no_longer_wins_alone() -> None:
    start = "s" * 40
    lost = Judgment(Decision.KILL, ("no effect beyond the noise floor: every metric within its noise floor",))
    review = Review(start, (
        ReviewBranch("review/a", ("a",), ("x.py",), start, ("h1",), "", ReviewOutcome.DOES_NOT_APPLY,
                     ("a's change does not apply to the starting main ssssssssssss: error: patch failed",)),
        ReviewBranch("review/b", ("b",), ("y.py",), start, ("h2",), "c" * 40, ReviewOutcome.NO_LONGER_WINS,
                     lost.reasons, lost, " y.py | 2 +-\n 1 file changed")))
    sources = {b.branch: FetchFrom("/repo.git", True) for b in review.branches}
    text = render_review(review, [win("a", "x.py"), win("b", "y.py")], sources, "main", ["recall"])
    assert "| `review/a` | `a` | does not apply | - |" in text
    assert "| `review/b` | `b` | no longer wins alone | - |" in text
    section_a = text.split("## `review/a`")[1].split("## `review/b`")[0]
    assert section_a.lstrip().startswith("**does not apply**: a's change does not apply")
    assert "Diff stat" not in section_a
    section_b = text.split("## `review/b`")[1]
    assert section_b.lstrip().startswith("**no longer wins alone**: no effect beyond the noise floor")
    assert "1 file changed" in section_b and "git fetch /repo.git review/b" in section_b


def test_review_md_without_push_takes_the_branch_from_the_labs_clone_with_commands_that_work(
    tmp_path: Path
) -> None:
    """On main REVIEW.md said `git fetch <target> review/a`, which fails before `--push`, and showed the
    predicted `\\-40%` and the build and test commands with their backticks escaped (`\\`make\\``)."""
    user = make_repo(tmp_path / "my project", {"x.py": "x = 1\n"})
    clone = tmp_path / "lab ws" / "judge" / "target"
    git(tmp_path, "clone", "-q", str(user), str(clone))
    git(clone, "switch", "-q", "-c", "review/a")
    (clone / "x.py").write_text("x = 2\n")
    git(clone, "commit", "-qam", "lab: a")
    start, commit = git(user, "rev-parse", "HEAD").strip(), git(clone, "rev-parse", "HEAD").strip()
    checks = (Check(CheckName.BUILD, True, "`python3 -m venv .venv && .venv/bin/pip install -e .` passed"),
              Check(CheckName.TESTS, False, "`sh tests/check.sh` failed (exit 1): assert `a` == 1 and `b"))
    judged = Judgment(Decision.LAND, (), checks=checks)
    won = Win("a", Hypothesis(id="a", metric="report/wall_ms", change="c", scope=("x.py",), predicted_effect=-0.4),
              judged, ("x.py",), "m" * 40, None, False)
    review = Review(start, (ReviewBranch("review/a", ("a",), ("x.py",), start, ("h1",), commit,
                                         ReviewOutcome.WINS_ALONE, (), judged, " x.py | 2 +-"),))
    text = render_review(review, [won], {"review/a": FetchFrom(str(clone), False)}, "main", [])
    assert "predicted -40%" in text and "\\-" not in text and "\\`" not in text.split("`b")[0]
    assert "- build: passed (`python3 -m venv .venv && .venv/bin/pip install -e .` passed)" in text
    assert "- tests: FAILED (`sh tests/check.sh` failed (exit 1): assert `a` == 1 and \\`b)" in text
    take = next(line for line in text.splitlines() if line.startswith("To take it:"))
    assert "from the lab's own clone: `orchard finalize --push` publishes it" in take
    fetch, merge = (part.split("`")[1] for part in take.split(" then "))
    subprocess.run(fetch, shell=True, cwd=user, check=True, capture_output=True)  # the command as printed works
    git(user, *shlex.split(merge)[1:])
    assert (user / "x.py").read_text() == "x = 2\n"


def test_the_share_the_composition_added_is_taken_on_log_ratios() -> None:
    share = composition_share(-0.50, -0.40, Direction.LOWER)  # the lab halved it, the best win alone took 40% off
    assert share == pytest.approx(1 - math.log(0.6) / math.log(0.5))  # 26%, not the 20% of a plain difference
    assert composition_share(0.30, 0.30, Direction.HIGHER) == pytest.approx(0.0)
    assert composition_share(-0.40, -0.50, Direction.LOWER) < 0  # the best single attempt did better alone
    assert composition_share(0.02, -0.40, Direction.LOWER) is None  # the lab gained nothing: nothing to share
    assert best_single_lines(None, None, "-", None, 0)[-1].startswith("Not measured yet: `orchard finalize`")
    none = best_single_lines(Review("s", (), BestSingle("report/wall_ms", "", None)), None, "-", None, 2)
    assert "No landed win improved the primary metric `report/wall_ms`" in none[-1]
