"""`orchard plan` with a stand-in planning agent behind the `command` launcher.

The stand-in (planner_standin.py) reads the real planning prompt, finds the
output path it names and writes a prepared answer there; orchard validates
the answer before anything enters the backlog.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchard.cli import cli
from orchard.demo.make import make_demo
from orchard.lab.db.state import LabState
from orchard.lab.records.events import BacklogChanged
from orchard.lab.records.judgment import Decision, JudgmentEntry
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import BENCH_FILES, TARGET_FILES, make_repo
from tests.lab.loop_support import add_hypotheses, snapshot
from tests.lab.test_backlog import write_lane_rows

STANDIN = Path(__file__).with_name("planner_standin.py")


def hypothesis_toml(id: str, **fields: object) -> str:
    values = {"title": f"Try {id}", "metric": "report/wall_ms", "suspected_cause": f"src/{id}.py: slow loop",
              "change": f"rewrite {id}", "predicted_effect": -0.1, "scope": [f"src/{id}.py"], "impact": 3,
              "confidence": 0.5, "effort": 1, **fields}
    lines = ["[[hypothesis]]", f'id = "{id}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in values.items() if value is not None]
    return "\n".join(lines) + "\n\n"


THREE = "".join(hypothesis_toml(i) for i in ("alpha-cache", "beta-batch", "gamma-lazy"))


def configure(root: Path, answer: Path) -> Workspace:
    """A workspace in `root` whose launcher is the stand-in planner handing back `answer`."""
    template = f"{sys.executable} {STANDIN} {{prompt_file}} {answer}"
    config = root / "planner.toml"
    # sandbox_read: the sandboxed planner may read the stand-in and its prepared answer (wherever the
    # repository and the test's tmp dir are: under /tmp or a home, both hidden)
    config.write_text(f'[launcher]\nname = "command"\ntemplate = "{template}"\n'
                      f'[workers]\nexecutor = "subprocess"\nsandbox_read = ["{answer}", "{STANDIN}"]\n')
    target, bench = make_repo(root / "target-repo", TARGET_FILES), make_repo(root / "bench-repo", BENCH_FILES)
    return init_workspace(root / "ws", str(target), str(bench), config)


@pytest.fixture
def planner(tmp_path: Path) -> tuple[Workspace, Path]:
    answer = tmp_path / "answer.toml"
    return configure(tmp_path, answer), answer


@pytest.fixture(scope="module")
def rejecting(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, Path]:
    """One planner workspace for every rejected answer (each test checks that nothing changed)."""
    root = tmp_path_factory.mktemp("rejecting")
    ws = configure(root, root / "answer.toml")
    state = LabState.open(ws.root)
    try:
        add_hypotheses(state, {"id": "queued", "scope": ["src/gamma.txt"]})
    finally:
        state.close()
    return ws, root / "answer.toml"


def plan(ws: Workspace) -> Result:
    return CliRunner().invoke(cli, ["plan", str(ws.root)])


def test_a_good_answer_adds_its_hypotheses_from_the_planner(planner: tuple[Workspace, Path]) -> None:
    ws, answer = planner
    answer.write_text(THREE)
    result = plan(ws)
    assert result.exit_code == 0, result.output
    for id in ("alpha-cache", "beta-batch", "gamma-lazy"):
        assert f"added {id} (score 1.50): Try {id}" in result.output
    state = LabState.open(ws.root)
    try:
        added = {r.id: r for r in state.hypotheses()}
        assert sorted(added) == ["alpha-cache", "beta-batch", "gamma-lazy"]
        assert {r.source for r in added.values()} == {"planner"} and {r.status for r in added.values()} == {"open"}
        assert added["beta-batch"].hypothesis.scope == ("src/beta-batch.py",)
        assert added["beta-batch"].hypothesis.suspected_cause == "src/beta-batch.py: slow loop"
        event = state.events_of(BacklogChanged)[-1].event
        assert event.planner and event.planner.startswith("plan-")
        assert event.added == ("alpha-cache", "beta-batch", "gamma-lazy")
    finally:
        state.close()
    assert "`gamma-lazy`" in (ws.root / "backlog.md").read_text()
    # the answer of a second plan is read from its own file, and six is still accepted
    answer.write_text("".join(hypothesis_toml(f"more-{n}") for n in range(6)))
    again = plan(ws)
    assert again.exit_code == 0, again.output
    assert again.output.count("added more-") == 6
    # a planner that answers nothing is not credited with an earlier plan's file
    answer.unlink()
    silent = plan(ws)
    assert silent.exit_code == 1 and "the planner wrote no hypotheses file at" in silent.output


def test_the_prompt_gives_the_planner_what_the_lab_knows(planner: tuple[Workspace, Path]) -> None:
    ws, answer = planner
    write_lane_rows(ws.results_dir)  # oak pays more tool calls and tokens than git
    state = LabState.open(ws.root)
    try:
        add_hypotheses(state, {"id": "already-queued", "scope": ["src/beta.txt"], "title": "Queued before planning"})
        state.log(JudgmentEntry("old-idea", "An earlier idea", Decision.KILL,
                                ("no effect beyond the noise floor: every metric within its noise floor",)),
                  "old-idea")
    finally:
        state.close()
    answer.write_text(THREE)
    assert plan(ws).exit_code == 0
    [prompt_file] = sorted(ws.prompts_dir.glob("plan-*.md"))
    prompt = prompt_file.read_text()
    sections = ["## Where the costs are (opportunities, largest gap first)", "## Leaderboard", "## Backlog so far",
                "## Journal so far (latest part)", "## The program's files"]
    positions = [prompt.index(section) for section in sections]
    assert positions == sorted(positions)
    assert "{{" not in prompt and "}}" not in prompt
    # the planner answers in its private home (its sandbox can write nowhere else); orchard keeps a copy
    written = ws.worker("planner").home_dir / f"{prompt_file.stem}.toml"
    assert "between 3 and 6 hypotheses to `" + str(written) + "`" in prompt
    opportunities = prompt[positions[0]:positions[1]]
    assert "task_loop/task_loop.total tool_call_count: oak 18" in opportunities and "vs git 14" in opportunities
    assert "`already-queued`" in prompt[positions[2]:positions[3]]
    journal = prompt[positions[3]:positions[4]]
    assert "**KILL** · hypothesis `old-idea`" in journal and "every metric within its noise floor" in journal
    layout = prompt[positions[4]:]
    for path in ("README", "src/alpha.txt", "src/beta.txt", "tests/check.sh"):
        assert f"\n{path}\n" in layout
    assert ".git/" not in layout
    assert '[[hypothesis]]\nid = "faster-tokenizer"' in prompt  # the documented format, verbatim


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (THREE.replace('effort = 1\n', 'effort = \n', 1), "invalid TOML"),
        (THREE.replace('effort = 1\n', 'effort = 1\nsurety = "high"\n', 1), "#1.surety: unknown field"),
        (hypothesis_toml("only-one") + hypothesis_toml("only-two"), "expected 3-6 hypotheses, got 2"),
        ("".join(hypothesis_toml(f"many-{n}") for n in range(7)), "expected 3-6 hypotheses, got 7"),
        (THREE + hypothesis_toml("anywhere", scope=None), "anywhere: no scope (name the files it may touch)"),
        (THREE + hypothesis_toml("no-idea-why", suspected_cause=None), "no-idea-why: no suspected cause"),
        (THREE + hypothesis_toml("queued"), "queued: already in the backlog"),
        (THREE + hypothesis_toml("Bad Id"), "must be lower-case letters"),
        ("# exit 3\n" + THREE, "the planner ended with exit 3"),
        (None, "the planner wrote no hypotheses file at"),
    ],
)
def test_a_malformed_answer_is_rejected_whole_and_nothing_is_added(
    rejecting: tuple[Workspace, Path], answer: str | None, problem: str
) -> None:
    ws, answer_file = rejecting
    answer_file.unlink(missing_ok=True)
    if answer is not None:
        answer_file.write_text(answer)
    before = snapshot(ws.root)
    result = plan(ws)
    assert result.exit_code == 1, result.output
    message = result.output.strip().splitlines()[-1]
    assert message.startswith("orchard: the planner") and problem in message, result.output
    assert "Traceback" not in result.output
    assert snapshot(ws.root) == before


def test_the_patch_launcher_refuses_to_plan(tmp_path: Path) -> None:
    ws = make_demo(tmp_path / "demo", only=["count-with-dict"])
    before = snapshot(ws.root)
    result = plan(ws)
    assert result.exit_code == 2
    assert result.output.strip() == ("orchard: error: the patch launcher has no model to plan with: "
                                     "add hypotheses with `orchard backlog add`")
    assert snapshot(ws.root) == before
    assert not (ws.root / "worker-planner").exists()
