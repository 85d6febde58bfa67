"""The VCS adapters against real repositories: git here, oak wherever it is installed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from orchard.lab.workers.vcs import GitVcs, Identity, OakVcs, VcsError
from orchard.lab.workers.vcs.oak import leaked_mounts
from tests.lab.lab_helpers import TARGET_FILES, git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "origin", TARGET_FILES)


@pytest.fixture
def vcs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitVcs:
    # A HOME of its own shows that nothing is ever written to the user's git config.
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    return GitVcs(Identity("lab bot", "bot@lab.test"))


def test_clone_at_a_commit_shares_objects_by_hard_links(repo: Path, vcs: GitVcs, tmp_path: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src/alpha.txt").write_text("alpha 2\n")
    git(repo, "commit", "-qam", "second")
    head = vcs.clone(str(repo), tmp_path / "clone", commit=first)
    assert head == first
    assert (tmp_path / "clone/src/alpha.txt").read_text() == "alpha 1\n"
    objects = [p for p in (tmp_path / "clone/.git/objects").rglob("*") if p.is_file() and len(p.parent.name) == 2]
    assert objects and all(p.stat().st_nlink > 1 for p in objects)


def test_head_and_branch_read_from_a_clones_files_are_what_git_says(repo: Path, vcs: GitVcs, tmp_path: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    detached = tmp_path / "detached"
    assert vcs.clone(str(repo), detached, commit=first) == first
    assert vcs.head(detached) == first and vcs.current_branch(detached) is None
    full = tmp_path / "full"
    vcs.clone(str(repo), full)
    (full / "src/alpha.txt").write_text("alpha 2\n")
    second = vcs.commit(full, "second", branch="topic")
    assert second == git(full, "rev-parse", "HEAD").strip() != first
    assert vcs.current_branch(full) == "topic" and vcs.head(full / "src") == second
    git(full, "pack-refs", "--all")  # the branch now lives in packed-refs only
    assert not (full / ".git/refs/heads/topic").exists()
    assert vcs.head(full) == second and vcs.resolve(full, "topic") == second
    # a linked worktree's .git is a file: git itself answers
    git(full, "worktree", "add", "-q", "-b", "side", str(tmp_path / "linked"), first)
    assert vcs.head(tmp_path / "linked") == first and vcs.current_branch(tmp_path / "linked") == "side"
    vcs.ignore_locally(tmp_path / "linked", ["/scratch/"])
    (tmp_path / "linked/scratch").mkdir()
    (tmp_path / "linked/scratch/x").write_text("x\n")
    assert vcs.status(tmp_path / "linked") == []


def test_changes_cover_edits_new_and_deleted_files_and_leave_the_index_alone(
    repo: Path, vcs: GitVcs, tmp_path: Path
) -> None:
    checkout = tmp_path / "clone"
    base = vcs.clone(str(repo), checkout)
    (checkout / "src/alpha.txt").write_text("alpha changed\n")
    (checkout / "src/new.txt").write_text("brand new\n")
    (checkout / "src/gamma.txt").unlink()
    index_before = (checkout / ".git/index").read_bytes()
    changes = vcs.changes(checkout, base)
    assert changes.files == ("src/alpha.txt", "src/gamma.txt", "src/new.txt")
    assert (checkout / ".git/index").read_bytes() == index_before
    assert not list((checkout / ".git").glob("orchard-index-*"))
    # The patch recreates the same tree on a fresh clone of the base.
    other = tmp_path / "other"
    vcs.clone(str(repo), other, commit=base)
    vcs.apply(other, changes.patch)
    assert vcs.changes(other, base).patch == changes.patch
    assert sorted(vcs.status(other)) == ["src/alpha.txt", "src/gamma.txt", "src/new.txt"]


def test_a_patch_that_does_not_apply_names_the_reason(repo: Path, vcs: GitVcs, tmp_path: Path) -> None:
    checkout = tmp_path / "clone"
    vcs.clone(str(repo), checkout)
    with pytest.raises(VcsError, match="patch does not apply|corrupt patch"):
        vcs.apply(checkout, "--- a/src/alpha.txt\n+++ b/src/alpha.txt\n@@ -1 +1 @@\n-nothing here\n+x\n")


def test_commit_push_and_merge_use_the_lab_identity_only_per_command(
    repo: Path, vcs: GitVcs, tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    checkout = tmp_path / "clone"
    vcs.clone(str(remote), checkout)
    (checkout / "src/beta.txt").write_text("beta won\n")
    commit = vcs.commit(checkout, "lab: beta is faster\n\nnumbers here", branch="lab/beta")
    assert git(checkout, "log", "-1", "--format=%an <%ae>|%s").strip() == "lab bot <bot@lab.test>|lab: beta is faster"
    vcs.push(checkout, "lab/beta")
    assert git(remote, "rev-parse", "refs/heads/lab/beta").strip() == commit
    merged = vcs.merge(checkout, "lab/beta", "main", "lab: merge beta")
    assert git(checkout, "rev-parse", "HEAD^2").strip() == commit and merged != commit
    assert not (Path(os.environ["HOME"]) / ".gitconfig").exists()


def test_reset_discards_changes_and_local_ignores_stay_local(repo: Path, vcs: GitVcs, tmp_path: Path) -> None:
    checkout = tmp_path / "clone"
    base = vcs.clone(str(repo), checkout)
    vcs.ignore_locally(checkout, ["/.orchard-report.json", ".aider*"])
    vcs.ignore_locally(checkout, [".aider*"])  # idempotent
    (checkout / ".orchard-report.json").write_text("{}")
    (checkout / ".aider.tags.cache.v4").mkdir()
    assert vcs.status(checkout) == [] and vcs.changes(checkout, base).empty
    (checkout / "src/alpha.txt").write_text("edited\n")
    (checkout / "stray.txt").write_text("x\n")
    vcs.commit(checkout, "a commit a worker should not have made")
    vcs.reset(checkout, base)
    assert vcs.head(checkout) == base and vcs.status(checkout) == []
    assert (checkout / "src/alpha.txt").read_text() == "alpha 1\n" and not (checkout / "stray.txt").exists()
    assert git(checkout, "status", "--porcelain").strip() == ""
    assert ".aider*" in (checkout / ".git/info/exclude").read_text()
    assert (checkout / ".git/info/exclude").read_text().count(".aider*") == 1


def test_resolve_names_a_bad_revision(repo: Path, vcs: GitVcs) -> None:
    assert vcs.resolve(repo, "main") == git(repo, "rev-parse", "main").strip()
    with pytest.raises(VcsError, match="'no-such-branch' is not a branch"):
        vcs.resolve(repo, "no-such-branch")


def test_leaked_oak_mounts_are_found_under_the_workspace_only(tmp_path: Path) -> None:
    table = (
        f"oakfs {tmp_path}/worker-a/target fuse.oakfs rw 0 0\n"
        "oakfs /elsewhere/mount fuse.oakfs rw 0 0\n"
        f"/dev/vda {tmp_path} ext4 rw 0 0\n"
        f"oak-repo {tmp_path}/with\\040space fuse.oakfs rw 0 0\n"
    )
    assert leaked_mounts(table, tmp_path) == [tmp_path / "worker-a/target", tmp_path / "with space"]


@pytest.mark.skipif(shutil.which("oak") is None, reason="no `oak` binary on PATH (Oak is not installable here)")
def test_oak_adapter_round_trip(tmp_path: Path) -> None:
    vcs = OakVcs(Identity())
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "a.txt").write_text("one\n")
    base = vcs.init(origin, "initial")
    clone = tmp_path / "clone"
    assert vcs.clone(str(origin), clone) == base
    (clone / "a.txt").write_text("two\n")
    changes = vcs.changes(clone, base)
    assert changes.files == ("a.txt",) and "+two" in changes.patch
    assert vcs.status(clone)
    assert vcs.commit(clone, "lab: two") != base
    assert vcs.cleanup(tmp_path) == []
