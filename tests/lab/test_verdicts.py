"""The bench's own verdict script, as the lab reads it: its last JSON verdict object decides, else its last word."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from orchard.lab.judge import measuring as verdicts
from orchard.lab.workers.workspace.workspace import Workspace

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


def test_the_verdict_script_runs_confined(make_workspace: Callable[..., Workspace], tmp_path: Path) -> None:
    """It runs the binaries under test (issue 20): like a measured run it writes nothing of yours and sees no
    home, while what its command names (here its output file) stays readable."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    printed, escaped = tmp_path / "verdict-output.txt", tmp_path / "escaped"
    printed.write_text('{"verdict": "NO-CHANGE", "reasons": ["read"]}\n')
    tmp_path.chmod(0o755)
    workspace = make_workspace(f'[workers]\nsandbox = "bwrap"\n[bench]\nverdict = "touch {escaped} ~/.escaped; '
                               f'cat {printed}"\n')
    verdict = verdicts.external_verdict(workspace, Path("/bin/true"), Path("/bin/true"))
    assert verdict.verdict == verdicts.VerdictWord.NO_CHANGE, verdict.reasons
    assert not escaped.exists() and not (Path.home() / ".escaped").exists()
