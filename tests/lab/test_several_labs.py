"""Several labs on one target (issue 34, item 1): each publishes under its own name, none moves another's.

On main every lab published its main as `lab/main` in a working-copy target, so the second lab on a target
the first had published to refused to start ("a commit the lab's main never held: someone committed onto the
branch the lab publishes to"), though nobody had: the other lab had. Here each lab publishes
`lab/<lab>/main` and `lab/<lab>/<experiment>` (the name its workspace directory's), two labs run at once on one
target and each lands its win under its own name, and the refusal that remains, a branch a person moved,
names the commit's author and subject.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import LabIntegrityError
from orchard.lab.landing import pins, publication
from orchard.lab.records.judgment import Decision
from orchard.lab.records.land_steps import Merged
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import (
    ALPHA_TARGET,
    REPORTS,
    STDOUT_SUITE,
    TARGET_FILES,
    command_launcher,
    git,
    lab_config,
    lab_events,
    make_repo,
    one_worker,
)

PERSON = {"GIT_AUTHOR_NAME": "Jane Person", "GIT_AUTHOR_EMAIL": "jane@example.org",
          "GIT_COMMITTER_NAME": "Jane Person", "GIT_COMMITTER_EMAIL": "jane@example.org"}


def _config(worker: str = "printf 'alpha\\n' > {target_dir}/src/alpha.txt") -> str:
    return lab_config(target=ALPHA_TARGET, workers=one_worker(timeout_minutes=3, sandbox="none"),
                      launcher=command_launcher(worker + REPORTS), stop={"top_attempted": 9, "idle_loops": 99})


def _workspace(tmp_path: Path, target: Path, name: str, worker: str | None = None) -> Workspace:
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / f"{name}.toml").write_text(_config() if worker is None else _config(worker))
    return init_workspace(tmp_path / name, str(target), None, tmp_path / f"{name}.toml")


def _advance(ws: Workspace, state: LabState, where: publication.Publication) -> str:
    """A win merged on the lab's main and published, as a landing leaves it (without measuring anything)."""
    clone = ws.reference_target
    (clone / "src" / "alpha.txt").write_text("alpha\n")
    git(clone, "commit", "-qam", "lab: a win")
    head = git(clone, "rev-parse", "HEAD").strip()
    pins.pin(ws, state, where.main)
    git(clone, "push", "-q", "origin", f"{where.main}:refs/heads/{where.ref}")
    return head


def test_a_second_lab_starts_on_a_target_another_lab_published_to(tmp_path: Path) -> None:
    target = make_repo(tmp_path / "myproject", TARGET_FILES)
    first = _workspace(tmp_path, target, "speed-lab")
    state = LabState.open(first.root)
    where = publication.check_publication(first, state)
    assert where.ref == "lab/speed-lab/main" and where.prefix == "lab/speed-lab/"
    published = _advance(first, state, where)
    state.close()

    second = _workspace(tmp_path, target, "size-lab")
    other = LabState.open(second.root)
    try:
        where = publication.check_publication(second, other)  # on main: LabIntegrityError, "someone committed"
    finally:
        other.close()
    assert where.ref == "lab/size-lab/main"
    assert git(target, "rev-parse", "lab/size-lab/main").strip() == git(target, "rev-parse", "main").strip()
    assert git(target, "rev-parse", "lab/speed-lab/main").strip() == published  # the first lab's, untouched


def test_a_branch_a_person_moved_is_refused_naming_who_and_what(tmp_path: Path) -> None:
    target = make_repo(tmp_path / "myproject", TARGET_FILES)
    ws = _workspace(tmp_path, target, "lab one")  # a directory name that is no branch name as it is
    state = LabState.open(ws.root)
    try:
        where = publication.check_publication(ws, state)
        assert where.ref == "lab/lab-one/main"
        git(target, "switch", "-q", where.ref)
        (target / "README").write_text("edited by hand\n")
        subprocess.run(["git", "-C", str(target), "commit", "-qam", "tweak the readme"], check=True,
                       env={**os.environ, **PERSON})
        git(target, "switch", "-q", "main")
        with pytest.raises(LabIntegrityError) as caught:
            publication.check_publication(ws, state)
    finally:
        state.close()
    message = str(caught.value)
    assert "lab/lab-one/main" in message and "Jane Person <jane@example.org>" in message
    assert "tweak the readme" in message


def _orchard(*args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchard", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


LABS = {"speed": "printf 'alpha\\n' > {target_dir}/src/alpha.txt", "size": "printf 'a\\n' > {target_dir}/src/alpha.txt"}
MADE = {"speed": "alpha\n", "size": "a\n"}  # src/alpha.txt as each lab's win leaves it


def _labs(tmp_path: Path, target: Path) -> dict[str, Path]:
    """The two labs on `target`, each with one hypothesis of the same name (`shorter`) in its backlog."""
    roots = {}
    for name, worker in LABS.items():
        ws = _workspace(tmp_path, target, name, worker)
        added = subprocess.run([sys.executable, "-m", "orchard", "backlog", "add", ws.root, "--title", "shorter",
                                "--metric", "out/stdout_bytes", "--change", "shorter", "--scope", "src/alpha.txt"],
                               capture_output=True, text=True, timeout=300, check=False)
        assert added.returncode == 0, added.stdout + added.stderr
        roots[name] = ws.root
    return roots


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_labs_at_once_on_one_target_each_land_and_publish_under_their_own_names(tmp_path: Path) -> None:
    target = make_repo(tmp_path / "myproject", TARGET_FILES)
    roots = _labs(tmp_path, target)
    running = [_orchard("run", root) for root in roots.values()]  # both at once, on one target
    outputs = [process.communicate(timeout=1100)[0] for process in running]
    for process, output in zip(running, outputs, strict=True):
        assert process.returncode == 0, output
    for name, root in roots.items():
        state = LabState.open_readonly(root)
        try:
            landed = state.experiments(decision=Decision.LAND)
        finally:
            state.close()
        assert len(landed) == 1, name
        assert landed[0].branch == f"lab/{name}/{landed[0].name}"
        assert git(target, "rev-parse", landed[0].branch).strip() == landed[0].land_commit
        assert git(target, "show", f"lab/{name}/main:src/alpha.txt") == MADE[name]
        report = (root / "FINAL_REPORT.md").read_text()
        assert f"git -C {target} merge lab/{name}/main" in report
    assert git(target, "show", "main:src/alpha.txt") == "alpha 1\n"  # the user's main: untouched
    assert not git(target, "branch", "--list", "lab/main").strip()


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_two_labs_whose_wins_share_a_name_each_push_their_own_review_branch(tmp_path: Path) -> None:
    """On main both labs' review branches were `review/<win>`: the second lab's push was refused (or, had it
    been forced, would have replaced the first lab's win), and its REVIEW.md pointed at the first lab's commit."""
    target = make_repo(tmp_path / "myproject", TARGET_FILES)
    roots = _labs(tmp_path, target)
    for root in roots.values():  # one after the other: their finalizes meet on the target all the same
        process = _orchard("run", root)
        ran = process.communicate(timeout=1100)[0]
        assert process.returncode == 0, ran
    wins = {name: [e.experiment for e in lab_events(root, Merged)] for name, root in roots.items()}
    assert wins["speed"] == wins["size"] and len(wins["speed"]) == 1, wins  # one win each, of the same name
    win = wins["speed"][0]
    finalized = {name: _orchard("finalize", root, "--push") for name, root in roots.items()}
    for name, process in finalized.items():
        said = process.communicate(timeout=1100)[0]
        assert process.returncode == 0, said
        branch = f"review/{name}/{win}"
        assert f"pushed {branch} (" in said and "NOT pushed" not in said, said
        assert git(target, "show", f"{branch}:src/alpha.txt") == MADE[name], "each holds its own lab's win"
        assert git(target, "rev-parse", f"{branch}^").strip() == git(target, "rev-parse", "main").strip()
        review = (roots[name] / "REVIEW.md").read_text()
        assert f"`git fetch {target} {branch}` then `git merge FETCH_HEAD`" in review
        assert (roots[name] / "review" / f"{win}.md").is_file()
    assert not git(target, "branch", "--list", f"review/{win}").strip()
    assert git(target, "show", "main:src/alpha.txt") == "alpha 1\n"  # the user's main: untouched
