"""Generated repositories for the core lane, built once and cached by content hash.

A `RepoSpec` (file count, large binary files, history length) fully decides
the repository: file contents come from a seeded generator and every commit
is made by the harness's git under the pinned environment (fixed author and
dates), so the same spec always yields the same commit id. The cache key is
the sha256 of the spec and the generator version; the built repository
records its head commit, which is checked before each reuse (a cache entry
whose head differs is rebuilt). Builds go to a temporary directory that is
renamed into place, so a crash or a concurrent campaign never leaves a
half-built entry behind.

`typical_edit` is what an agent's change looks like: a few files changed (one
in two places), one added, one renamed, one deleted. It returns what any
faithful status and diff must mention: every changed path and the unified
hunk header of every change (computed here with difflib, not by git).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import random
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from orchard.bench.lanes.remotes import harness
from orchard.errors import FixtureError

GENERATOR_VERSION = 2  # 2: packed in the foreground (1 left it to a detached auto gc)
LINES_PER_FILE = 30
FILES_PER_DIR = 50
DIRS_PER_PACKAGE = 20
HISTORY_TOUCHES = 3  # files each later history commit changes
MIB = 1024 * 1024
MANIFEST = "orchard-fixture.json"
BUILD_TIMEOUT_S = 1800.0  # adding 50,000 files on a busy 2-core machine took over 2 minutes


@dataclass(frozen=True)
class RepoSpec:
    """What a generated repository holds; equal specs give identical repositories."""

    files: int
    binaries: int = 0
    binary_mib: int = 0
    history: int = 10  # commits, the first of which adds everything

    @property
    def label(self) -> str:
        base = f"files-{self.files}"
        return base + (f"+bin-{self.binaries}x{self.binary_mib}MiB" if self.binaries else "")

    @property
    def key(self) -> str:
        text = json.dumps({**asdict(self), "generator": GENERATOR_VERSION}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class GeneratedRepo:
    spec: RepoSpec
    path: Path  # a non-bare repository, clean, at `head`
    head: str
    built: bool  # False when it came from the cache

    @property
    def fixture_id(self) -> str:
        return f"core-{self.spec.label}-{self.spec.key}"


def text_path(index: int) -> str:
    package, rest = divmod(index, FILES_PER_DIR * DIRS_PER_PACKAGE)
    return f"src/p{package:03d}/d{rest // FILES_PER_DIR:02d}/f{index:06d}.txt"


def text_content(index: int, revision: int = 0) -> str:
    lines = [
        f"file {index} line {line} rev {revision if line == LINES_PER_FILE // 2 else 0}"
        for line in range(LINES_PER_FILE)
    ]
    return "\n".join(lines) + "\n"


def _write(root: Path, relative: str, data: str | bytes) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


def _build(spec: RepoSpec, target: Path, git: str, env: Mapping[str, str]) -> str:
    def run(*argv: str) -> str:
        return harness([*builder, *argv], target, env, BUILD_TIMEOUT_S)

    # No automatic gc: a detached `gc --auto` would outlive the build and repack
    # the objects while a checkout is being cloned from them. One explicit gc
    # at the end packs everything in the foreground instead.
    builder = [git, "-c", "gc.auto=0"]
    target.mkdir(parents=True)
    for index in range(spec.files):
        _write(target, text_path(index), text_content(index))
    for index in range(spec.binaries):
        _write(target, f"assets/blob{index:02d}.bin", random.Random(index).randbytes(spec.binary_mib * MIB))
    run("init", "-q", "-b", "main")
    run("add", "-A")
    run("commit", "-q", "-m", f"generated repository {spec.label}")
    for revision in range(1, spec.history):
        touched = [(revision * 7919 + k * 104729) % spec.files for k in range(HISTORY_TOUCHES)]
        for index in touched:
            _write(target, text_path(index), text_content(index, revision))
        run("commit", "-q", "-a", "-m", f"history commit {revision}: touch {len(touched)} files")
    run("gc", "-q", "--prune=now")
    return run("rev-parse", "HEAD").strip()


def ensure(spec: RepoSpec, cache: Path, git: str, env: Mapping[str, str]) -> GeneratedRepo:
    """The cached repository for `spec`, built first if absent or not what it claims."""
    if spec.files < 8:
        raise FixtureError(f"a core fixture needs at least 8 files, not {spec.files}")
    entry = cache / f"{spec.label}-{spec.key}"
    manifest = entry / MANIFEST
    if manifest.is_file():
        recorded = json.loads(manifest.read_text()).get("head")
        try:
            head = harness([git, "rev-parse", "HEAD"], entry / "repo", env).strip()
        except FixtureError:
            head = None
        if head and head == recorded:
            return GeneratedRepo(spec, entry / "repo", head, built=False)
        shutil.rmtree(entry, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{spec.label}-", dir=cache))
    try:
        head = _build(spec, scratch / "repo", git, env)
        (scratch / MANIFEST).write_text(
            json.dumps({"spec": asdict(spec), "generator": GENERATOR_VERSION, "head": head}) + "\n"
        )
        try:
            os.rename(scratch, entry)
        except OSError:  # another campaign finished the same entry first: use it
            if not (entry / MANIFEST).is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return GeneratedRepo(spec, entry / "repo", head, built=True)


@dataclass(frozen=True)
class Edit:
    """What a typical agent edit changed, and what an honest status and diff must mention."""

    modified: tuple[str, ...]
    added: str
    renamed: tuple[str, str]
    deleted: str
    hunk_headers: tuple[str, ...]  # "@@ -a,b +c,d @@", as unified diff writes them

    @property
    def paths(self) -> tuple[str, ...]:
        return (*self.modified, self.added, *self.renamed, self.deleted)


def _hunk_headers(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), n=3)
    return [line.split(" @@", 1)[0] + " @@" for line in diff if line.startswith("@@")]


def typical_edit(spec: RepoSpec, workspace: Path) -> Edit:
    """Apply the edit to a checkout of `spec` (plain file operations, as an agent's tools do)."""
    pick = [spec.files * k // 7 for k in range(1, 6)]
    modified = tuple(text_path(index) for index in pick[:3])
    headers: list[str] = []
    for number, path in enumerate(modified):
        before = (workspace / path).read_text()
        lines = before.splitlines(keepends=True)
        lines[4] = f"edited by the agent ({number})\n"
        if number == 0:  # one file changed in two places: two hunks
            lines[LINES_PER_FILE - 3] = "second edit in the same file\n"
        after = "".join(lines)
        (workspace / path).write_text(after)
        headers += _hunk_headers(before, after)
    added = "src/added_by_agent.txt"
    added_text = "".join(f"new line {line}\n" for line in range(12))
    _write(workspace, added, added_text)
    headers += _hunk_headers("", added_text)
    old = text_path(pick[3])
    new = f"src/renamed/{Path(old).name}"
    (workspace / new).parent.mkdir(parents=True, exist_ok=True)
    os.rename(workspace / old, workspace / new)
    deleted = text_path(pick[4])
    headers += _hunk_headers((workspace / deleted).read_text(), "")
    (workspace / deleted).unlink()
    return Edit(modified, added, (old, new), deleted, tuple(headers))
