"""Held-out variants, made: what each perturbation changes, where variants are written, what a suite may declare."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from orchard.bench.deciding.variant_report import VariantCheck, VariantReport
from orchard.bench.deciding.verdict import Verdict, VerdictWord
from orchard.bench.held_out.variants import make_variants, with_variants
from orchard.bench.measuring.measure import workbench
from orchard.bench.suites import perturbations
from orchard.bench.suites.suite_reader import load_suite
from orchard.errors import UsageError
from orchard.lab.judge.verdict_view import VerdictView, markdown_table

TEXT = b"# Title\n\nfirst paragraph\nof two lines\n\nSecond one.\n\n- a list\n- of items\n"
SUITE = """
[suite]
name = "v"

[[fixture]]
name = "made"
command = ["sh", "-c", "printf 'made here\\\\nsecond line\\\\n' > {{dir}}/made.txt"]

[[scenario]]
name = "doc"
command = ["{{bin}}", "--flag", "{{suite_dir}}/inputs/doc.md", "{{suite_dir}}/tool.sh"]
{extra}

[[scenario]]
name = "made"
command = ["{{bin}}", "{{fixture.made}}/made.txt"]

[[scenario]]
name = "bare"
command = ["{{bin}}", "--version"]

[[gate]]
kind = "determinism"
scenarios = ["doc"]
"""


def _folded(data: bytes) -> str:
    return hashlib.sha256(b"".join(data.split()).lower()).hexdigest()


def test_the_default_text_variants_change_every_key_a_lookup_could_use_and_rename_keeps_the_bytes() -> None:
    assert perturbations.defaults(TEXT) == perturbations.DEFAULT_TEXT
    rename, content = (perturbations.perturb(name, TEXT, random.Random(seed)) for seed, name in
                       enumerate(perturbations.DEFAULT_TEXT))
    assert rename == TEXT
    assert len(content) != len(TEXT) and _folded(content) != _folded(TEXT)
    assert content.splitlines()[0] != TEXT.splitlines()[0] or content[:40] != TEXT[:40]
    assert sorted(set(content.splitlines())) == sorted(set(TEXT.splitlines()))  # the same kind of text
    for seed in range(20):  # whatever the seed: never the input itself
        assert perturbations.perturb("shuffle-paragraphs", TEXT, random.Random(seed)) != TEXT


def test_a_binary_input_gets_rename_only_and_one_line_cannot_be_shuffled() -> None:
    assert perturbations.defaults(b"\x89PNG\r\n\x1a\n\0\0") == (perturbations.RENAME,)
    assert perturbations.perturb("shuffle-lines", b"one line\n", random.Random(1)) == b"one line\n"
    assert perturbations.perturb("append-newline", b"x", random.Random(1)) == b"x\n"
    assert perturbations.perturb("drop-paragraph", TEXT, random.Random(3)) != TEXT


def _bench(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "doc.md").write_bytes(TEXT)
    (tmp_path / "tool.sh").write_text("#!/bin/sh\n")
    (tmp_path / "tool.sh").chmod(0o755)
    (tmp_path / "suite.toml").write_text(SUITE.format(extra=extra))
    return tmp_path / "suite.toml"


def test_variants_are_made_of_each_input_file_outside_the_bench_and_the_bare_scenario_is_said(
        tmp_path: Path) -> None:
    suite = load_suite(_bench(tmp_path))
    with workbench(suite) as bench:
        variants, notes = make_variants(bench, 7)
        again = [v.scenario.command for v in make_variants(bench, 8)[0]]
        names = {v.name: v for v in variants}
        assert set(names) == {"doc~rename", "doc~shuffle-paragraphs+duplicate-paragraph", "made~rename",
                              "made~shuffle-paragraphs+duplicate-paragraph"}
        renamed = Path(names["doc~rename"].scenario.command[2])  # type: ignore[index]
        assert renamed.read_bytes() == TEXT and renamed.name != "doc.md" and renamed.suffix == ".md"
        assert not renamed.is_relative_to(tmp_path) and renamed.parent.parent.parent == bench.root / "fixtures"
        assert names["doc~rename"].scenario.command[3] == "{suite_dir}/tool.sh"  # type: ignore[index]
        assert names["doc~rename"].source == "inputs/doc.md"
        assert names["made~rename"].source == "{fixture.made}/made.txt"
        assert again != [v.scenario.command for v in variants]  # another seed, other names
        assert notes == ["bare: its command names no input file, so no variant could be made"]
        expanded = with_variants(suite, variants)
        assert expanded.gates[0].scenarios == ("doc", "doc~rename", "doc~shuffle-paragraphs+duplicate-paragraph")
        assert expanded.metrics == suite.metrics


def test_a_scenario_chooses_its_perturbations_and_a_command_writes_one_more(tmp_path: Path) -> None:
    extra = ('variants = ["append-newline", "drop-paragraph+shuffle-lines"]\n'
             'variant_command = ["sh", "-c", "tac $0 > $1", "{input}", "{output}"]')
    suite = load_suite(_bench(tmp_path, extra))
    with workbench(suite) as bench:
        variants = [v for v in make_variants(bench, 1)[0] if v.origin == "doc"]
    assert [v.perturbation for v in variants] == ["append-newline", "drop-paragraph+shuffle-lines", "command"]


@pytest.mark.parametrize(("extra", "message"), [
    ('variants = ["rename", "shufle-lines"]', "'variants': unknown perturbation 'shufle-lines'; known: rename"),
    ('variants = ["rename+nope"]', "unknown perturbation 'nope'"),
    ('variant_command = ["gen", "{inptu}", "{output}"]', "'variant_command': unknown placeholder {inptu}"),
])
def test_a_bad_variants_key_is_refused_naming_it(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(UsageError, match="\\[\\[scenario\\]\\] 'doc'") as error:
        load_suite(_bench(tmp_path, extra))
    assert message in str(error.value)


def test_the_verdict_document_and_the_journal_say_which_variants_ran_or_why_none_could() -> None:
    report = VariantReport(42, (VariantCheck("doc~rename", "doc", "rename", "inputs/doc.md", False,
                                             "wall_ms -40.0% on the bench, +0.5% [-1.0%, +2.0%] here"),))
    verdict = Verdict(VerdictWord.REGRESSED, ["x"], Path("a"), Path("b"), variants=report)
    assert Verdict.from_dict(verdict.to_dict()).variants == report
    none = Verdict(VerdictWord.PASS, [], Path("a"), Path("b"),
                   variants=VariantReport(9, notes=("bare: its command names no input file, so no variant could "
                                                    "be made",)))
    journal = "\n".join(markdown_table(VerdictView.from_verdict(none)))
    assert "held-out variants (seed 9): none could be made: bare: its command names no input file" in journal
    assert "the win does not hold on inputs the worker never saw: doc~rename" in report.line()
