"""What the lab needs from a version-control system, and nothing more.

Workers get their own checkouts; the lab reads what they changed against a
recorded base, applies ready patches, and lands wins as described commits.
Each VCS adapter implements these operations with its own commands; the
rest of the lab never runs a VCS command itself.
"""

from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchard.errors import OrchardError
from orchard.process import Capture, command_display, run

# VCS output is data here (diffs, file lists), not something an agent reads:
# keep all of it.
UNLIMITED_OUTPUT = 1 << 40
VCS_TIMEOUT_S = 1800.0
SUMMARY_CHARS = 160


class VcsError(OrchardError):
    """A VCS command failed; the message carries the command and its stderr."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr

    @property
    def summary(self) -> str:
        """One short line for reasons and reports: the VCS's own error line, not its whole stderr."""
        lines = [line.strip().removeprefix("remote:").strip() for line in (self.stderr or str(self)).splitlines()]
        lines = [line for line in lines if line]
        wanted = ("error:", "fatal:", "! [", "hint:")
        fallback = lines[0] if lines else ""
        picked = next((line for prefix in wanted for line in lines if line.startswith(prefix)), fallback)
        return picked if len(picked) <= SUMMARY_CHARS else picked[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " ..."


@dataclass(frozen=True)
class Identity:
    """Author of the lab's commits, passed per command (never written to any config)."""

    name: str = "orchard lab"
    email: str = "lab@orchard.invalid"


@dataclass(frozen=True)
class Changes:
    """What a checkout holds beyond its base: the patch and the files it touches."""

    base: str
    head: str  # the checkout's current commit: differs from base if someone committed
    files: tuple[str, ...]
    patch: str

    @property
    def empty(self) -> bool:
        return not self.files and self.head == self.base


class Vcs(ABC):
    """One version-control system, driven through its command line."""

    kind: str = ""
    executable: str = ""

    def __init__(self, identity: Identity | None = None) -> None:
        self.identity = identity or Identity()

    def _run(
        self,
        argv: Sequence[str],
        cwd: Path | None,
        *,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        check: bool = True,
        drop: Sequence[str] = (),
    ) -> Capture:
        merged = {key: value for key, value in os.environ.items() if key not in drop}
        merged.update({"LC_ALL": "C", "LANG": "C"})
        merged.update(env or {})
        capture = run(
            [self.executable, *argv],
            cwd=cwd,
            env=merged,
            timeout_s=VCS_TIMEOUT_S,
            admitted_chars=UNLIMITED_OUTPUT,
            stdin=stdin,
        )
        if check and not capture.ok:
            what = "timed out" if capture.timed_out else f"exited {capture.returncode}"
            detail = (capture.stderr_text or capture.stdout_text).strip()
            where = f" in {cwd}" if cwd is not None else ""
            raise VcsError(f"{command_display([self.executable, *argv])} {what}{where}: {detail}", detail)
        return capture

    @abstractmethod
    def clone(self, source: str, dest: Path, commit: str | None = None) -> str:
        """Clone `source` into `dest` at `commit` (default: its default branch); return the head.

        Local sources must be cloned cheaply (shared or hard-linked objects).
        """

    @abstractmethod
    def prepare_reference(self, checkout: Path) -> None:
        """Make a clone cheap to clone from locally: the lab's reference clones get this once."""

    @abstractmethod
    def init(self, path: Path, message: str) -> str:
        """Make `path` a repository holding its current files as one commit; return it."""

    @abstractmethod
    def head(self, checkout: Path) -> str:
        """The commit the checkout is at."""

    @abstractmethod
    def resolve(self, checkout: Path, rev: str) -> str:
        """The full commit id of `rev` (a branch, tag or commit) in the checkout."""

    @abstractmethod
    def status(self, checkout: Path) -> list[str]:
        """Paths with uncommitted changes, untracked files included (ignored files not)."""

    @abstractmethod
    def changes(self, checkout: Path, base: str, ignore: Sequence[str] = ()) -> Changes:
        """Everything the checkout holds beyond `base`: commits, edits, new files.

        Paths matching the gitignore-style globs of `ignore` are build outputs, never
        part of the change, even when the repository tracks them (an sdist's egg-info).
        """

    def reader_clone(self, source: str, dest: Path, commit: str) -> None:
        """A clone of `source` to read a foreign work tree through (`foreign_changes`); files optional."""
        self.clone(source, dest, commit=commit)

    def foreign_changes(self, clean: Path, work_tree: Path, base: str, ignore: Sequence[str] = (), *,
                        patch: bool = True) -> Changes:
        """What a foreign work tree (a worker's) holds beyond `base`, read through `clean`, a clone of ours at `base`.

        `patch=False`: only the changed files are wanted (an adapter may then skip the diff).
        Nothing in the work tree's own VCS directory is read or run. This
        default copies the work tree's files (its VCS directory left out)
        into `clean` and asks `changes` there; an adapter may do better.
        """
        clean, work_tree = Path(clean), Path(work_tree)
        skip = {".git", f".{self.kind}"}
        for child in clean.iterdir():
            if child.name not in skip:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        for child in work_tree.iterdir():
            if child.name in skip:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.copytree(child, clean / child.name, symlinks=True)
            else:
                shutil.copy2(child, clean / child.name, follow_symlinks=False)
        found = self.changes(clean, base, ignore)
        return Changes(base=found.base, head="", files=found.files, patch=found.patch)

    def commit_shape(self, checkout: Path, rev: str) -> tuple[list[str], str]:
        """A commit's parents and tree id (empty when this VCS cannot tell)."""
        return [], ""

    def ignored(self, clean: Path, work_tree: Path, paths: Sequence[str]) -> set[str]:
        """Which of `paths` (relative to the foreign `work_tree`) the ignore rules leave out."""
        return set()

    @abstractmethod
    def apply(self, checkout: Path, patch: str) -> None:
        """Apply a unified diff to the working files; VcsError naming the reason if it does not apply."""

    @abstractmethod
    def commit(self, checkout: Path, message: str, branch: str | None = None, ignore: Sequence[str] = ()) -> str:
        """Commit every change but build outputs (`ignore`), on a new `branch` when given; return it."""

    @abstractmethod
    def push(self, checkout: Path, branch: str, remote: str = "origin", as_branch: str | None = None,
             force: bool = False) -> None:
        """Publish `branch` to `remote` (as `as_branch` there when given; `force`: even if it moved elsewhere)."""

    def unusable(self, repo: str) -> str | None:
        """Why the local directory `repo` cannot be cloned by a lab (not a repository, no commit), in words a user
        acts on; None when it can be, or for anything else (a URL: the clone says what is wrong)."""
        return None

    def is_working_copy(self, repo: str) -> bool:
        """Whether `repo` is a local repository with checked-out files (its checked-out branch refuses pushes)."""
        return False

    def remote_head(self, checkout: Path, branch: str, remote: str = "origin") -> str | None:
        """The commit `branch` points to in `remote`; None when this VCS cannot tell."""
        return None

    def describe(self, repo: Path, rev: str) -> str | None:
        """Who made commit `rev` of the local repository `repo`, when, and its subject; None when unknown."""
        return None

    @abstractmethod
    def merge(self, checkout: Path, branch: str, into: str, message: str) -> str:
        """Merge `branch` into `into` in the checkout; return the new head."""

    @abstractmethod
    def current_branch(self, checkout: Path) -> str | None:
        """The branch the checkout is on (None when detached)."""

    @abstractmethod
    def revert(self, checkout: Path, commit: str, message: str) -> str:
        """Undo `commit` (a merge: against its first parent) with a new commit; return it."""

    @abstractmethod
    def contains(self, checkout: Path, commit: str, branch: str) -> bool:
        """Whether `branch` exists and already holds `commit` (landing steps are idempotent)."""

    @abstractmethod
    def reset(self, checkout: Path, commit: str) -> None:
        """Put the checkout back at `commit` with no changes (ignored build outputs may stay)."""

    @abstractmethod
    def ignore_locally(self, checkout: Path, patterns: Sequence[str]) -> None:
        """Ignore `patterns` in this checkout only, without changing any tracked file."""

    @abstractmethod
    def cleanup(self, root: Path) -> list[str]:
        """End what this VCS may have leaked under `root` (stale state, mounts); return what was done."""
