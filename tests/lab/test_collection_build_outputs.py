"""Candidate collection knows what a worker edited from what its build produced.

The target here has no .gitignore (as an sdist would not); the worker's
"build" writes a virtual environment, egg-info, bytecode and build
directories into its checkout, the way `pip install -e .` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchard.lab.judge import ladder as judge
from orchard.lab.judge.candidate import collect_candidate
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.worker import WorkerCheckout
from orchard.lab.workers.dask.remote import RemoteExperiment, lab_id, remove_scratch, run_experiment
from orchard.lab.workers.dask.serving import ServedRepositories
from orchard.lab.workers.executors import SubprocessExecutor
from orchard.lab.workers.jobs.job import JobResult
from orchard.lab.workers.launchers.launcher_base import Launcher
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace import builds
from orchard.lab.workers.workspace.workspace import Workspace
from tests.helpers import orchard
from tests.lab.lab_helpers import REPORTS, git
from tests.lab.loop_support import write_finished_report

BUILD_OUTPUTS = {
    ".venv/bin/python": b"\x7fELF\x00\x01\x02binary",
    ".venv/lib/python3.11/site-packages/pkg.pth": b"/src\n",
    "venv/pyvenv.cfg": b"home = /usr\n",
    "pkg.egg-info/PKG-INFO": b"Name: pkg\n",
    "src/__pycache__/alpha.cpython-311.pyc": b"\x00\x01\x02\x03",
    "src/beta.pyc": b"\x00\x01",
    "build/lib/fast.so": b"\x7fELF\x00\x00",
    "dist/pkg-1.0.tar.gz": b"\x1f\x8b\x00",
    "target/release/app": b"\x7fELF\x00",
    "node_modules/left-pad/index.js": b"module.exports = 1\n",
}


def _collect(workspace: Workspace, edit: Callable[[Path], None],
             scope: tuple[str, ...] = ("src/alpha.txt",)) -> Candidate:
    checkout = workspace.setup_worker("w1")
    experiment = Experiment("e1", Hypothesis(metric="wall_ms", change="x", scope=scope), checkout)
    edit(checkout.worker.target_dir)
    write_finished_report(checkout.worker.report_path, "e1")
    log = workspace.log_path("e1")
    log.write_text("WORKER_DONE_0\n")
    result = JobResult("e1", 0, None, False, False, "", 1.0, log)
    return collect_candidate(workspace, experiment, result, make_launcher(workspace.config.launcher))


def _run_locally(workspace: Workspace, hypothesis: Hypothesis, launcher: Launcher) -> Candidate:
    experiment = Experiment("e1", hypothesis, workspace.setup_worker("w1", ignore=launcher.scratch))
    with SubprocessExecutor() as executor:
        executor.start(launcher.job(workspace, experiment))
        (result,) = executor.wait()
    return collect_candidate(workspace, experiment, result, launcher)


def _run_remotely(workspace: Workspace, hypothesis: Hypothesis, launcher: Launcher) -> Candidate:
    """The dask task's own function, run here: a scratch copy of the lab, served from the lab's paths."""
    served = ServedRepositories(str(workspace.reference_target), str(workspace.bench_dir))
    try:
        result = run_experiment(RemoteExperiment(lab_id(workspace.root), "e2", "w2", hypothesis,
                                                 workspace.target_base(), workspace.bench_base(), served,
                                                 workspace.config))
    finally:
        remove_scratch(lab_id(workspace.root))
    assert result.reason is None, result.reason
    checkout = WorkerCheckout(workspace.worker("w2"), workspace.target_base(), workspace.bench_base())
    experiment = Experiment("e2", hypothesis, checkout)
    return collect_candidate(workspace, experiment, result, launcher)


def _write(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def _edit_and_build(root: Path) -> None:
    (root / "src/alpha.txt").write_text("alpha 2\n")
    _write(root, BUILD_OUTPUTS)


def _reasons(candidate: Candidate) -> list[str]:
    return judge.decide(judge.collection_checks(candidate), None, candidate.flags).reasons


def test_build_outputs_are_not_the_change(make_workspace: Callable[..., Workspace]) -> None:
    candidate = _collect(make_workspace(), _edit_and_build)
    assert candidate.changed_files == ["src/alpha.txt"]
    assert "build" not in candidate.patch and ".venv" not in candidate.patch
    assert "scope-violation" not in candidate.flags


def test_the_judges_commit_carries_no_build_outputs(make_workspace: Callable[..., Workspace]) -> None:
    workspace = make_workspace()
    base = workspace.target_base()
    checkout = builds.checkout_with_patch(workspace, workspace.judge_dir / "e1" / "target", base,
                                         "--- a/src/alpha.txt\n+++ b/src/alpha.txt\n@@ -1 +1 @@\n-alpha 1\n+alpha 2\n")
    _write(checkout, BUILD_OUTPUTS)  # what the judge's build leaves behind
    workspace.target_vcs.commit(checkout, "lab: win\n", branch="lab/e1")
    assert git(checkout, "show", "--name-only", "--format=", "HEAD").split() == ["src/alpha.txt"]


def test_the_targets_gitignore_and_the_labs_ignore_list_are_honoured(
    make_workspace: Callable[..., Workspace], target_repo: Path
) -> None:
    (target_repo / ".gitignore").write_text("out/\n")
    git(target_repo, "add", "-A")
    git(target_repo, "commit", "-qm", "ignore out/")
    workspace = make_workspace('[target]\nignore = ["*.log"]\n')

    def edit(root: Path) -> None:
        (root / "src/alpha.txt").write_text("alpha 2\n")
        _write(root, {"out/result.txt": b"x\n", "src/run.log": b"log\n", "build/keep.txt": b"kept\n"})

    candidate = _collect(workspace, edit, scope=("src/alpha.txt", "build/"))
    # the list replaces the defaults: build/ counts again, *.log does not
    assert candidate.changed_files == ["build/keep.txt", "src/alpha.txt"]


def test_a_binary_blob_is_refused_with_one_reason(make_workspace: Callable[..., Workspace]) -> None:
    def edit(root: Path) -> None:
        (root / "src/alpha.txt").write_text("alpha 2\n")
        _write(root, {f"src/lib{i}.so": b"\x7fELF\x00" + bytes(range(256)) for i in range(7)})

    candidate = _collect(make_workspace(), edit, scope=("src/",))
    assert "binary-files" in candidate.flags
    assert candidate.patch == ""  # never stored in lab.db
    reasons = _reasons(candidate)
    assert len(reasons) == 1
    assert "binary" in reasons[0] and "src/lib0.so" in reasons[0] and "and 4 more" in reasons[0]
    assert "[target] ignore" in reasons[0]


def test_an_oversize_patch_is_refused_with_one_reason(make_workspace: Callable[..., Workspace]) -> None:
    workspace = make_workspace("[target]\nmax_patch_kb = 4\n")
    candidate = _collect(workspace, lambda root: (root / "src/alpha.txt").write_text("word\n" * 4000))
    assert "patch-too-large" in candidate.flags and candidate.patch == ""
    (reason,) = _reasons(candidate)
    assert "KB" in reason and "max_patch_kb" in reason and "src/alpha.txt" in reason


def test_a_patch_adding_more_files_than_max_patch_files_is_refused(
    make_workspace: Callable[..., Workspace]
) -> None:
    """Thousands of small generated files: each tiny, all of them a KILL with the reason, never stored."""
    candidate = _collect(make_workspace(), lambda root: _write(root, {f"src/gen/f{i:04}.txt": b"x\n"
                                                                      for i in range(1001)}), scope=("src/",))
    assert "too-many-files" in candidate.flags and candidate.patch == ""
    (reason,) = _reasons(candidate)
    assert "1,001 files over [target] max_patch_files" in reason and "src/gen/f0000.txt" in reason
    assert len(reason) < 300


def test_reasons_name_a_few_files_and_how_many_more(make_workspace: Callable[..., Workspace]) -> None:
    def edit(root: Path) -> None:
        (root / "src/alpha.txt").write_text("alpha 2\n")
        _write(root, {f"gen/file{i:03}.txt": b"x\n" for i in range(40)})

    candidate = _collect(make_workspace(), edit)
    (reason,) = _reasons(candidate)
    assert "gen/file000.txt" in reason and "and 37 more" in reason
    assert len(reason) < 300


def test_init_warns_when_the_target_has_no_gitignore(tmp_path: Path, target_repo: Path, bench_repo: Path) -> None:
    result = orchard("init", tmp_path / "ws", "--target", target_repo, "--bench", bench_repo)
    assert result.returncode == 0, result.stderr
    assert "no .gitignore" in result.stderr and ".venv/" in result.stderr and "*.egg-info/" in result.stderr

    (target_repo / ".gitignore").write_text(".venv/\n")
    git(target_repo, "add", "-A")
    git(target_repo, "commit", "-qm", "ignore")
    result = orchard("init", tmp_path / "ws2", "--target", target_repo, "--bench", bench_repo)
    assert result.returncode == 0, result.stderr
    assert "no .gitignore" not in result.stderr


def test_a_tracked_build_output_the_build_rewrites_is_not_the_change(
    make_workspace: Callable[..., Workspace], target_repo: Path
) -> None:
    # an sdist committed whole tracks its egg-info; `setup.py develop` rewrites it
    _write(target_repo, {"pkg.egg-info/PKG-INFO": b"Metadata-Version: 2.4\n", "pkg.egg-info/SOURCES.txt": b"a\n"})
    git(target_repo, "add", "-A")
    git(target_repo, "commit", "-qm", "sdist as released")
    workspace = make_workspace()

    def edit(root: Path) -> None:
        (root / "src/alpha.txt").write_text("alpha 2\n")
        _write(root, {"pkg.egg-info/PKG-INFO": b"Metadata-Version: 2.1\n", "pkg.egg-info/SOURCES.txt": b"a\nb\n"})

    candidate = _collect(workspace, edit)
    assert candidate.changed_files == ["src/alpha.txt"] and "egg-info" not in candidate.patch
    checkout = builds.checkout_with_patch(workspace, workspace.judge_dir / "e1" / "target", workspace.target_base(),
                                         candidate.patch)
    _write(checkout, {"pkg.egg-info/PKG-INFO": b"Metadata-Version: 2.1\n"})  # the judge's build, the same
    workspace.target_vcs.commit(checkout, "lab: win\n", branch="lab/e1", ignore=workspace.config.target.ignore)
    assert git(checkout, "show", "--name-only", "--format=", "HEAD").split() == ["src/alpha.txt"]


def test_a_remote_and_a_local_worker_that_rebuild_tracked_outputs_are_collected_alike(
    make_workspace: Callable[..., Workspace], target_repo: Path
) -> None:
    # issue 22: texttable's sdist tracks its egg-info and its build rewrites it; on dask the candidate was
    # KILLed for "left its scope: files outside ['texttable.py']: texttable.egg-info/PKG-INFO, ..."
    _write(target_repo, {"pkg.egg-info/PKG-INFO": b"Metadata-Version: 2.4\n"})
    git(target_repo, "add", "-A")
    git(target_repo, "commit", "-qm", "sdist as released")
    edit_and_build = ("printf 'alpha 2\\n' > src/alpha.txt && printf 'Metadata-Version: 2.1\\n' > "
                      "pkg.egg-info/PKG-INFO" + REPORTS)
    workspace = make_workspace(f"[launcher]\nname = \"command\"\ntemplate = '''{edit_and_build}'''\n")
    hypothesis = Hypothesis(metric="wall_ms", change="x", id="e1", scope=("src/alpha.txt",))
    launcher = make_launcher(workspace.config.launcher)
    local = _run_locally(workspace, hypothesis, launcher)
    remote = _run_remotely(workspace, hypothesis, launcher)
    for candidate in (local, remote):
        assert candidate.changed_files == ["src/alpha.txt"] and "egg-info" not in candidate.patch
        assert candidate.flags == []
    assert remote.patch == local.patch
