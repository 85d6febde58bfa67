"""A mixed lab on the demo target: each hypothesis names its launcher, and four kinds of worker share one run.

Claude Code (Anthropic Messages), Codex (Responses) and aider (chat completions), each against a scripted
endpoint of its own and each limited to it (network = "api"), and the `patch` launcher (no model), in one
`orchard run`. The decisions are the demo's own; the journal names the launcher of every experiment and
carries each agent's usage as its CLI printed it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agents import clis
from tests.agents.demo_lab import PATCHES, broken_tries, demo_lab, run_lab
from tests.agents.endpoint import ScriptedEndpoint
from tests.agents.test_aider_lab import aider_launcher
from tests.agents.test_codex_lab import codex_launcher


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a whole lab on a shared machine, an ITERATE's child among its experiments
def test_claude_codex_aider_and_patch_workers_share_one_lab(
    tmp_path: Path, endpoint: Callable[..., ScriptedEndpoint]
) -> None:
    clis.claude(), clis.codex(), clis.aider()
    claude, codex = endpoint("claude-demo.toml"), endpoint("codex-demo.toml", patches=str(PATCHES))
    aider = endpoint("aider-demo.toml")
    launchers = {"claude": {"name": "claude", "base_url": claude.url}, "codex": codex_launcher(codex),
                 "aider": aider_launcher(aider)}  # [launcher] stays the demo's patch launcher
    ws = demo_lab(tmp_path / "lab", launchers, {"count-with-dict": "codex", "terse-report": "",
                                                "top-ten-default": "aider", "longest-word-one-pass": "claude"})
    experiments = run_lab(ws)

    decisions = {name: record.decision for name, record in experiments.items()}
    tried = broken_tries(experiments)  # KILLed, or ITERATEd when noise let its verdict PASS (then its child ran)
    assert decisions == {"count-with-dict": "LAND", "terse-report": "LAND", "top-ten-default": "KILL",
                         **{h: decisions[h] for h in tried}}, {n: r.reasons for n, r in experiments.items()}
    assert "information_recall" in " ".join(experiments["top-ten-default"].reasons)
    worker = [r.step for r in claude.requests() if r.asked is not None and "# Experiment:" in r.asked.prompt]
    # besides pre-flight's test request; one conversation per try
    assert worker == ["read", "edit", "build-and-test", "report", "done"] * len(tried)
    assert "top-ten-default" in [r.step for r in aider.requests()]
    # pre-flight's test request (codex-demo.toml's "test-request" step), then the worker's
    assert {r.step for r in codex.requests()} == {"test-request", "apply", "build-and-test", "report", "done"}
    for name, source in (("count-with-dict", "codex"), ("top-ten-default", "aider"),
                         ("longest-word-one-pass", "claude")):
        candidate = experiments[name].candidate
        assert candidate is not None and candidate.launcher == source and candidate.usage is not None
        assert candidate.usage.input_tokens, (name, candidate.usage)
    claude_usage = experiments["longest-word-one-pass"].candidate.usage  # type: ignore[union-attr]
    assert claude_usage is not None and claude_usage.cost_usd and claude_usage.turns == 5
    journal = (ws.root / "JOURNAL.md").read_text()
    for launcher in ("claude", "codex", "aider", "patch"):
        assert f"launcher `{launcher}`" in journal
