"""Near-duplicates refused (issue 34, item 3): a new hypothesis that repeats an open or KILLed idea is not added.

On main a planner's hypothesis that said again what a killed one said, in other words, was added and spent a
worker again; so was one a person re-added. Here a hypothesis with the same scope set and a change whose
normalised words have a token-set Jaccard index of at least 0.8 with an earlier one's is refused, the reason
naming the earlier one: `orchard backlog add` adds the rest (exit 2 only when nothing is left to add), a plan
keeps the rest and journals what it refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchard.cli import cli
from orchard.lab.db.state import LabState
from orchard.lab.loop.near_duplicates import SIMILAR, similarity, sorted_out, words
from orchard.lab.records.events import BacklogChanged
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import ALPHA_TARGET, STDOUT_SUITE, TARGET_FILES, lab_config, make_repo, one_worker
from tests.lab.loop_support import snapshot
from tests.lab.test_planner import configure, hypothesis_toml

KILLED = Hypothesis(id="parse-fast", metric="out/stdout_bytes", change="cache the parsed header in parse.c",
                    scope=("src/parse.c",))


def _workspace(tmp_path: Path) -> Workspace:
    target = make_repo(tmp_path / "myproject", TARGET_FILES)
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(lab_config(target=ALPHA_TARGET, workers=one_worker(sandbox="none")))
    ws = init_workspace(tmp_path / "ws", str(target), None, tmp_path / "orchard.toml")
    state = LabState.open(ws.root)
    try:
        state.add_hypothesis(KILLED, source="user")
        state.update_hypothesis(KILLED.id, status=HypothesisStatus.KILLED)
    finally:
        state.close()
    return ws


def _entry(hypothesis_id: str, change: str, scope: str) -> str:
    return (f'[[hypothesis]]\nid = "{hypothesis_id}"\nmetric = "out/stdout_bytes"\nchange = "{change}"\n'
            f'scope = ["{scope}"]\n\n')


def _add(ws: Workspace, path: Path) -> Result:
    return CliRunner().invoke(cli, ["backlog", "add", str(ws.root), "--file", str(path)])


def test_backlog_add_refuses_the_near_duplicates_naming_the_earlier_one_and_adds_the_rest(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (tmp_path / "new.toml").write_text(
        _entry("parse-again", "Cache the parsed header in parse.c!", "src/parse.c/")  # same words, same scope
        + _entry("parse-other-file", "cache the parsed header in parse.c", "src/other.c")  # another scope
        + _entry("parse-unroll", "unroll the tokenizer loop in parse.c", "src/parse.c")  # another change
        + _entry("parse-unroll-too", "unroll the tokenizer loop in parse.c too", "src/parse.c"))  # 7/8 alike
    result = _add(ws, tmp_path / "new.toml")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[1] for line in lines if line.startswith("added ")] == ["parse-other-file", "parse-unroll"]
    assert lines[-2:] == [
        "parse-again: refused, a near-duplicate of parse-fast (killed): the same scope and 100% of the change's "
        "words alike (at least 80%)",
        "parse-unroll-too: refused, a near-duplicate of parse-unroll (in the same batch): the same scope and 88% "
        "of the change's words alike (at least 80%)"]
    state = LabState.open_readonly(ws.root)
    try:
        assert sorted(r.id for r in state.hypotheses()) == ["parse-fast", "parse-other-file", "parse-unroll"]
    finally:
        state.close()


def test_backlog_add_with_nothing_but_near_duplicates_adds_nothing_and_exits_2(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    before = snapshot(ws.root)
    result = CliRunner().invoke(cli, ["backlog", "add", str(ws.root), "--metric", "out/stdout_bytes", "--change",
                                      "cache the parsed header, in parse.c", "--scope", "src/parse.c"])
    assert result.exit_code == 2, result.output
    assert "nothing was added: cache-the-parsed-header-in-parse-c: refused, a near-duplicate of parse-fast " \
        "(killed)" in result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert snapshot(ws.root) == before


@pytest.mark.parametrize(("change", "refused"), [
    ("cache the parsed header in parse.c now", True),  # 7 words of 8 alike
    ("cache the parsed header in parse.c now please", False),  # 7 of 9: 0.78 < 0.8
    ("keep the header", False),
])
def test_a_change_is_a_near_duplicate_at_a_jaccard_index_of_at_least_0_8(
    tmp_path: Path, change: str, refused: bool
) -> None:
    state = LabState.open(tmp_path)
    try:
        state.add_hypothesis(KILLED, source="user")
        new = Hypothesis(id="new", metric="out/stdout_bytes", change=change, scope=("src/parse.c",))
        kept, found = sorted_out(state, [new])
        alike = similarity(words(change), words(KILLED.change))
        assert (alike >= SIMILAR) == refused == bool(found) == (not kept)
    finally:
        state.close()


def test_a_plan_keeps_its_new_hypotheses_and_journals_the_near_duplicate_it_refused(tmp_path: Path) -> None:
    answer = tmp_path / "answer.toml"
    ws = configure(tmp_path, answer)
    state = LabState.open(ws.root)
    try:
        state.add_hypothesis(Hypothesis(id="queued", metric="report/wall_ms", change="rewrite alpha-cache",
                                        scope=("src/alpha-cache.py",)), source="user")
    finally:
        state.close()
    answer.write_text("".join(hypothesis_toml(i) for i in ("alpha-cache", "beta-batch", "gamma-lazy")))
    result = CliRunner().invoke(cli, ["plan", str(ws.root)])
    assert result.exit_code == 0, result.output
    assert "added beta-batch" in result.output and "added alpha-cache" not in result.output
    assert "alpha-cache: refused, a near-duplicate of queued (open)" in result.output
    state = LabState.open_readonly(ws.root)
    try:
        event = state.events_of(BacklogChanged)[-1].event
        assert event.added == ("beta-batch", "gamma-lazy")
        assert event.refused is not None and event.refused[0].startswith("alpha-cache: refused")
    finally:
        state.close()
