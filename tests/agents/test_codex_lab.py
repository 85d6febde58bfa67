"""Real Codex workers in a whole lab on the demo target, through the scripted Responses endpoint.

Each worker runs the real `codex exec` inside orchard's sandbox (network = "api": the endpoint only),
with the endpoint as a model provider of its own (`base_url`); the script makes each hypothesis's change
through Codex's exec_command tool and writes the report. The decisions are the demo's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agents import clis
from tests.agents.demo_lab import BROKEN, PATCHES, broken_tries, demo_lab, passing_broken, run_lab
from tests.agents.endpoint import ScriptedEndpoint


def codex_launcher(server: ScriptedEndpoint) -> dict[str, object]:
    return {"name": "codex", "model": "scripted", "base_url": f"{server.url}/v1"}


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a whole lab on a shared machine, an ITERATE's child among its experiments
@pytest.mark.parametrize("noise_passes_it", [False, True], ids=["as-measured", "broken-change-passes"])
def test_codex_workers_make_their_changes_and_get_the_demos_decisions(
    tmp_path: Path, endpoint: Callable[..., ScriptedEndpoint], noise_passes_it: bool
) -> None:
    clis.codex()
    server = endpoint("codex-demo.toml", patches=str(PATCHES))
    # a worker each: an ITERATE's child (longest-word-one-pass-r1 ranks above tokenize-regex) cannot push a
    # hypothesis out of the attempted top three before it started
    ws = demo_lab(tmp_path / "lab", {"default": codex_launcher(server)},
                  {"count-with-dict": "", "longest-word-one-pass": "", "tokenize-regex": ""}, workers=3)
    if noise_passes_it:
        passing_broken(ws)
    experiments = run_lab(ws)
    if noise_passes_it:  # the path the assertions below must hold on too: ITERATE, then its child ran
        assert experiments[BROKEN].decision == "ITERATE" and f"{BROKEN}-r1" in experiments, experiments

    decisions = {name: (record.decision, record.reasons) for name, record in experiments.items()}
    assert decisions["count-with-dict"][0] == "LAND", decisions
    assert decisions["tokenize-regex"][0] == "KILL" and "scope" in " ".join(decisions["tokenize-regex"][1]), decisions
    assert set(experiments) == {"count-with-dict", "tokenize-regex", *broken_tries(experiments)}, decisions
    asked = [r for r in server.requests() if r.path == "/v1/responses"]
    # pre-flight's one test request (through the same sandbox and proxy), then the workers'
    assert [r.step for r in asked][:1] == ["test-request"] and [r.step for r in asked].count("test-request") == 1
    assert {r.step for r in asked} == {"test-request", "apply", "build-and-test", "report", "done"}, asked
    first = next(r.asked for r in asked if r.step == "apply")
    assert first is not None and "exec_command" in first.tools and "# Experiment:" in first.prompt
    for name, record in experiments.items():
        usage = record.candidate.usage if record.candidate else None
        log = (ws.logs_dir / f"{record.name}.log").read_text()
        # no update check, no analytics: the egress proxy was asked for the endpoint only (it says each refusal)
        assert "[orchard egress]" not in log, log
        printed = [json.loads(line)["usage"] for line in log.splitlines() if '"turn.completed"' in line]
        assert usage is not None and printed, (name, log)
        assert usage.input_tokens == sum(u["input_tokens"] for u in printed) == 5200 + 5600 + 6100 + 6300
        assert usage.cache_read_tokens == sum(u["cached_input_tokens"] for u in printed)
    assert "via `codex`" in (ws.root / "FINAL_REPORT.md").read_text()
