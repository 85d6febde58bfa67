"""The bench's own verdict script, as the lab reads it: its last JSON verdict object decides, else its last word."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchard.lab.judge import measuring as verdicts
from orchard.lab.workers.workspace import Workspace

# A script's output with log lines, an earlier verdict object and a progress object after the answer.
MIXED = """{"progress": 1}
{"verdict": "REGRESSED", "reasons": ["a first, discarded try"]}
measuring: PASS would be a word too
  {"verdict": "NO-CHANGE", "reasons": ["within the noise floor"], "seed": 7, "pairs": 12}
{"progress": 2}
"""


def _verdict_of(output: str, make_workspace: Callable[..., Workspace], tmp_path: Path) -> verdicts.Verdict:
    printed = tmp_path / "verdict-output.txt"
    printed.write_text(output)
    workspace = make_workspace(f'[bench]\nverdict = "cat {printed}"\n')
    return verdicts.external_verdict(workspace, Path("/bin/true"), Path("/bin/true"))


def test_the_last_json_object_with_a_verdict_decides(make_workspace: Callable[..., Workspace], tmp_path: Path) -> None:
    verdict = _verdict_of(MIXED, make_workspace, tmp_path)
    assert verdict.verdict == verdicts.VerdictWord.NO_CHANGE
    assert verdict.reasons == ["within the noise floor"]
    assert (verdict.seed, verdict.pairs) == (7, 12)


def test_without_a_json_verdict_the_last_word_decides(make_workspace: Callable[..., Workspace], tmp_path: Path) -> None:
    verdict = _verdict_of('{"progress": 1}\nPASS at first, then REGRESSED\n', make_workspace, tmp_path)
    assert verdict.verdict == verdicts.VerdictWord.REGRESSED
    assert verdict.reasons == ["the bench's verdict command said REGRESSED"]
