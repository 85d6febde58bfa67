"""Git, driven through its command line.

Every command pins the settings that would change its output (prefixes,
colours, external diff drivers, rename detection) so a user's git config
cannot break a patch, turns hooks and fsmonitor off (a planted hook never
runs in the orchestrator), and the lab's identity is passed with `-c` per
commit, so no configuration file is ever written.

A worker's checkout is foreign: `foreign_changes` reads its files through a
judge-owned repository (`--git-dir` ours, `--work-tree` theirs), with
no system or global configuration, so nothing in the worker's `.git`
(config, hooks, fsmonitor, filter or diff drivers, index) is ever read.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from orchard.lab.workers.vcs.base import Changes, Vcs, VcsError
from orchard.lab.workers.vcs.git_files import own_git_dir, read_head, small_text

# Settings that shape diff and status output, pinned for every command
# through git's GIT_CONFIG_COUNT environment (as if given with `-c`).
_PINNED = {
    "core.quotepath": "off",
    "color.ui": "never",
    "diff.noprefix": "false",
    "diff.mnemonicprefix": "false",
    "advice.detachedHead": "false",
    "commit.gpgsign": "false",
    "core.fsmonitor": "",
    "core.hooksPath": "/dev/null",
}
# Variables that would point git at another repository, index or configuration.
_LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
             "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES", "GIT_CONFIG",
             "GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS")
# A foreign work tree is read with no configuration but the judge clone's own.
_FOREIGN_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_OPTIONAL_LOCKS": "0"}


def _config_env(settings: dict[str, str]) -> dict[str, str]:
    env = {"GIT_CONFIG_COUNT": str(len(settings))}
    for index, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


_PINNED_ENV = _config_env(_PINNED)
_DIFF_FLAGS = (
    "--binary", "--full-index", "--no-renames", "--no-ext-diff", "--no-textconv",
    "--src-prefix=a/", "--dst-prefix=b/",
)


def _excluded(ignore: Sequence[str]) -> list[str]:
    """Gitignore-style globs as pathspecs that leave those paths out (tracked or not)."""
    specs = []
    for pattern in ignore:
        body = pattern.strip("/")
        anchored = "/" in body or pattern.startswith("/")
        where = body if anchored else f"**/{body}"
        specs.append(f":(exclude,glob){where}/**" if pattern.endswith("/") else f":(exclude,glob){where}")
        if not pattern.endswith("/"):
            specs.append(f":(exclude,glob){where}/**")  # a name that may be a directory
    return [":/", *specs] if specs else []


def _split_z(output: bytes) -> list[str]:
    return [part.decode("utf-8", errors="surrogateescape") for part in output.split(b"\0") if part]


class GitVcs(Vcs):
    kind = "git"
    executable = "git"

    def _git(self, checkout: Path | None, *argv: str, env: dict[str, str] | None = None,
             stdin: bytes | None = None) -> bytes:
        return self._run(argv, checkout, env={**self._env(), **(env or {})}, stdin=stdin,
                         drop=_LOCATING).stdout

    def _env(self) -> dict[str, str]:
        identity = self.identity
        return {
            **_PINNED_ENV,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_REPLACE_OBJECTS": "1",  # a planted refs/replace/* never changes what a commit holds
            "GIT_AUTHOR_NAME": identity.name,
            "GIT_AUTHOR_EMAIL": identity.email,
            "GIT_COMMITTER_NAME": identity.name,
            "GIT_COMMITTER_EMAIL": identity.email,
        }

    def clone(self, source: str, dest: Path, commit: str | None = None) -> str:
        # A local source is cloned with hard-linked objects (git's default for paths): cheap, and safe if
        # the source is later repacked. At the source's own head, git's own checkout gives it: one process less.
        dest, source_git = Path(dest), own_git_dir(Path(source))  # None for a URL or a bare repository
        if commit is None or (source_git is not None and read_head(source_git) == commit):
            self._git(None, "clone", "--quiet", str(source), str(dest))
            if commit is not None:  # detached there, as `checkout --detach` leaves it (the index is already it)
                (dest / ".git" / "HEAD").write_text(f"{commit}\n", encoding="ascii")
        else:
            self._git(None, "clone", "--quiet", "--no-checkout", str(source), str(dest))
            self._git(dest, "checkout", "--quiet", "--detach", commit)
        return self.head(dest)

    def reader_clone(self, source: str, dest: Path, commit: str) -> None:
        """An empty repository of the judge's borrowing `source`'s objects (alternates): `foreign_changes` reads
        the base into a private index through it, and what it stages is written here, never into `source`. One
        process (a clone took two, and left hard links to remove); a missing base fails in `read-tree`."""
        objects = own_git_dir(Path(source))
        objects = (objects if objects is not None else Path(source).absolute()) / "objects"
        if not objects.is_dir():
            raise VcsError(f"{source} is not a git repository of the lab's (no objects directory)")
        git_dir = Path(dest) / ".git"
        self._git(None, "init", "--quiet", "--bare", "--template=", str(git_dir))
        (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n", encoding="utf-8")

    def prepare_reference(self, checkout: Path) -> None:
        """Pack every object: a local clone then hard-links one pack instead of each loose object."""
        self._git(checkout, "repack", "-a", "-d", "-q")

    def init(self, path: Path, message: str) -> str:
        self._git(path, "init", "--quiet", "--initial-branch=main")
        self._git(path, "add", "--all")
        self._git(path, "commit", "--quiet", "--allow-empty", "-m", message)
        return self.head(path)

    def head(self, checkout: Path) -> str:
        # A clone's head is read from its files, no process started; anything else (a linked
        # worktree, a subdirectory, an unborn branch) is git's to resolve.
        git_dir = own_git_dir(checkout)
        found = read_head(git_dir) if git_dir is not None else ""
        return found or self._git(checkout, "rev-parse", "HEAD").decode().strip()

    def resolve(self, checkout: Path, rev: str) -> str:
        capture = self._run(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                            checkout, env=self._env(), check=False)
        if capture.returncode != 0:
            raise VcsError(f"{rev!r} is not a branch, tag or commit in {checkout}")
        return capture.stdout_text.strip()

    def status(self, checkout: Path) -> list[str]:
        out = self._git(checkout, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                        "--ignore-submodules=none", env={"GIT_OPTIONAL_LOCKS": "0"})  # never writes the index
        # Entries are "XY path"; a rename carries its source as the next entry.
        paths: list[str] = []
        entries = _split_z(out)
        index = 0
        while index < len(entries):
            entry = entries[index]
            paths.append(entry[3:])
            index += 2 if entry[0] in "RC" else 1
        return paths

    def changes(self, checkout: Path, base: str, ignore: Sequence[str] = ()) -> Changes:
        checkout = Path(checkout)
        git_dir = own_git_dir(checkout) or Path(
            self._git(checkout, "rev-parse", "--absolute-git-dir").decode().strip())
        return self._staged_changes(checkout, git_dir, base, ignore, self.head(checkout), ())

    def foreign_changes(self, clean: Path, work_tree: Path, base: str, ignore: Sequence[str] = (), *,
                        patch: bool = True) -> Changes:
        clean = Path(clean)
        git_dir = clean / ".git"
        where = ("--git-dir", str(git_dir), "--work-tree", str(Path(work_tree)))
        return self._staged_changes(clean, git_dir, base, ignore, read_head(Path(work_tree) / ".git"), where,
                                    _FOREIGN_ENV, patch=patch)

    def _staged_changes(self, cwd: Path, git_dir: Path, base: str, ignore: Sequence[str], head: str,
                        where: Sequence[str], extra_env: dict[str, str] | None = None, *,
                        patch: bool = True) -> Changes:
        # Stage everything into a private copy of the index, so new files are
        # part of the diff and the checkout's own index is left as it was.
        handle, temp_index = tempfile.mkstemp(prefix="orchard-index-", dir=git_dir)
        os.close(handle)
        try:
            index = git_dir / "index"
            if index.exists() and not where:
                # copy2 keeps the index's mtime: git's racy-clean check then still
                # re-reads a file edited within the same second as the checkout
                shutil.copy2(index, temp_index)
            else:
                os.unlink(temp_index)
            env = {**(extra_env or {}), "GIT_INDEX_FILE": temp_index}
            if where:  # a fresh index at the base: every file of the foreign tree is read again
                self._git(cwd, *where, "read-tree", base, env=env)
            self._git(cwd, *where, "add", "--all", env=env)
            paths = ["--", *_excluded(ignore)] if ignore else []
            files = _split_z(self._git(cwd, *where, "diff", "--cached", "--name-only", "-z",
                                       "--no-renames", base, *paths, env=env))
            diff = self._git(cwd, *where, "diff", "--cached", *_DIFF_FLAGS, base, *paths, env=env) if patch else b""
        finally:
            if os.path.exists(temp_index):
                os.unlink(temp_index)
        return Changes(base=base, head=head, files=tuple(files),
                       patch=diff.decode("utf-8", errors="surrogateescape"))

    def commit_shape(self, checkout: Path, rev: str) -> tuple[list[str], str]:
        commit = self.resolve(checkout, rev)
        words = self._git(checkout, "show", "-s", "--format=%P%n%T", commit).decode().split("\n")
        return words[0].split(), words[1].strip()

    def ignored(self, clean: Path, work_tree: Path, paths: Sequence[str]) -> set[str]:
        if not paths:
            return set()
        where = ("--git-dir", str(Path(clean) / ".git"), "--work-tree", str(Path(work_tree)))
        out = self._run([*where, "check-ignore", "--no-index", "-z", "--stdin"], Path(clean),
                        env={**self._env(), **_FOREIGN_ENV}, stdin=b"\0".join(p.encode() for p in paths),
                        check=False, drop=_LOCATING)
        return set(_split_z(out.stdout))

    def apply(self, checkout: Path, patch: str) -> None:
        data = patch.encode("utf-8", errors="surrogateescape")
        self._git(checkout, "apply", "--whitespace=nowarn", "-", stdin=data)

    def commit(self, checkout: Path, message: str, branch: str | None = None, ignore: Sequence[str] = ()) -> str:
        if branch:
            self._git(checkout, "checkout", "--quiet", "-B", branch)
        self._git(checkout, "add", "--all", *(["--", *_excluded(ignore)] if ignore else []))
        self._git(checkout, "commit", "--quiet", "-m", message)
        return self.head(checkout)

    def push(self, checkout: Path, branch: str, remote: str = "origin", as_branch: str | None = None,
             force: bool = False) -> None:
        self._git(checkout, "push", "--quiet", remote,
                  f"{'+' if force else ''}refs/heads/{branch}:refs/heads/{as_branch or branch}")

    def unusable(self, repo: str) -> str | None:
        path = Path(repo)
        if not path.is_dir():
            return None
        if not (path / ".git").exists() and not ((path / "HEAD").is_file() and (path / "objects").is_dir()):
            return ("not a git repository (no .git in it): run `git init` there and commit the code, or give the "
                    "repository's own directory")
        head = self._run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], path, env=self._env(), check=False,
                         drop=_LOCATING)
        if not head.ok:
            return (f"a git repository with no commit yet: commit the code first (`git -C {shlex.quote(repo)} add -A "
                    f"&& git -C {shlex.quote(repo)} commit -m initial`)")
        return None

    def is_working_copy(self, repo: str) -> bool:
        if not Path(repo).is_dir():
            return False
        capture = self._run(["rev-parse", "--is-bare-repository"], Path(repo), env=self._env(), check=False)
        return capture.ok and capture.stdout_text.strip() == "false"

    def remote_head(self, checkout: Path, branch: str, remote: str = "origin") -> str | None:
        out = self._git(checkout, "ls-remote", remote, f"refs/heads/{branch}").decode().split()
        return out[0] if out else ""

    def describe(self, repo: Path, rev: str) -> str | None:
        shown = self._run(["show", "-s", "--format=%an <%ae>, %cr: %s", "--end-of-options", rev], repo,
                          env=self._env(), check=False, drop=_LOCATING)
        return shown.stdout_text.strip() or None if shown.ok else None

    def merge(self, checkout: Path, branch: str, into: str, message: str) -> str:
        self._git(checkout, "checkout", "--quiet", into)
        self._git(checkout, "merge", "--quiet", "--no-ff", "-m", message, branch)
        return self.head(checkout)

    def current_branch(self, checkout: Path) -> str | None:
        git_dir = own_git_dir(checkout)
        if git_dir is not None:  # a clone's HEAD read from its file; anything unclear is git's to answer
            try:
                head = small_text(git_dir / "HEAD")
            except (OSError, UnicodeDecodeError):
                head = "ref: "
            if not head.startswith("ref: "):
                return None  # detached
            branch = head.removeprefix("ref: refs/heads/")
            if branch != head and branch and ".." not in branch:
                return branch
        result = self._run(["symbolic-ref", "--quiet", "--short", "HEAD"], checkout, env=self._env(), check=False)
        return result.stdout_text.strip() or None if result.ok else None

    def revert(self, checkout: Path, commit: str, message: str) -> str:
        parents = self._git(checkout, "rev-list", "--parents", "-n", "1", commit).decode().split()
        mainline = ["-m", "1"] if len(parents) > 2 else []
        self._git(checkout, "revert", "--no-edit", "--no-commit", *mainline, commit)
        self._git(checkout, "commit", "--quiet", "-m", message)
        return self.head(checkout)

    def contains(self, checkout: Path, commit: str, branch: str) -> bool:
        if self._run(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], checkout,
                     env=self._env(), check=False).returncode != 0:
            return False
        return self._run(["merge-base", "--is-ancestor", commit, f"refs/heads/{branch}"], checkout,
                         env=self._env(), check=False).returncode == 0

    def reset(self, checkout: Path, commit: str) -> None:
        self._git(checkout, "checkout", "--quiet", "--force", "--detach", commit)
        self._git(checkout, "clean", "--quiet", "--force", "-d")

    def ignore_locally(self, checkout: Path, patterns: Sequence[str]) -> None:
        if not patterns:
            return
        git_dir = own_git_dir(checkout)
        exclude = git_dir / "info" / "exclude" if git_dir is not None else Path(checkout) / self._git(
            checkout, "rev-parse", "--git-path", "info/exclude").decode().strip()
        exclude.parent.mkdir(parents=True, exist_ok=True)
        present = exclude.read_text().splitlines() if exclude.exists() else []
        missing = [pattern for pattern in patterns if pattern not in present]
        if missing:
            with exclude.open("a", encoding="utf-8") as handle:
                if present and present[-1] != "":
                    handle.write("\n")
                handle.write("".join(f"{pattern}\n" for pattern in missing))

    def cleanup(self, root: Path) -> list[str]:
        """Remove private index copies a killed `changes()` left, and prune dead worktrees."""
        done: list[str] = []
        root = Path(root)
        for git_dir in sorted([*root.glob("*/.git"), *root.glob("*/*/.git")]):
            for stale in git_dir.glob("orchard-index-*"):
                stale.unlink(missing_ok=True)
                done.append(f"removed {stale}")
            self._git(git_dir.parent, "worktree", "prune")
        return done
