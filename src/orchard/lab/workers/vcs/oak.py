"""Oak, driven through the commands the seed orchestrator and harness use.

Oak is not installable on this machine, so this adapter follows the seed's
command list exactly (`oak clone / status / diff / commit / desc / push /
merge / switch / hash`, `oak mount` and `oak mount end`) and is exercised by
tests only where an `oak` binary is on PATH. Where the seed shows no command
for an operation, the adapter says so instead of guessing:

- there is no documented way to discard changes, so `reset` raises
  `ResetUnsupported` and the workspace re-clones the checkout;
- patches are applied with `git apply`, which works as a plain patch tool
  outside git repositories;
- revisions other than the current head cannot be resolved.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from orchard.lab.workers.vcs.base import Changes, Vcs, VcsError
from orchard.lab.workers.vcs.git import GitVcs

_DIFF_PATH = re.compile(r"^\+\+\+ b/(.+)$|^--- a/(.+)$", re.MULTILINE)


class ResetUnsupported(VcsError):
    """This VCS cannot discard a checkout's changes in place: re-clone it."""


def leaked_mounts(mounts_table: str, root: Path) -> list[Path]:
    """Oak mounts (fstype or source naming oakfs) under `root`, from a /proc/mounts text."""
    root = Path(root).resolve()
    found: list[Path] = []
    for line in mounts_table.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        source, mountpoint, fstype = fields[0], fields[1], fields[2]
        if "oakfs" not in (source + " " + fstype).lower():
            continue
        point = Path(mountpoint.replace("\\040", " "))
        if point == root or root in point.parents:
            found.append(point)
    return found


class OakVcs(Vcs):
    kind = "oak"
    executable = "oak"

    def _oak(self, checkout: Path | None, *argv: str, stdin: bytes | None = None) -> str:
        return self._run(list(argv), checkout, stdin=stdin).stdout_text

    def clone(self, source: str, dest: Path, commit: str | None = None) -> str:
        self._oak(None, "clone", str(source), str(dest))
        if commit is not None and commit != self.head(dest):
            self._oak(dest, "switch", commit)
        return self.head(dest)

    def prepare_reference(self, checkout: Path) -> None:
        """Oak has no documented packing command; its clones are used as they are."""

    def init(self, path: Path, message: str) -> str:
        self._oak(path, "init", ".")
        self._oak(path, "commit")
        self._oak(path, "desc", message)
        return self.head(path)

    def head(self, checkout: Path) -> str:
        return self._oak(checkout, "hash").strip()

    def resolve(self, checkout: Path, rev: str) -> str:
        head = self.head(checkout)
        if rev in ("", "HEAD", head):
            return head
        raise VcsError(f"oak: cannot resolve {rev!r}: the oak commands orchard knows only report the head")

    def status(self, checkout: Path) -> list[str]:
        data = json.loads(self._oak(checkout, "status", "--json") or "{}")
        entries = data.get("changes") or data.get("files") or []
        return [entry["path"] if isinstance(entry, dict) else str(entry) for entry in entries]

    def changes(self, checkout: Path, base: str, ignore: Sequence[str] = ()) -> Changes:
        # Workers must not commit; a moved head is reported through `head`.
        patch = self._oak(checkout, "diff")
        files = sorted({new or old for new, old in _DIFF_PATH.findall(patch)})
        return Changes(base=base, head=self.head(checkout), files=tuple(files), patch=patch)

    def apply(self, checkout: Path, patch: str) -> None:
        git = shutil.which("git")
        if git is None:
            raise VcsError("oak: applying a patch needs `git apply`, and git is not on PATH")
        GitVcs(self.identity).apply(checkout, patch)

    def commit(self, checkout: Path, message: str, branch: str | None = None, ignore: Sequence[str] = ()) -> str:
        # Oak names the branch of a commit itself (`oak status` reports it).
        self._oak(checkout, "commit")
        self._oak(checkout, "desc", message)
        return self.head(checkout)

    def push(self, checkout: Path, branch: str, remote: str = "origin", as_branch: str | None = None,
             force: bool = False) -> None:
        self._oak(checkout, "push")

    def merge(self, checkout: Path, branch: str, into: str, message: str) -> str:
        self._oak(checkout, "switch", into)
        self._oak(checkout, "merge", branch)
        self._oak(checkout, "desc", message)
        return self.head(checkout)

    def current_branch(self, checkout: Path) -> str | None:
        status = json.loads(self._oak(checkout, "status", "--json") or "{}")
        return status.get("branch") if isinstance(status, dict) else None

    def revert(self, checkout: Path, commit: str, message: str) -> str:
        raise VcsError("oak: the seed's command list has no revert; undo the merge by hand "
                       f"(commit {commit}) and journal it")

    def contains(self, checkout: Path, commit: str, branch: str) -> bool:
        # oak can only name its current head (see the module docstring)
        return self.head(checkout) == commit

    def reset(self, checkout: Path, commit: str) -> None:
        raise ResetUnsupported("oak has no documented command to discard changes; re-clone instead")

    def ignore_locally(self, checkout: Path, patterns: Sequence[str]) -> None:
        """Oak has no documented per-checkout ignore file: the collector filters these paths."""

    def mount_end(self, directory: Path, *, force: bool = False) -> None:
        self._oak(None, "mount", "end", str(directory), *(["-f"] if force else []))

    def cleanup(self, root: Path) -> list[str]:
        """End oak mounts left under `root`; a dirty mount is committed and pushed first."""
        done: list[str] = []
        for point in leaked_mounts(Path("/proc/mounts").read_text(), root):
            if self.status(point):
                self.commit(point, "orchard: changes found in a leaked mount")
                self.push(point, "")
                done.append(f"committed and pushed {point}")
            self.mount_end(point)
            done.append(f"ended mount {point}")
        return done
