"""A placeholder typo in a suite stops it when it loads, naming the typo and the placeholders that exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchard.bench.suites.suite_reader import load_suite
from orchard.errors import UsageError
from tests.helpers import SUITE, make_binary, make_suite, orchard

TYPO = SUITE.format(runs=8, calibration_runs=8).replace('command = ["{bin}"]', 'command = ["{bim}", "--quiet"]')


def test_a_typo_in_a_scenario_exits_2_before_calibration_starts(tmp_path: Path) -> None:
    make_binary(tmp_path, "prog")
    make_suite(tmp_path, text=TYPO)
    result = orchard("calibrate", "--suite", "suite.toml", "--baseline", "prog", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "[[scenario]] 'loop': unknown placeholder {bim}; known: {bin}, {suite_dir}, {workdir}" in result.stderr
    assert "KeyError" not in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.rglob("*.jsonl")), "nothing was measured"


@pytest.mark.parametrize(("entry", "text", "message"), [
    ("fixture", '[[fixture]]\nname = "corpus"\ncommand = ["make-corpus", "{dri}"]\n',
     "[[fixture]] 'corpus': unknown placeholder {dri}; known: {bin}, {suite_dir}, {workdir}, {dir}, {fixture.corpus}"),
    ("fixture name", '[[fixture]]\nname = "corpus"\ncommand = ["true"]\n',
     "[[scenario]] 's': unknown placeholder {fixture.corpse}"),
    ("results file", "", "[[scenario]] 's': unknown placeholder {work_dir}"),
    ("unbalanced", "", "[[scenario]] 's': Single '}' encountered"),
])
def test_every_command_of_a_suite_is_checked(tmp_path: Path, entry: str, text: str, message: str) -> None:
    commands = {"fixture name": '["{bin}", "{fixture.corpse}/in.txt"]', "unbalanced": '"{bin} }"'}
    command = commands.get(entry, '["{bin}"]')
    kind = 'kind = "rows"\nfile = "{work_dir}/out.json"\n' if entry == "results file" else ""
    suite = tmp_path / "suite.toml"
    suite.write_text(f'{text}\n[[scenario]]\nname = "s"\n{kind}command = {command}\n')
    with pytest.raises(UsageError) as error:
        load_suite(suite)
    assert message in str(error.value)


def test_known_placeholders_and_literal_braces_load(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text('[[fixture]]\nname = "corpus"\ncommand = ["mk", "{dir}", "{suite_dir}"]\n\n'
                     '[[scenario]]\nname = "s"\ncommand = "{bin} {fixture.corpus}/in.txt {workdir} | jq {{.a}}"\n')
    assert load_suite(suite).scenarios[0].name == "s"
