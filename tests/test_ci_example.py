"""The GitHub Actions example's shell steps, run locally on real git repositories (no GitHub needed).

`examples/ci/action.yml` is a composite action; `run_action` below plays its
steps the way the runner does (expressions, step outputs, `if:`, GITHUB_ENV),
with the Actions cache and the pull-request comments as small local stand-ins,
so a sequence of pull requests can be replayed against one cache.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchard.bench.deciding.calibration import cache_key
from orchard.bench.machine import machine_fingerprint
from orchard.bench.sandbox.confinement import for_campaign
from orchard.bench.suites.suite_reader import load_suite

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "ci" / "verdict.sh"
WORKFLOW = ROOT / "examples" / "ci" / "benchmark-verdict.yml"
ACTION = ROOT / "examples" / "ci" / "action.yml"

SUITE = """
[suite]
name = "prog"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "report"
command = ["{bin}"]

[[metric]]
name = "stdout_bytes"

[[metric]]
name = "tool_call_count"
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with a build step, a bench suite and a base commit."""
    repo = tmp_path / "project"
    (repo / "src").mkdir(parents=True)
    (repo / "bench").mkdir()
    (repo / "src" / "prog.sh").write_text('#!/bin/sh\necho "total words: 42"\n')
    (repo / "build.sh").write_text("mkdir -p build && cp src/prog.sh build/prog && chmod +x build/prog\n")
    (repo / ".gitignore").write_text("build/\n")
    (repo / "bench" / "suite.toml").write_text(SUITE)
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "base")
    return repo


def _commit(repo: Path, text: str) -> None:
    (repo / "src" / "prog.sh").write_text(text)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-am", "head")


def _run_steps(repo: Path, tmp_path: Path, base: str, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    summary = tmp_path / "step-summary.md"
    summary.write_text("# earlier steps' summary\n")
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # orchard as pip installs it
        "BASE_SHA": base,
        "HEAD_DIR": str(repo),
        "BUILD": "sh build.sh",
        "BINARY": "build/prog",
        "SUITE": "bench/suite.toml",
        "WORK": str(tmp_path / "work"),
        "GITHUB_STEP_SUMMARY": str(summary),
        **env,
    }
    result = subprocess.run(
        ["bash", str(SCRIPT)], cwd=repo, env=environment, capture_output=True, text=True, timeout=600
    )
    return result, summary


@pytest.mark.slow
def test_a_pull_request_that_prints_more_is_regressed_and_summarized(project: Path, tmp_path: Path) -> None:
    base = _git(project, "rev-parse", "HEAD")
    _commit(project, '#!/bin/sh\necho "total words: 42"\necho "and a lot more output than before"\n')
    result, summary = _run_steps(project, tmp_path, base)
    assert result.returncode == 1, result.stderr
    text = summary.read_text()
    assert text.startswith("# earlier steps' summary\n")  # appended, not overwritten
    assert "## orchard verdict: ❌ **REGRESSED**" in text
    assert "| `report/stdout_bytes` | regressed |" in text
    report = json.loads((tmp_path / "work" / "verdict.json").read_text())
    assert report["schema"] == "orchard.verdict/1" and report["verdict"] == "REGRESSED"
    assert "verdict: REGRESSED (exit 1, --fail-on regressed)" in result.stdout
    assert _git(project, "worktree", "list").count("\n") == 0  # the base worktree is removed


@pytest.mark.slow
def test_fail_on_any_fails_an_improvement_and_a_kept_calibration_is_reused(project: Path, tmp_path: Path) -> None:
    base = _git(project, "rev-parse", "HEAD")
    _commit(project, '#!/bin/sh\necho "total: 42"\n')
    calibration = tmp_path / "cache" / "calibration.json"
    first, summary = _run_steps(project, tmp_path, base, FAIL_ON="inconclusive", CALIBRATION=str(calibration))
    assert first.returncode == 0, first.stderr
    assert "**PASS**" in summary.read_text() and calibration.is_file()
    second, summary = _run_steps(project, tmp_path, base, FAIL_ON="any", CALIBRATION=str(calibration))
    assert second.returncode == 1
    assert "**PASS**" in summary.read_text() and "calibration: cached" in summary.read_text()


# -- the composite action, played step by step ------------------------------------------------------------------

FAKE_GH = r'''#!/usr/bin/env python3
"""`gh api` as the action calls it, on a JSON file of comments (FAKE_GH_STORE); --jq runs through the real jq."""
import json, os, re, subprocess, sys
args, store = sys.argv[1:], os.environ["FAKE_GH_STORE"]
assert args[0] == "api", args
if os.environ.get("FAKE_GH_FAIL"):
    sys.exit("HTTP 403: Resource not accessible by integration")
comments = json.load(open(store)) if os.path.exists(store) else []
method, jq, body, path, i = "GET", None, None, None, 1
while i < len(args):
    if args[i] == "--method":
        method = args[i + 1]
    elif args[i] == "--jq":
        jq = args[i + 1]
    elif args[i] == "-F":
        body = open(args[i + 1].split("=@", 1)[1]).read()
    elif args[i] != "--paginate":
        path = args[i]
    i += 2 if args[i] in ("--method", "--jq", "-F") else 1
issue = re.fullmatch(r"repos/[^/]+/[^/]+/issues/(\d+)/comments", path)
if method == "GET":
    mine = json.dumps([c for c in comments if c["issue"] == int(issue.group(1))])
    print(subprocess.run(["jq", "-r", jq], input=mine, capture_output=True, text=True, check=True).stdout, end="")
elif method == "POST":
    comments.append({"id": 101 + len(comments), "issue": int(issue.group(1)), "body": body})
else:
    comment_id = int(path.rsplit("/", 1)[1])
    next(c for c in comments if c["id"] == comment_id)["body"] = body
json.dump(comments, open(store, "w"))
'''
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class ActionRun:
    """What one run of the action did: each step's outcome and outputs, the job's step summary."""

    outcomes: dict[str, str] = field(default_factory=dict)  # step name -> success | failure | skipped
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)  # step id -> its outputs
    logs: list[str] = field(default_factory=list)
    summary: str = ""

    def output(self, step: str, name: str) -> str:
        return self.outputs.get(step, {}).get(name, "")


@dataclass
class Runner:
    """GitHub's side of the job, kept small: the Actions cache every run shares and the pull requests' comments.

    The cache is shared by every run here, which is stricter than GitHub's (a pull request sees its own
    entries and its base branch's): any key that could mix two calibrations up would show it."""

    root: Path
    cache: dict[str, bytes] = field(default_factory=dict)
    runs: int = 0

    def __post_init__(self) -> None:
        bin_dir = self.root / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "gh").write_text(FAKE_GH)
        (bin_dir / "gh").chmod(0o755)

    def comments(self, number: int) -> list[dict[str, Any]]:
        store = self.root / "comments.json"
        return [c for c in json.loads(store.read_text()) if c["issue"] == number] if store.exists() else []

    def run(self, origin: Path, base: str, head: str, number: int, **inputs: str) -> ActionRun:
        """The action on a fresh runner: a fresh clone at `head` (actions/checkout, fetch-depth 0), a fresh temp."""
        self.runs += 1
        here = self.root / f"run-{self.runs}"
        checkout, temp = here / "checkout", here / "temp"
        temp.mkdir(parents=True)
        subprocess.run(["git", "clone", "-q", str(origin), str(checkout)], check=True)
        _git(checkout, "checkout", "-q", head)
        context: dict[str, Any] = {
            "github": {"event_name": "pull_request", "token": "token", "workspace": str(checkout),
                       "event": {"pull_request": {"number": str(number), "base": {"sha": base}}}},
            "runner": {"temp": str(temp)},
            "steps": {},
        }
        action = yaml.safe_load(ACTION.read_text())
        context["inputs"] = {name: _expand(str(spec.get("default", "")), context)
                             for name, spec in action["inputs"].items()}
        context["inputs"].update(inputs)
        return self._steps(action["runs"]["steps"], context, checkout, temp)

    def _steps(self, steps: list[dict[str, Any]], context: dict[str, Any], checkout: Path, temp: Path) -> ActionRun:
        result, failed = ActionRun(), False
        job_env = {"ORCHARD": str(Path(sys.executable).parent / "orchard")}  # what "Install orchard" puts in GITHUB_ENV
        summary = temp / "step-summary.md"
        for step in steps:
            name = step["name"]
            if name == "Install orchard" or not _condition(step.get("if", ""), context, failed):
                result.outcomes[name] = "skipped"  # installing: this test's own orchard is that checkout, installed
                continue
            outputs: dict[str, str] = {}
            if "uses" in step:
                ok = self._uses(step["uses"], {k: _expand(str(v), context) for k, v in step["with"].items()}, outputs)
            else:
                files = {kind: temp / f"{kind}-{len(result.outcomes)}" for kind in ("output", "env")}
                env = {**os.environ, **job_env, **{k: _expand(str(v), context) for k, v in step.get("env", {}).items()},
                       "PATH": f"{self.root / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                               f"{os.environ['PATH']}",
                       "GITHUB_ACTION_PATH": str(ACTION.parent), "RUNNER_TEMP": str(temp),
                       "GITHUB_OUTPUT": str(files["output"]), "GITHUB_ENV": str(files["env"]),
                       "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_REPOSITORY": "me/project",
                       "FAKE_GH_STORE": str(self.root / "comments.json")}
                done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=checkout, env=env, capture_output=True,
                                      text=True, timeout=600)
                result.logs.append(f"{name}: exit {done.returncode}\n{done.stdout}{done.stderr}")
                ok = done.returncode == 0
                for kind, target in (("output", outputs), ("env", job_env)):
                    if files[kind].exists():
                        target.update(line.split("=", 1) for line in files[kind].read_text().splitlines() if line)
            result.outcomes[name] = "success" if ok else "failure"
            failed = failed or not ok
            if "id" in step:
                result.outputs[step["id"]] = outputs
                context["steps"][step["id"]] = {"outputs": outputs}
        result.summary = summary.read_text() if summary.exists() else ""
        return result

    def _uses(self, action: str, given: dict[str, str], outputs: dict[str, str]) -> bool:
        path = Path(given.get("path", ""))
        if action == "actions/cache/restore@v4":
            if given["key"] in self.cache:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(self.cache[given["key"]])
            outputs["cache-hit"] = "true" if given["key"] in self.cache else ""
        elif action == "actions/cache/save@v4":
            assert given["key"] not in self.cache, "GitHub never overwrites a cache entry: this save would fail"
            self.cache[given["key"]] = path.read_bytes()
        else:
            assert action == "actions/upload-artifact@v4", action
        return True


def _value(text: str, context: dict[str, Any]) -> str:
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    value: Any = context
    for part in text.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return str(value)


def _expand(text: str, context: dict[str, Any]) -> str:
    return EXPRESSION.sub(lambda match: _value(match.group(1), context), text)


def _condition(text: str, context: dict[str, Any], failed: bool) -> bool:
    """The `if:` forms action.yml uses: `always()` and comparisons joined by `&&`; without always(), success()."""
    terms = [term.strip() for term in text.split("&&")] if text else []
    if failed and "always()" not in terms:
        return False
    for term in terms:
        if term != "always()":
            left, operator, right = re.fullmatch(r"(\S+)\s*(==|!=)\s*(\S+)", term).groups()  # type: ignore[union-attr]
            if (_value(left, context) == _value(right, context)) != (operator == "=="):
                return False
    return True


RECALL_SUITE = SUITE.replace('command = ["{bin}"]', 'command = ["{bin}"]\nexpect_file = "facts.txt"') + """
[[gate]]
kind = "information_recall"
"""


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """The project on GitHub: main with a build, a suite whose facts are in an expect_file, and the program."""
    repo = tmp_path / "origin"
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    _change(repo, "base", {"src/prog.sh": '#!/bin/sh\necho "total words: 42"\n', ".gitignore": "build/\n",
                           "build.sh": "mkdir -p build && cp src/prog.sh build/prog && chmod +x build/prog\n",
                           "bench/suite.toml": RECALL_SUITE, "bench/facts.txt": "42\n"})
    return repo


def _change(repo: Path, message: str, files: dict[str, str], branch: str = "") -> str:
    if branch:
        _git(repo, "checkout", "-q", "-b", branch, "main")
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", message)
    head = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    return head


def _merge(repo: Path, branch: str) -> str:
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "merge", "-q", "--no-ff", "-m", branch,
         branch)
    return _git(repo, "rev-parse", "HEAD")


def _inputs() -> dict[str, str]:
    return {"suite": "bench/suite.toml", "binary": "build/prog", "build": "sh build.sh",
            "valgrind": "true" if shutil.which("valgrind") else "false"}


@pytest.mark.slow
def test_a_suite_change_sequence_judges_every_pull_request_and_never_trips_on_the_cache(
    origin: Path, tmp_path: Path
) -> None:
    """Base suite, a pull request that edits the suite, merged; one that edits the expect_file facts, merged;
    the next pull request: each run judges (exit 0 or 1 as its verdict says, never 2), the calibration saved
    after a REGRESSED run too, reused where it is the same calibration, made again where it is not."""
    github = Runner(tmp_path / "github")
    main = _git(origin, "rev-parse", "HEAD")
    # 1: a regression that also edits the suite (the verdict still reads the base's suite)
    more = '#!/bin/sh\necho "total words: 42"\necho "and a lot more output than before"\n'
    pr1 = _change(origin, "more output, a bigger suite", {
        "src/prog.sh": more,
        "bench/suite.toml": RECALL_SUITE.replace("calibration_runs = 6", "calibration_runs = 8")}, branch="pr1")
    first = github.run(origin, main, pr1, 1, **_inputs())
    again = github.run(origin, main, pr1, 1, **_inputs())  # a second push to the same pull request
    main = _merge(origin, "pr1")
    # 2: new facts in the expect_file, nothing else of the suite
    pr2 = _change(origin, "say the total", {"bench/facts.txt": "42\ntotal\n",  # and a program change not seen
                                            "src/prog.sh": more + "# says the total\n"},
                  branch="pr2")
    second = github.run(origin, main, pr2, 2, **_inputs())
    main = _merge(origin, "pr2")
    pr3 = _change(origin, "shorter", {"src/prog.sh": '#!/bin/sh\necho "total: 42"\n'}, branch="pr3")
    third = github.run(origin, main, pr3, 3, **_inputs())

    runs = {"pr1": first, "pr1 again": again, "pr2": second, "pr3": third}
    judged = {name: run.outcomes["Build base and head, judge head against base"] for name, run in runs.items()}
    words = {name: run.output("judge", "verdict") for name, run in runs.items()}
    assert words == {"pr1": "REGRESSED", "pr1 again": "REGRESSED", "pr2": "NO-CHANGE", "pr3": "PASS"}, \
        "\n".join(first.logs + third.logs)
    assert judged == {"pr1": "failure", "pr1 again": "failure", "pr2": "success", "pr3": "success"}
    assert all("gave no verdict" not in run.summary and "exit 2" not in "".join(run.logs) for run in runs.values())
    assert "::error title=orchard: report/stdout_bytes regressed::report/stdout_bytes regressed by +" in \
        "".join(first.logs)  # an annotation on the run's page
    # the key is what the calibration is made of: the base's suite, then its facts, changed it
    keys = [run.output("key", "key") for run in runs.values()]
    assert keys[0] == keys[1] and len(set(keys)) == 3 and set(github.cache) == set(keys)
    calibrations = [re.search(r"calibration: (\w+)", run.summary).group(1) for run in runs.values()]  # type: ignore[union-attr]
    assert calibrations == ["fresh", "cached", "fresh", "fresh"]
    assert first.outcomes["Save the calibration"] == "success"  # saved though the job failed
    assert again.outcomes["Save the calibration"] == "skipped"  # a hit is never saved again
    # one comment per pull request, edited in place with the latest verdict
    [comment] = github.comments(1)
    assert comment["body"].startswith("<!-- orchard-verdict -->\n## orchard verdict: ❌ **REGRESSED**")
    assert "calibration: cached" in comment["body"]
    assert [c["body"].splitlines()[1] for c in github.comments(3)] == ["## orchard verdict: ✅ **PASS**"]


def _key(checkout: Path) -> str:
    """What `orchard calibration-key` prints for this checkout's suite (computed here, in this process)."""
    suite = load_suite(checkout / "bench/suite.toml")
    return cache_key(machine_fingerprint(), suite.digest, for_campaign(suite.confine, suite.directory).isolation)


def test_the_cache_key_is_made_from_the_base_suite_its_facts_and_this_machine(origin: Path, tmp_path: Path) -> None:
    main = _git(origin, "rev-parse", "HEAD")
    base_key = _key(origin)
    head = _change(origin, "a bigger suite", {"bench/suite.toml": RECALL_SUITE.replace("runs = 6", "runs = 9")},
                   branch="pr")
    _git(origin, "checkout", "-q", head)  # the pull request's checkout, as actions/checkout leaves it
    head_key = _key(origin)
    key_step = [s for s in yaml.safe_load(ACTION.read_text())["runs"]["steps"] if s.get("id") == "key"]
    context = {"inputs": {"base-sha": main, "suite": "bench/suite.toml"}, "steps": {},
               "runner": {"temp": str(tmp_path / "temp")}}
    (tmp_path / "temp").mkdir()
    run = Runner(tmp_path / "github")._steps(key_step, context, origin, tmp_path / "temp")
    assert run.outcomes == {"Calibration key": "success"}, run.logs
    assert run.output("key", "key") == f"orchard-calibration-{base_key}" and head_key != base_key
    assert base_key.startswith(f"{machine_fingerprint()}-")
    (origin / "bench/facts.txt").write_text("42\ntotal\n")
    assert _key(origin) not in (head_key, base_key)  # the expect_file's facts are part of it


def test_the_comment_is_posted_once_then_edited_in_place_and_a_read_only_token_only_warns(tmp_path: Path) -> None:
    github = Runner(tmp_path / "github")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{github.root / 'bin'}{os.pathsep}{os.environ['PATH']}", "WORK": str(work),
           "GITHUB_REPOSITORY": "me/project", "PR_NUMBER": "7", "FAKE_GH_STORE": str(github.root / "comments.json")}
    for verdict in ("REGRESSED", "PASS"):
        (work / "summary.md").write_text(f"## orchard verdict: **{verdict}**\n")
        done = subprocess.run(["bash", str(SCRIPT), "comment"], env=env, capture_output=True, text=True, check=True)
    assert "updated the verdict comment 101" in done.stdout
    assert [c["body"] for c in github.comments(7)] == ["<!-- orchard-verdict -->\n## orchard verdict: **PASS**\n"]
    fork = subprocess.run(["bash", str(SCRIPT), "comment"], env={**env, "FAKE_GH_FAIL": "1"}, capture_output=True,
                          text=True)
    assert fork.returncode == 0 and "::warning::could not comment on pull request 7" in fork.stdout


def test_the_workflow_uses_the_action_which_runs_this_script_and_installs_orchard_lab() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    action = yaml.safe_load(ACTION.read_text())
    assert workflow["concurrency"]["cancel-in-progress"] is True
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = workflow["jobs"]["verdict"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0 and steps[1]["uses"].endswith("/examples/ci@main")
    assert set(steps[1]["with"]) <= set(action["inputs"])
    runs = [step["run"] for step in action["runs"]["steps"] if "run" in step]
    assert [r for r in runs if "verdict.sh" in r] == [f'bash "$GITHUB_ACTION_PATH/verdict.sh" {phase}'
                                                      for phase in ("key", "judge", "comment")]
    # not on PyPI yet: installed from the repository that holds the action, whose distribution is orchard-lab
    assert '"${ORCHARD_SPEC:-$GITHUB_ACTION_PATH/../..}"' in runs[0]
    project = tomllib.loads((ACTION.parent / "../../pyproject.toml").read_text())["project"]
    assert project["name"] == "orchard-lab" and project["scripts"] == {"orchard": "orchard.cli:main"}
    assert any("apt-get install -y -qq valgrind" in r for r in runs)
    save = next(s for s in action["runs"]["steps"] if s.get("uses", "").startswith("actions/cache/save"))
    assert save["if"].startswith("always() && ")


WORKFLOW_SUITE = SUITE.replace('"stdout_bytes"', '"wall_ms"').replace('"tool_call_count"', '"cpu_ms"')  # noisy


@pytest.mark.slow
def test_a_docs_only_pull_request_passes_with_the_workflows_own_settings(tmp_path: Path) -> None:
    """The workflow as shipped (its `with:` values: make, build/prog, bench/suite.toml, its fail-on) on a pull
    request that edits only the README and docs/: NO-CHANGE without measuring, the job green, however loud the
    machine (wall and CPU time would be noise here)."""
    origin = tmp_path / "origin"
    _git(tmp_path, "init", "-q", "-b", "main", str(origin))
    main = _change(origin, "base", {
        "src/prog.sh": '#!/bin/sh\necho "total words: 42"\n', ".gitignore": "build/\n", "README.md": "# prog\n",
        "Makefile": "build/prog: src/prog.sh\n\tmkdir -p build && cp src/prog.sh build/prog && chmod +x build/prog\n",
        "bench/suite.toml": WORKFLOW_SUITE})
    head = _change(origin, "docs", {"README.md": "# prog\n\nUsage: prog\n", "docs/usage.md": "prog prints\n"},
                   branch="docs")
    settings = yaml.safe_load(WORKFLOW.read_text())["jobs"]["verdict"]["steps"][1]["with"]
    assert settings["fail-on"] == "regressed"
    github = Runner(tmp_path / "github")
    run = github.run(origin, main, head, 1, **settings, valgrind="false")
    assert run.outcomes["Build base and head, judge head against base"] == "success", "\n".join(run.logs)
    assert run.output("judge", "verdict") == "NO-CHANGE"
    assert "identical programs, not measured" in run.summary and "nothing measured" in run.summary
    assert run.outcomes["Save the calibration"] == "skipped"  # no calibration was needed
    assert github.comments(1)[0]["body"].splitlines()[1] == "## orchard verdict: ⚪ **NO-CHANGE**"


FAKE_ORCHARD = r"""#!/bin/sh
# orchard as verdict.sh calls it, giving the verdict in $FAKE_VERDICT
case "$1" in
  calibration-key) echo key ;;
  verdict) while [ "$#" -gt 0 ]; do [ "$1" = --export-json ] && cp "$FAKE_VERDICT" "$2"; shift; done; exit 1 ;;
esac
"""


def test_regressed_and_inconclusive_metrics_are_annotated_and_advice_is_a_notice(project: Path,
                                                                                  tmp_path: Path) -> None:
    fake = tmp_path / "orchard"
    fake.write_text(FAKE_ORCHARD)
    fake.chmod(0o755)
    metric = {"floor_percent": 2.0, "n": 12, "interval_percent": [11.15, 35.25]}
    (tmp_path / "verdict.json").write_text(json.dumps({"verdict": "REGRESSED", "metrics": [
        {**metric, "key": "report/cpu_ms", "verdict": "regressed", "effect_percent": 26.3},
        {**metric, "key": "report/wall_ms", "verdict": "inconclusive", "effect_percent": 19.93,
         "interval_percent": [0.46, 43.6]},
        {**metric, "key": "report/stdout_bytes", "verdict": "no-change", "effect_percent": 0.0}],
        "advice": [{"line": "report/wall_ms cannot decide changes of 1.00%: measure instructions"}]}))
    base = _git(project, "rev-parse", "HEAD")
    result, _ = _run_steps(project, tmp_path, base, ORCHARD=str(fake), FAKE_VERDICT=str(tmp_path / "verdict.json"))
    assert result.returncode == 1
    annotations = [line for line in result.stdout.splitlines() if line.startswith(("::error", "::warning",
                                                                                    "::notice"))]
    assert annotations == [
        "::error title=orchard: report/cpu_ms regressed::report/cpu_ms regressed by +26.30% "
        "(interval [+11.15%, +35.25%]), noise floor 2.00%, 12 pairs",
        "::warning title=orchard: report/wall_ms inconclusive::report/wall_ms inconclusive by +19.93% "
        "(interval [+0.46%, +43.60%]), noise floor 2.00%, 12 pairs",
        "::notice title=orchard: advice::report/wall_ms cannot decide changes of 1.00%: measure instructions"]
