"""A light install (issue 33 item 5): `pip install orchard-lab` gives the bench and the verdict with numpy, click
and rich (and the few small packages the bench itself imports); the lab's dependencies come with
`orchard-lab[lab]`, and a lab command run without them says so in one line, exit 2.

The lab's packages are made missing as Python marks a module that cannot be imported (None in `sys.modules`),
by a `sitecustomize` on the orchard process's path: the process then runs as on a light install."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.helpers import make_binary, make_suite, orchard

ROOT = Path(__file__).parents[1]
LAB_ONLY = ("libtmux", "distributed", "dask", "cryptography", "plotly", "starlette", "uvicorn")


@pytest.fixture
def light(tmp_path: Path) -> dict[str, str]:
    """The environment of an orchard process that finds none of the lab's packages."""
    site = tmp_path / "light-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in LAB_ONLY))
    return {"PYTHONPATH": str(site)}


def test_the_install_names_the_light_dependencies_and_the_lab_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "orchard-lab"

    def names(requirements: list[str]) -> set[str]:
        return {requirement.split(">")[0].split("=")[0].split("<")[0].strip() for requirement in requirements}

    assert names(project["dependencies"]) == {"click", "rich", "numpy", "filelock", "psutil", "tomli-w"}
    assert names(project["optional-dependencies"]["lab"]) >= {
        "libtmux", "distributed", "cryptography", "plotly", "starlette", "uvicorn"}


def test_the_bench_and_the_verdict_run_without_the_labs_packages(tmp_path: Path, light: dict[str, str]) -> None:
    make_binary(tmp_path, "fast", iterations=100)
    make_suite(tmp_path, runs=8, calibration_runs=8)
    verdict = orchard("verdict", "--suite", "suite.toml", "--baseline", "fast", "--candidate", "fast",
                      "--measure-identical", "--runs", "8", "--export-markdown", "summary.md", cwd=tmp_path, env=light)
    # what it decides is the verdict's business (an A/A of 8 runs on a loaded machine was once REGRESSED, exit 1):
    # here only that it decides without the lab's packages
    assert verdict.returncode in (0, 1) and "Traceback" not in verdict.stderr, verdict.stderr
    assert "verdict: " in verdict.stdout and (tmp_path / "summary.md").is_file()
    for _ in range(2):
        run = orchard("bench", "run", "--suite", "suite.toml", "--subject", "fast=fast", "--runs", "3", cwd=tmp_path,
                      env=light)
        assert run.returncode == 0 and "stdout_bytes" in run.stdout, run.stderr
    old, new = sorted((tmp_path / "results" / "bench").glob("*.jsonl"))
    compared = orchard("compare", old, new, cwd=tmp_path, env=light)
    assert compared.returncode in (0, 1) and "verdict: " in compared.stdout, compared.stderr


@pytest.mark.parametrize("command", [["status", "."], ["run", "."], ["demo", "--workspace", "demo"],
                                     ["backlog", "list", "."]])
def test_a_lab_command_without_the_labs_packages_names_the_extra(tmp_path: Path, light: dict[str, str],
                                                                 command: list[str]) -> None:
    done = orchard(*command, cwd=tmp_path, env=light)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"orchard: error: orchard {command[0]} needs the lab's packages, not installed here "
        "(libtmux, distributed, cryptography, plotly, starlette, uvicorn): pip install 'orchard-lab[lab]'"]
    assert not (tmp_path / "demo").exists()
