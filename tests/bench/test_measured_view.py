"""What a measured run can see (issues 36.1 and 33.2): its own project and what its scenario declares, never the
bench's answers.

Hostile programs try to read files of the bench while they are measured: an
expected output beside the input, the suite file, an `expect_file`, a held-out
input and a held-out fixture. Confined, none of them can (unconfined, each
can: the attack is real); an honest program still reads its input, its
declared `inputs`, and the project it runs from, wherever that lives.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from orchard.bench.campaigns.campaign import run_verdict
from orchard.bench.deciding.verdict import VerdictWord
from orchard.bench.measuring.measure import Observation, RunSpec, observe, workbench
from orchard.bench.sandbox.confinement import confine_runs
from orchard.bench.suites.suite_reader import load_suite
from orchard.errors import UsageError

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SUITE = """[suite]
name = "view"
holdout = ["hidden/"]
{head}

[[fixture]]
name = "secret"
command = ["sh", "-c", "echo held-out-corpus > {{dir}}/corpus.txt"]
holdout = true

[[scenario]]
name = "render"
command = {command}
expect = {expect}
{scenario}

[[scenario]]
name = "unseen"
command = ["{{bin}}", "{{fixture.secret}}/corpus.txt"]
expect_file = "hidden/unseen.facts"
holdout = true
"""
# prints its input, then READ or DENIED for each path in $PEEK (a file it should not be able to read)
PEEK = """#!/bin/sh
cat "$1" || exit 3
for path in $PEEK; do
  if cat "$path" >/dev/null 2>&1; then echo "READ $path"; else echo "DENIED $path"; fi
done
"""


def _bench(tmp_path: Path, *, expect: list[str], command: str = '["{bin}", "{suite_dir}/input.txt"]',
           head: str = "", scenario: str = "") -> Path:
    bench = tmp_path / "bench"
    (bench / "hidden").mkdir(parents=True)
    (bench / "data").mkdir()
    (bench / "suite.toml").write_text(SUITE.format(command=command, head=head, scenario=scenario,
                                                   expect=json.dumps(expect)))
    (bench / "input.txt").write_text("the input\n")
    (bench / "input.expected").write_text("THE ANSWER\n")
    (bench / "hidden" / "unseen.facts").write_text("held-out-corpus\n")
    (bench / "hidden" / "unseen.txt").write_text("held out\n")
    (bench / "data" / "words.txt").write_text("declared words\n")
    return bench / "suite.toml"


def _program(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _run(suite_path: Path, binary: Path, env: dict[str, str] | None = None) -> Observation:
    """One confined run of the 'render' scenario, as a verdict runs it; its output is judged by `expect`."""
    suite = load_suite(suite_path)
    scenario = suite.scenario("render")
    if env:
        scenario = dataclasses.replace(scenario, env=env)
    confinement = confine_runs(True, reads=[suite.directory, binary])
    assert confinement.confined, confinement.note
    with workbench(suite, confinement=confinement) as bench:
        return observe(bench, scenario, binary, RunSpec("candidate", {"name": "candidate"}, 1, {}, set()))


def test_no_file_of_the_bench_is_readable_but_the_input(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    secrets = [bench / "input.expected", bench / "suite.toml", bench / "hidden" / "unseen.facts",
               bench / "hidden" / "unseen.txt", bench / "data" / "words.txt"]
    suite_path = _bench(tmp_path, expect=["the input", *(f"DENIED {s}" for s in secrets)])
    peek = _program(tmp_path / "prog" / "peek", PEEK)
    env = {"PEEK": " ".join(map(str, secrets))}
    unconfined = subprocess.run([peek, bench / "input.txt"], capture_output=True, text=True, check=True,
                                env={"PATH": "/usr/bin:/bin", **env}).stdout
    assert all(f"READ {s}" in unconfined for s in secrets), unconfined  # each is there to read
    seen = _run(suite_path, peek, env)
    assert seen.ok, seen.failure
    assert seen.recall == 1.0, "a confined run read a file of the bench it does not name"


def test_a_held_out_fixture_is_not_readable_by_a_visible_scenario(tmp_path: Path) -> None:
    suite_path = _bench(tmp_path, expect=["the input", "DENIED"])
    peek = _program(tmp_path / "prog" / "peek", PEEK)
    suite = load_suite(suite_path)
    confinement = confine_runs(True, reads=[suite.directory, peek])
    with workbench(suite, confinement=confinement) as bench:
        corpus = bench.fixtures["secret"] / "corpus.txt"
        scenario = dataclasses.replace(suite.scenario("render"), env={"PEEK": str(corpus)})
        seen = observe(bench, scenario, peek, RunSpec("candidate", {"name": "c"}, 1, {}, set()))
    assert seen.ok and seen.recall == 1.0, seen.failure


def test_declared_inputs_and_readable_paths_are_readable(tmp_path: Path) -> None:
    extra = tmp_path / "elsewhere" / "notes.txt"
    extra.parent.mkdir()
    extra.write_text("extra\n")
    bench = tmp_path / "bench"
    suite_path = _bench(tmp_path, expect=["the input", f"READ {bench / 'data' / 'words.txt'}", f"READ {extra}",
                                          f"DENIED {bench / 'input.expected'}"],
                        head=f'readable = ["{extra}"]', scenario='inputs = ["data/*.txt"]')
    peek = _program(tmp_path / "prog" / "peek", PEEK)
    seen = _run(suite_path, peek, {"PEEK": f"{bench / 'data' / 'words.txt'} {extra} {bench / 'input.expected'}"})
    assert seen.ok and seen.recall == 1.0, seen.failure


WRAPPER = """#!/bin/sh
exec python3 "$(dirname "$0")/../src/render.py" "$@"
"""
RENDER = "import sys\nprint(open(sys.argv[1]).read().upper(), end='')\n"


@pytest.mark.parametrize("where", ["/tmp", "/var/tmp"])
def test_a_wrapper_runs_its_project_one_directory_up(tmp_path: Path, where: str) -> None:
    """`build/prog` runs `../src/render.py`: its project is readable wherever it lives (issue 33.2)."""
    project = Path(tempfile.mkdtemp(prefix="project-", dir=where))
    project.chmod(0o755)
    try:
        _program(project / "src" / "render.py", RENDER)
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        wrapper = _program(project / "build" / "prog", WRAPPER)
        suite_path = _bench(tmp_path, expect=["THE INPUT"])
        seen = _run(suite_path, wrapper)
        assert seen.ok, seen.failure
        assert seen.recall == 1.0
    finally:
        shutil.rmtree(project, ignore_errors=True)


def test_a_run_that_cannot_find_a_file_is_told_about_confinement(tmp_path: Path) -> None:
    suite_path = _bench(tmp_path, expect=["the input"])
    reader = _program(tmp_path / "prog" / "reader", f"#!/bin/sh\ncat {tmp_path / 'bench' / 'data' / 'words.txt'}\n")
    seen = _run(suite_path, reader)
    assert not seen.ok
    assert "confined" in seen.failure and "inputs" in seen.failure and "--no-confine" in seen.failure, seen.failure


def test_a_command_that_names_the_suite_directory_is_refused(tmp_path: Path) -> None:
    suite_path = _bench(tmp_path, expect=["x"], command='["{bin}", "--walk", "{suite_dir}"]')
    with pytest.raises(UsageError, match="inputs"):
        load_suite(suite_path)
    named_file = _bench(tmp_path / "ok", expect=["x"], command='["{bin}", "{suite_dir}/input.txt"]')
    assert load_suite(named_file).scenario("render").command == ["{bin}", "{suite_dir}/input.txt"]


def test_a_suite_inside_the_programs_own_repository_keeps_its_answers(tmp_path: Path) -> None:
    """The project is readable around its bench directory: the source the wrapper runs, not the answer key."""
    project = tmp_path / "project"
    _program(project / "src" / "render.py", RENDER)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    wrapper = _program(project / "build" / "prog", WRAPPER.replace('exec python3', 'cat "$PEEK" 2>/dev/null || '
                                                                    'echo DENIED; exec python3'))
    suite_path = _bench(project, expect=["DENIED", "THE INPUT"])
    seen = _run(suite_path, wrapper, {"PEEK": str(project / "bench" / "input.expected")})
    assert seen.ok and seen.recall == 1.0, seen.failure


def _orchard(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=300, check=False)


def test_orchard_verdict_refuses_a_command_naming_the_suite_directory(tmp_path: Path) -> None:
    suite_path = _bench(tmp_path, expect=["x"], command='"{bin} --walk {suite_dir}"')
    done = _orchard("verdict", "--suite", suite_path, "--baseline", "/bin/true", "--candidate", "/bin/true")
    assert done.returncode == 2, done.stderr
    assert "names the suite's directory itself" in done.stderr and "inputs = [" in done.stderr, done.stderr


def test_orchard_verdict_on_a_file_it_could_not_see_names_confinement(tmp_path: Path) -> None:
    suite_path = _bench(tmp_path, expect=["declared words"], command='["{bin}"]')
    reader = _program(tmp_path / "prog" / "reader", f"#!/bin/sh\ncat {tmp_path / 'bench' / 'data' / 'words.txt'}\n")
    done = _orchard("verdict", "--suite", suite_path, "--baseline", reader, "--candidate", reader,
                    "--results", tmp_path / "results", "--measure-identical")  # one program: measured only so
    assert "ERROR" in done.stdout, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "confined" in said and "`inputs" in said and "--no-confine" in said, said


VERDICT_SUITE = """[suite]
name = "answer-key"
runs = 8
min_runs = 8
calibration_runs = 6

[[scenario]]
name = "render"
command = ["{bin}", "{suite_dir}/input.txt"]
expect = ["THE INPUT"]

[[metric]]
name = "wall_ms"

[[gate]]
kind = "information_recall"
"""
HONEST = "#!/bin/sh\nWORK\ntr a-z A-Z < \"$1\"\n"
# the answer key beside its input: printed at once where it can be read, else the honest work
ANSWER_KEY = "#!/bin/sh\nkey=\"${1%.txt}.expected\"\nif cat \"$key\" 2>/dev/null; then exit 0; fi\n" + HONEST


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("candidate", "passes"), [(ANSWER_KEY.replace("WORK", "sleep 0.25"), False),
                                                   (HONEST.replace("WORK", "sleep 0.05"), True)])
def test_the_answer_key_never_passes_and_an_honest_faster_candidate_does(tmp_path: Path, candidate: str,
                                                                          passes: bool) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "suite.toml").write_text(VERDICT_SUITE)
    (bench / "input.txt").write_text("the input\n")
    (bench / "input.expected").write_text("THE INPUT\n")
    base = _program(tmp_path / "bin" / "base", HONEST.replace("WORK", "sleep 0.25"))
    cand = _program(tmp_path / "bin" / "cand", candidate)
    verdict = run_verdict(load_suite(bench / "suite.toml"), base, cand, results=tmp_path / "results", seed=11)
    assert (verdict.verdict == VerdictWord.PASS) == passes, verdict.reasons
    assert verdict.confinement and verdict.confinement.startswith("measured runs confined"), verdict.confinement


def test_a_shell_script_command_gets_the_files_its_words_name(tmp_path: Path) -> None:
    suite_path = _bench(tmp_path, expect=["the input"], command='["sh", "-c", "{bin} <{suite_dir}/input.txt"]')
    reader = _program(tmp_path / "prog" / "reader", "#!/bin/sh\ncat\n")
    seen = _run(suite_path, reader)
    assert seen.ok and seen.recall == 1.0, seen.failure


def test_a_virtualenvs_console_script_under_tmp_runs_confined(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "render.py").write_text("import sys\ndef main():\n    print(open(sys.argv[1]).read().upper(), end='')\n")
    script = _program(venv / "bin" / "render", f"#!{venv / 'bin' / 'python'}\nimport render\nrender.main()\n")
    seen = _run(_bench(tmp_path, expect=["THE INPUT"]), script)
    assert seen.ok and seen.recall == 1.0, seen.failure


def test_a_virtualenvs_own_python_as_the_binary_runs_confined(tmp_path: Path) -> None:
    """A Python target's binary is often its virtualenv's `bin/python`: a link to the absolute path of the Python
    the virtualenv was made from. bwrap could not bind onto that link ("Can't create file at .../bin/python"), so
    every measured run of such a target failed (the red-team battery's baseline on Python-Markdown)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    links, link = [], python
    while link.is_symlink():
        links.append(Path(os.readlink(link)))
        link = link.parent / links[-1]
    assert any(target.is_absolute() for target in links), links
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "upper.py").write_text("import sys\nprint(open(sys.argv[1]).read().upper(), end='')\n")
    seen = _run(_bench(tmp_path, expect=["THE INPUT"], command='["{bin}", "-m", "upper", "{suite_dir}/input.txt"]'),
                python)
    assert seen.ok and seen.recall == 1.0, seen.failure
