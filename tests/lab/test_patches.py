"""A patch read file by file: the ignore globs match as git's own pathspecs do, and leaving files out of a
patch keeps every other section byte for byte."""

from __future__ import annotations

import subprocess
from pathlib import Path

from orchard.lab.config.sections import DEFAULT_IGNORES
from orchard.lab.workers.vcs.git import _excluded
from orchard.lab.workers.workspace.patches import ignored, patch_files, section_paths, sections, without
from tests.lab.lab_helpers import git

PATTERNS = [*DEFAULT_IGNORES, "/top-only.txt", "docs/*.md", "**/gen/", "a/**/b.txt", "*.[oa]", "[!x]y.txt",
            "scratch", ".aider*"]
PATHS = [
    "src/main.py", "pkg.egg-info/PKG-INFO", "deep/pkg.egg-info/SOURCES.txt", "egg-info/x", "src/egg-info.txt",
    ".venv/bin/python", "sub/.venv/x", "venv", "src/__pycache__/m.pyc", "m.pyc", "m.pyco", "build/lib/x.so",
    "src/build.py", "rebuild/x", "dist/p.tar.gz", "target/release/app", "node_modules/a/index.js",
    "top-only.txt", "sub/top-only.txt", "docs/a.md", "docs/sub/a.md", "x/docs/a.md", "gen/out.c", "q/gen/out.c",
    "a/b.txt", "a/x/y/b.txt", "b.txt", "lib.o", "lib.a", "lib.so", "ay.txt", "xy.txt",
    "scratch/notes", "sub/scratch", ".aider.chat.history.md", "sub/.aider.tags", "my file.txt",
]


def test_the_ignore_globs_match_as_the_git_adapters_pathspecs(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for path in PATHS:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        if not (repo / path).is_dir():
            (repo / path).write_text("x\n")
    git(repo, "add", "-A", "--force")
    for pattern in PATTERNS:
        kept = set(git(repo, "ls-files", "-z", "--", *_excluded([pattern])).split("\0")) - {""}
        tracked = set(git(repo, "ls-files", "-z").split("\0")) - {""}
        assert {p for p in tracked if ignored(p, [pattern])} == tracked - kept, pattern


def _section(path: str, line: str = "x") -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..587be6b\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1 @@\n+{line}\n")


def test_without_leaves_out_whole_sections_and_keeps_the_rest_byte_for_byte() -> None:
    kept = _section("src/main.py") + _section("my file b/x.txt", "diff --git a/fake b/fake")
    patch = _section("pkg.egg-info/PKG-INFO") + kept + _section("build/out.txt")
    assert [section_paths(s) for s in sections(patch)] == [
        ("pkg.egg-info/PKG-INFO",), ("src/main.py",), ("my file b/x.txt",), ("build/out.txt",)]
    assert without(patch, DEFAULT_IGNORES) == kept
    assert patch_files(without(patch, DEFAULT_IGNORES)) == ["my file b/x.txt", "src/main.py"]


def test_quoted_and_renamed_paths_are_read_as_git_writes_them(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "build").mkdir()
    (repo / "build" / "café.txt").write_text("one\n")
    (repo / "old.txt").write_text("a\nb\nc\nd\n")
    git(repo, "add", "-A", "--force")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (repo / "build" / "café.txt").write_text("two\n")
    git(repo, "mv", "old.txt", "new.txt")
    patch = subprocess.run(["git", "diff", "--cached", "-M", "HEAD"], cwd=repo, capture_output=True, text=True,
                           check=True).stdout + subprocess.run(["git", "diff"], cwd=repo, capture_output=True,
                                                               text=True, check=True).stdout
    assert '"a/build/caf\\303\\251.txt"' in patch  # git quotes it
    assert sorted(p for s in sections(patch) for p in section_paths(s)) == ["build/café.txt", "new.txt", "old.txt"]
    assert "café" not in without(patch, ["build/"]) and "rename from old.txt" in without(patch, ["build/"])
