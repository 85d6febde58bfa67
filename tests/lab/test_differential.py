"""The differential check: before a win lands, baseline and candidate run on inputs beyond the bench (the bench's
input, inputs made from it, the declared corpus, the target's own test inputs and docs) and must agree.

Real parts: the tool-and-bench lab of test_anti_gaming (a shell-script target, its suite, bubblewrap where it
works), the judge's own baseline build, the check's confined runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.judge import differential
from orchard.lab.records.judgment import Decision, Rule
from orchard.lab.workers.workspace.builds import baseline_binary, hash_build
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import make_repo
from tests.lab.test_anti_gaming import HONEST, SECRET, SUITE, TEST, TOOL, VISIBLE, judged, patch_of, workspace

# Right on one-line inputs (the bench's), wrong on longer ones: the first line only.
FIRST_LINE = '#!/bin/sh\nif [ "$(wc -l < "$1")" -le 1 ]; then cat "$1"; else head -n 1 "$1"; fi\n'
# Right everywhere but on a document that mentions "omega": the bench never shows one.
NO_OMEGA = '#!/bin/sh\ngrep -q omega "$1" && { echo skipped; exit 0; }; cat "$1"\n'
SAME = '#!/bin/sh\nexec cat -- "$1"\n'  # another way to print the same


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path]:
    target = make_repo(tmp_path / "target", {"tool.sh": TOOL, "tests/test_tool.py": TEST,
                                             "tests/data.txt": "word word\n", "docs/guide.txt": "a guide\n"})
    bench = make_repo(tmp_path / "bench", {"suite.toml": SUITE, "fixtures/visible.txt": VISIBLE,
                                           "fixtures/hidden/secret.txt": SECRET, ".gitignore": "results/\n",
                                           "more/omega.txt": "omega\n"})
    return target, bench


def _compare(ws: Workspace, tmp_path: Path, script: str, *, stdout: bool = True) -> differential.Differential:
    """The check of `script` as the candidate tool against the judge's baseline built from the lab's base."""
    state = LabState.open(ws.root)
    try:
        base = ws.target_base()
        baseline = baseline_binary(ws, state, base)
    finally:
        state.close()
    binary = tmp_path / f"candidate-{len(list(tmp_path.glob('candidate-*')))}" / "tool.sh"
    binary.parent.mkdir()
    binary.write_text(script)
    binary.chmod(0o755)
    scratch = tmp_path / f"scratch-{binary.parent.name}"
    scratch.mkdir()
    return differential.compare(ws, (baseline, hash_build(binary)), base, scratch, stdout=stdout)


def test_a_change_wrong_only_beyond_the_bench_is_named_by_its_first_differing_input(
        tmp_path: Path, repos: tuple[Path, Path]) -> None:
    found = _compare(workspace(tmp_path, repos), tmp_path, FIRST_LINE)
    assert found.differs is not None and found.compared == 1, found  # the bench's own input agrees
    assert found.detail.startswith("differs from the baseline on visible.txt twice (visible): stdout differs at byte "
                                   f"{len(VISIBLE):,}"), found.detail
    assert not found.check().passed


def test_the_same_output_by_other_means_agrees_on_every_input(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    found = _compare(workspace(tmp_path, repos), tmp_path, SAME)
    # the bench's input, it twice, and the target's own tests/data.txt and docs/guide.txt (.txt like the input)
    assert found.differs is None and found.compared == 4, found
    assert found.detail == "same output and exit status as the baseline on 4 input(s) beyond the bench", found.detail
    assert found.check().passed


def test_the_declared_corpus_of_the_target_or_the_bench_is_run(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos, bench={"suite": "suite.toml", "corpus": ["bench:more/*.txt"]})
    found = _compare(ws, tmp_path, NO_OMEGA)
    assert found.differs is not None and found.differs.startswith("bench:more/omega.txt (visible): stdout differs"), \
        found


def test_the_bounds_leave_inputs_out_and_say_so(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos, bench={"suite": "suite.toml", "corpus_inputs": 1})
    found = _compare(ws, tmp_path, FIRST_LINE)
    assert found.differs is None and found.compared == 1, found  # only the bench's own input was run
    assert "left out visible.txt twice and later inputs ([bench] corpus_inputs)" in found.detail


def test_a_hypothesis_on_the_outputs_size_compares_the_exit_status_only(
        tmp_path: Path, repos: tuple[Path, Path]) -> None:
    assert differential.output_may_change("visible/stdout_bytes")
    assert differential.output_may_change("report/estimated_total_tokens")
    assert not differential.output_may_change("report/wall_ms")
    assert differential.output_may_change("")  # judged outside an experiment: its aim unknown
    ws = workspace(tmp_path, repos)
    found = _compare(ws, tmp_path, HONEST, stdout=False)
    assert found.differs is None and "exit status (the hypothesis changes output)" in found.detail
    failing = _compare(ws, tmp_path, '#!/bin/sh\ncat "$1"; exit 3\n', stdout=False)
    assert failing.differs is not None and "exit status 3, the baseline's 0" in failing.differs


def test_a_suite_whose_inputs_are_all_made_by_fixtures_has_no_corpus_and_the_journal_says_so(
        tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    made = SUITE.replace('"{suite_dir}/fixtures/visible.txt"', '"{fixture.made}/input.txt"')
    fixture = '[[fixture]]\nname = "made"\ncommand = ["cp", "{suite_dir}/fixtures/visible.txt", "{dir}/input.txt"]\n'
    (ws.bench_dir / "suite.toml").write_text(made + fixture)
    found = _compare(ws, tmp_path, FIRST_LINE)
    assert found.compared == 0 and found.differs is None
    assert found.detail == "no corpus: no input beyond the bench was run; scenario visible names no input file " \
                           "of the bench"


def test_a_win_that_changes_output_on_a_speed_hypothesis_is_killed_and_an_output_win_lands(
        tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    patch = patch_of(repos[0], tmp_path, {"tool.sh": HONEST})
    killed = judged(ws, "speed", patch, metric="visible/wall_ms")
    assert killed.decision == Decision.KILL and killed.rule == Rule.DIFFERENTIAL, killed.reasons
    assert killed.reasons[0].startswith("differs from the baseline on the bench's visible.txt (visible): stdout "
                                        "differs at byte 12 (13 bytes, the baseline's 1,201)"), killed.reasons
    landed = judged(ws, "smaller", patch)
    assert landed.decision == Decision.LAND, landed.reasons
    assert "beyond the bench: same exit status (the hypothesis changes output) as the baseline on 4 input(s) " \
           "beyond the bench" in landed.reasons
