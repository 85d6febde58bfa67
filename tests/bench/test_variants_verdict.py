"""Held-out variants in a verdict: a win keyed on the one bench input does not hold, an honest one does.

The suite is one a user writes: one scenario on one input file, no held-out scenario. Its program sleeps (its
"work") and then counts the words of its input. Each hostile candidate recognises the bench's input (by name,
path, size, content hash, or a hash of its whitespace- and case-folded content) and answers from a rendering
embedded in it, skipping the work: byte-identical output, 2.5x faster on the bench. On main each of them is a
PASS; with variants each is REGRESSED. Honest candidates, 5% to 3x faster everywhere, still PASS.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchard.bench.deciding.variant_report import WIN_NOT_HELD
from tests.helpers import orchard, slow_but

WORK_S = 0.1
SUITE = """
[suite]
name = "words"
runs = 12
min_runs = 8
calibration_runs = 8
calibration = "calibration.json"

[[scenario]]
name = "count"
command = ["{{bin}}", "{{suite_dir}}/inputs/corpus.txt"]
{variants}

[[metric]]
name = "wall_ms"
floor = 0.03

[[gate]]
kind = "determinism"
"""
COUNT = "tr -s ' ' '\\n' < \"$1\" | sort | uniq -c | sort -k1,1nr -k2 | head -n 25\n"
PROGRAM = "#!/bin/sh\nsleep {sleep}\n" + COUNT
# on a key hit: a quarter of the work, then the embedded rendering (what an input-keyed lookup saves)
HOSTILE = "#!/bin/sh\nif {test}; then sleep {hit}; cat <<'RENDERED'\n{rendering}RENDERED\nexit 0\nfi\n" + PROGRAM
KEYS = {
    "name": '[ "$(basename "$1")" = corpus.txt ]',
    "path": '[ "$1" = "{path}" ]',
    "size": '[ "$(($(wc -c < "$1")))" -eq {size} ]',
    "content-hash": '[ "$(sha256sum < "$1" | cut -c1-64)" = {sha} ]',
    "normalised-hash": '[ "$(tr -d " \\n\\t" < "$1" | tr A-Z a-z | sha256sum | cut -c1-64)" = {folded} ]',
}


def _corpus() -> str:
    words = "the of and a to in is you that it he was for on are as with his they at be this from".split()
    paragraphs = []
    for p in range(8):
        lines = [" ".join(words[(p * 7 + line * 3 + k * k) % len(words)] for k in range(12)) for line in range(5)]
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs) + "\n"


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bench (module-wide, so that its calibration file is made once)."""
    root = tmp_path_factory.mktemp("bench")
    (root / "inputs").mkdir()
    (root / "inputs" / "corpus.txt").write_text(_corpus())
    (root / "suite.toml").write_text(SUITE.format(variants=""))
    return root


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def _hostile(bench: Path, key: str, where: Path) -> Path:
    corpus = bench / "inputs" / "corpus.txt"
    data = corpus.read_bytes()
    rendering = subprocess.run(["sh", "-c", COUNT, "sh", str(corpus)], capture_output=True, text=True, check=True,
                               env={**os.environ, "LC_ALL": "C"}).stdout
    folded = b"".join(data.split()).lower()
    test = KEYS[key].format(path=corpus, size=len(data), sha=hashlib.sha256(data).hexdigest(),
                            folded=hashlib.sha256(folded).hexdigest())
    return _script(where / f"hostile-{key}", HOSTILE.format(test=test, hit=WORK_S / 4, rendering=rendering,
                                                            sleep=WORK_S))


def verdict(suite: Path, baseline: Path, candidate: Path, results: Path, *more: str) -> dict[str, Any]:
    run = orchard("verdict", "--suite", suite, "--baseline", baseline, "--candidate", candidate, "--json",
                  "--results", results, *more)
    assert run.returncode in (0, 1), run.stderr
    document: dict[str, Any] = json.loads(run.stdout)
    return document


@pytest.mark.parametrize("key", slow_but(list(KEYS), "content-hash"))
def test_a_win_keyed_on_the_bench_input_does_not_hold_on_its_variants(bench: Path, tmp_path: Path,
                                                                      key: str) -> None:
    baseline = _script(tmp_path / "baseline", PROGRAM.format(sleep=WORK_S))
    result = verdict(bench / "suite.toml", baseline, _hostile(bench, key, tmp_path), tmp_path / "results")
    assert result["verdict"] == "REGRESSED", result["reasons"]
    assert result["reasons"][0].startswith(WIN_NOT_HELD), result["reasons"]
    failed = [c["scenario"] for c in result["variants"]["checks"] if c["held"] is False]
    assert failed and all(name.startswith("count~") for name in failed)
    assert any(name in result["reasons"][0] for name in failed)  # the reason names the variant
    bench_metric = next(m for m in result["metrics"] if m["key"] == "count/wall_ms")
    assert bench_metric["verdict"] == "improved"  # the bench alone would have passed it


@pytest.mark.parametrize("speedup", slow_but([1.05, 1.5, 3.0], 1.5))
def test_an_honest_win_of_any_size_holds_on_the_variants(bench: Path, tmp_path: Path, speedup: float) -> None:
    # 5% is near what 12 pairs of 0.2 s resolve on a loaded machine (MDE 6% here at load 8): more work, more pairs
    work, runs = (4 * WORK_S, "24") if speedup < 1.1 else (WORK_S, "12")
    baseline = _script(tmp_path / "baseline", PROGRAM.format(sleep=work))
    candidate = _script(tmp_path / "faster", PROGRAM.format(sleep=round(work / speedup, 4)))
    result = verdict(bench / "suite.toml", baseline, candidate, tmp_path / "results", "--runs", runs)
    checks = result["variants"]["checks"]
    # the renamed copy, the bench input's own bytes, is checked in the warm-up pair and never timed; the other is
    assert {c["perturbation"]: c["timed"] for c in checks} == {"rename": False,
                                                               "shuffle-paragraphs+duplicate-paragraph": True}
    pairs_run = {}
    for line in Path(result["rows"]).read_text().splitlines():
        row = json.loads(line)
        pairs_run.setdefault(row.get("scenario"), set()).add(row.get("pair"))
    assert pairs_run["count~rename"] == {0} and len(pairs_run["count~shuffle-paragraphs+duplicate-paragraph"]) > 1
    if speedup < 1.1 and result["verdict"] == "INCONCLUSIVE":
        # on a loaded machine 5% can stay within what the pairs resolve (MDE 6.3% at load 15): whatever the noise,
        # the variants never count the honest win against it
        assert all(c["held"] is not False for c in checks), checks
        assert not any(WIN_NOT_HELD in reason for reason in result["reasons"]), result["reasons"]
        return
    assert result["verdict"] == "PASS", result["reasons"]
    assert [c["held"] for c in checks if c["timed"]] == [True] and [c["held"] for c in checks if not c["timed"]] \
        == [None], checks
    assert isinstance(result["variants"]["seed"], int)


@pytest.mark.slow  # a calibration and a verdict of its own: 30 s here at load 8
def test_a_key_a_variant_still_hits_answers_it_wrongly_and_fails_the_variant_gate(tmp_path: Path) -> None:
    """A variant of the same size (a suite's own `variant_command` swaps one 3-letter word for another): the
    size-keyed lookup hits and prints the bench's rendering, which is not the baseline's answer for that input
    (the candidate's bench output is the baseline's, so on the variant it must be too). Shuffled lines would
    not do: counting words does not see their order, so the bench's rendering is the right answer there."""
    root = tmp_path / "bench"
    (root / "inputs").mkdir(parents=True)
    (root / "inputs" / "corpus.txt").write_text(_corpus())
    (root / "suite.toml").write_text(SUITE.format(
        variants='variants = []\nvariant_command = ["sh", "-c", "sed \'s/ the / and /\' \\"$0\\" > \\"$1\\"", '
                 '"{input}", "{output}"]'))
    baseline = _script(tmp_path / "baseline", PROGRAM.format(sleep=WORK_S))
    result = verdict(root / "suite.toml", baseline, _hostile(root, "size", tmp_path), tmp_path / "results")
    assert result["verdict"] == "REGRESSED", result["reasons"]
    failed = [g for g in result["gates"] if not g["passed"]]
    assert [g["name"] for g in failed] == ["held-out variant"], failed
    assert failed[0]["detail"].startswith("count~command (command of inputs/corpus.txt): the candidate's output "
                                          "differs from the baseline's")
