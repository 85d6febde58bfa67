"""The workspace: `orchard init`, its layout, and worker checkouts at recorded bases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchard.cli import cli
from orchard.errors import UsageError
from orchard.lab.config.orchard_toml import load
from orchard.lab.records.worker import check_name
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import git


def _init(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["init", *args])
    return result.exit_code, result.output


def test_init_lays_out_the_workspace_with_a_readable_config(
    tmp_path: Path, target_repo: Path, bench_repo: Path
) -> None:
    config = tmp_path / "mine.toml"
    config.write_text('[target]\nbuild = "make"\nbinary = "out/app"\n[launcher]\nname = "codex"\n')
    code, output = _init(str(tmp_path / "lab"), "--target", str(target_repo), "--bench", str(bench_repo),
                         "--config", str(config))
    assert code == 0, output
    root = tmp_path / "lab"
    for part in ("orchard.toml", "prompts", "logs", "results", "bench/bench.py", "judge/target/README"):
        assert (root / part).exists(), part
    loaded = load(root / "orchard.toml")
    assert loaded.target.repo == str(target_repo) and loaded.bench.repo == str(bench_repo)
    assert loaded.target.build == "make" and loaded.launcher.name == "codex"
    head = git(target_repo, "rev-parse", "HEAD").strip()
    assert head in output and f"orchard run {root}" in output


def test_init_refuses_a_non_empty_directory_and_changes_nothing(tmp_path: Path, target_repo: Path) -> None:
    root = tmp_path / "lab"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    code, output = _init(str(root), "--target", str(target_repo))
    assert code == 2 and "not an empty directory" in output
    assert [p.name for p in root.iterdir()] == ["notes.txt"]


def test_init_with_an_unclonable_target_leaves_nothing_behind(tmp_path: Path) -> None:
    code, output = _init(str(tmp_path / "lab"), "--target", str(tmp_path / "no-such-repo"))
    assert code == 2 and "target.repo" in output and "cannot clone" in output
    assert not (tmp_path / "lab").exists()


def test_init_with_a_bad_config_names_every_problem_and_creates_nothing(
    tmp_path: Path, target_repo: Path
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[workers]\ncount = 0\n[launcher]\nnme = "claude"\n')
    code, output = _init(str(tmp_path / "lab"), "--target", str(target_repo), "--config", str(config))
    assert code == 2
    assert "workers.count: 0 is below the minimum" in output and "launcher.nme: unknown key" in output
    assert not (tmp_path / "lab").exists()


def test_without_a_bench_repo_the_suite_file_becomes_the_lab_bench(tmp_path: Path, target_repo: Path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites/speed.toml").write_text("[scenario]\n")
    config = tmp_path / "lab.toml"
    config.write_text('[bench]\nsuite = "suites/speed.toml"\n')
    code, output = _init(str(tmp_path / "lab"), "--target", str(target_repo), "--config", str(config))
    assert code == 0, output
    workspace = Workspace.open(tmp_path / "lab")
    assert workspace.config.bench.suite == "speed.toml"
    assert (workspace.bench_dir / "speed.toml").read_text() == "[scenario]\n"
    assert git(workspace.bench_dir, "status", "--porcelain") == ""
    checkout = workspace.setup_worker("a")
    assert workspace.suite(checkout.worker.bench_dir) == checkout.worker.bench_dir / "speed.toml"
    assert (checkout.worker.bench_dir / "speed.toml").is_file()


def test_missing_suite_file_is_named(tmp_path: Path, target_repo: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text('[bench]\nsuite = "nowhere.toml"\n')
    code, output = _init(str(tmp_path / "lab"), "--target", str(target_repo), "--config", str(config))
    assert code == 2 and "bench.suite 'nowhere.toml': no such file" in output


def test_workers_get_clones_at_the_recorded_bases_and_are_recycled(
    make_workspace: Callable[..., Workspace], target_repo: Path
) -> None:
    workspace = make_workspace('[target]\nbinary = "src/alpha.txt"\n')
    base = workspace.target_base()
    git(target_repo, "commit", "-q", "--allow-empty", "-m", "later")  # the lab's base does not move
    first, second = workspace.setup_workers(["one", "two"])
    for checkout in (first, second):
        worker = checkout.worker
        assert checkout.target_base == base and git(worker.target_dir, "rev-parse", "HEAD").strip() == base
        assert git(worker.bench_dir, "rev-parse", "HEAD").strip() == checkout.bench_base
        assert worker.root == workspace.root / f"worker-{worker.name}"
    assert workspace.binary(first.worker) == first.worker.target_dir / "src/alpha.txt"
    # The reference clone is packed once; each worker's clone hard-links that pack.
    objects = first.worker.target_dir / ".git/objects"
    packs = list(objects.glob("pack/*.pack"))
    assert len(packs) == 1 and packs[0].stat().st_nlink >= 3
    assert not [p for p in objects.iterdir() if len(p.name) == 2]
    assert [w.name for w in workspace.workers()] == ["one", "two"]
    # A recycled worker starts clean, whatever the last experiment left.
    (first.worker.target_dir / "src/alpha.txt").write_text("dirty\n")
    (first.worker.target_dir / "leftover.txt").write_text("x\n")
    first.worker.report_path.write_text("{}")
    again = workspace.setup_worker("one")
    assert git(again.worker.target_dir, "status", "--porcelain", "--ignored") == ""
    assert not again.worker.report_path.exists()
    workspace.remove_worker("two")
    assert [w.name for w in workspace.workers()] == ["one"]


def test_open_refuses_a_directory_that_is_not_a_workspace(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not an orchard workspace"):
        Workspace.open(tmp_path)


def test_names_that_cannot_be_paths_or_windows_are_refused() -> None:
    assert check_name("worker", "w-1.a_b") == "w-1.a_b"
    for bad in ("", "../up", "a/b", "a:b", "-x", "x" * 65, "a b"):
        with pytest.raises(UsageError):
            check_name("worker", bad)


def test_the_tmux_socket_is_private_to_the_workspace(make_workspace: Callable[..., Workspace]) -> None:
    one, two = make_workspace(name="one"), make_workspace(name="two")
    assert one.tmux_socket != two.tmux_socket and one.tmux_socket.startswith("orchard-")
    assert Workspace.open(one.root).tmux_socket == one.tmux_socket
