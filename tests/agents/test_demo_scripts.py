"""The demo's scripts answer an ITERATE child of longest-word-one-pass as they answer it (issue 35, item 5).

Its change breaks a unit test; when noise lets its ~2% effect PASS, the ladder ITERATEs it ("a measured win, but
tests failed") and the lab runs its child, `longest-word-one-pass-r1` (`backlog.sharpen`), whose prompt starts
`# Experiment: longest-word-one-pass-r1`. A script that left the child unanswered would turn that noise into a
red lab test. Each conversation is played on the real worker template, to its last turn (a reply with no tool).
"""

from __future__ import annotations

import string
from importlib import resources

import pytest

from tests.agents.endpoint import SCRIPTS
from tests.agents.endpoint.exchange import Asked, Reply
from tests.agents.endpoint.script import VALUE_PREFIX, Script

PATHS = {"target_dir": "/lab/worker-a/target", "bench_dir": "/lab/worker-a/bench",
         "binary": "/lab/worker-a/target/build/wordfreq", "report": "/lab/worker-a/.orchard-report.json"}
RESULT = "M wordfreq/stats.py\nby_length\nexit=1\nwritten"  # every mark the scripts wait for in a tool's result


def prompt(experiment: str) -> str:
    template = resources.files("orchard.lab").joinpath("templates/worker.md").read_text(encoding="utf-8")
    return string.Template(template).safe_substitute(experiment=experiment, **PATHS)


def conversation(script: Script, experiment: str, wire: str) -> list[tuple[str | None, Reply]]:
    """Each turn's step and reply, until a reply calls no tool (the CLI's last turn)."""
    said: list[tuple[str | None, Reply]] = []
    for turn in range(1, 10):
        asked = Asked(wire=wire, model="scripted", stream=False, system="", prompt=prompt(experiment),
                      tool_result=None if turn == 1 else RESULT, turn=turn, tools=())
        step, _, reply = script.answer(asked)
        said.append((step, reply))
        if not reply.tools:
            break
    return said


@pytest.mark.parametrize(("script", "wire"), [("claude-demo.toml", "anthropic"),
                                              ("claude-demo-three.toml", "anthropic"),
                                              ("codex-demo.toml", "responses")])
def test_the_broken_hypothesis_and_its_iterate_children_get_the_same_steps(
        script: str, wire: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{VALUE_PREFIX}patches", "/demo/patches")
    loaded = Script.load(SCRIPTS / script)
    parent = [(step, repr(reply)) for step, reply in conversation(loaded, "longest-word-one-pass", wire)]
    assert len(parent) >= 3 and None not in [step for step, _ in parent], parent
    for child in ("longest-word-one-pass-r1", "longest-word-one-pass-r2"):
        said = conversation(loaded, child, wire)
        assert all(reply.status == 200 for _, reply in said), said  # every value its replies name was captured
        # the same steps and replies, but for the child's own name (its report); codex applies the parent's patch
        assert [(step, repr(reply).replace(child, "longest-word-one-pass")) for step, reply in said] == parent
