"""The lab's directory: its layout, the reference clones, and worker checkouts.

```
<workspace>/
  orchard.toml   prompts/   logs/   results/
  bench/                  the lab's own harness clone (judging, baselines)
  judge/target/           the lab's own target clone; workers clone from it
  judge/base-<commit>/    the judge's baseline builds, one per base commit
  judge/bench-views/      the bench without its held-out inputs, one per bench base (bench_view.py)
  worker-<name>/target/   that worker's target clone (it edits here), fresh for every experiment
  worker-<name>/bench/    that worker's harness (it measures here): a fresh copy of the bench's view
  worker-<name>/home/     its private HOME and TMPDIR (tmp/), empty at every experiment's start
```

Every path is computed from the workspace root when it is needed, never
stored, so a workspace can be moved or opened from anywhere. Worker clones
are made from the lab's local reference clones, which keeps them cheap: the
reference clones are packed once, a worker's clone hard-links that pack,
and only the working files are written.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.config import orchard_toml as config_module
from orchard.lab.config import rendered as config_file
from orchard.lab.config.orchard_toml import Config
from orchard.lab.config.sections import CONFIG_NAME
from orchard.lab.records.worker import BASELINE_COPY, REPORT_NAME, WorkerCheckout, WorkerDir, check_name
from orchard.lab.text import a_few, visible
from orchard.lab.workers.vcs import Identity, Vcs, VcsError, get_vcs
from orchard.lab.workers.workspace.bench_view import give_bench

BUILTIN_BENCH_IGNORES = ("results/", "__pycache__/", "*.pyc")


class Workspace:
    """One lab directory. Use `Workspace.create` or `Workspace.open`."""

    def __init__(self, root: Path, config: Config) -> None:
        self.root = Path(root).resolve()
        self.config = config
        identity = Identity(config.lab.author_name, config.lab.author_email)
        self.target_vcs: Vcs = get_vcs(config.target.vcs, identity)
        self.bench_vcs: Vcs = get_vcs(config.bench.vcs, identity)

    # -- layout ---------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def prompts_dir(self) -> Path:
        return self.root / "prompts"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    @property
    def bench_dir(self) -> Path:
        return self.root / "bench"

    @property
    def judge_dir(self) -> Path:
        return self.root / "judge"

    @property
    def reference_target(self) -> Path:
        """The lab's own target clone: base of every worker clone and of the baseline build."""
        return self.judge_dir / "target"

    @property
    def executor_dir(self) -> Path:
        """The executor's own files (workers' exit-status files), inside the workspace."""
        return self.logs_dir / ".executor"

    @property
    def tmux_socket(self) -> str:
        """This workspace's private tmux server (`tmux -L <socket>`)."""
        return "orchard-" + hashlib.sha256(str(self.root).encode()).hexdigest()[:10]

    def prompt_path(self, experiment: str) -> Path:
        return self.prompts_dir / f"{check_name('experiment', experiment)}.md"

    def log_path(self, experiment: str) -> Path:
        return self.logs_dir / f"{check_name('experiment', experiment)}.log"

    def worker(self, name: str) -> WorkerDir:
        return WorkerDir(check_name("worker", name), self.root / f"worker-{name}")

    def workers(self) -> list[WorkerDir]:
        """Workers that have a directory in this workspace."""
        return [self.worker(path.name[len("worker-"):])
                for path in sorted(self.root.glob("worker-*")) if path.is_dir()]

    def binary_in(self, checkout: Path) -> Path | None:
        """The binary a build of `checkout` makes (None when the configuration names none)."""
        return checkout / self.config.target.binary if self.config.target.binary else None

    def binary(self, worker: WorkerDir) -> Path | None:
        """The binary a worker builds."""
        return self.binary_in(worker.target_dir)

    def worker_baseline(self, worker: WorkerDir) -> Path | None:
        """The worker's own copy of the baseline binary: what `{baseline}` names in its prompt and commands."""
        return self.binary_in(worker.baseline_copy)

    def baseline_dir(self, commit: str) -> Path:
        """Where the judge builds the target at `commit` (its baseline builds are cached by commit)."""
        return self.judge_dir / f"base-{commit[:12]}" / "target"

    def baseline_binary(self, commit: str) -> Path | None:
        """The binary built from `commit` by the judge."""
        return self.binary_in(self.baseline_dir(commit))

    def suite(self, bench_dir: Path) -> Path | None:
        return bench_dir / self.config.bench.suite if self.config.bench.suite else None

    # -- base commits ---------------------------------------------------------

    def _resolve(self, vcs: Vcs, checkout: Path, rev: str) -> str:
        if not rev:
            return vcs.head(checkout)
        try:
            return vcs.resolve(checkout, rev)
        except VcsError:
            try:
                return vcs.resolve(checkout, f"origin/{rev}")
            except VcsError:
                raise UsageError(f"base {rev!r} is not a branch, tag or commit in {checkout}") from None

    def target_base(self) -> str:
        """The configured target base (default: the head of the lab's target clone), as a commit id."""
        return self._resolve(self.target_vcs, self.reference_target, self.config.target.base)

    def bench_base(self) -> str:
        return self._resolve(self.bench_vcs, self.bench_dir, self.config.bench.base)

    # -- creation -------------------------------------------------------------

    @classmethod
    def create(cls, root: Path, config: Config, *, suite_source: Path | None = None,
               keep: Sequence[str] = ()) -> Workspace:
        """Lay out a new workspace and clone the target and the bench into it.

        `root` must not exist or be empty (but for the entries named in
        `keep`, e.g. the demo's own origin repositories); if anything fails,
        what was created here is removed again and the error names what went
        wrong.
        """
        root = Path(root).resolve()
        if root.exists() and (not root.is_dir() or any(p.name not in keep for p in root.iterdir())):
            raise UsageError(f"{root}: exists and is not an empty directory; nothing was changed")
        created = not root.exists()
        made = next(p for p in [*reversed(root.parents), root] if not p.exists()) if created else root  # the top one
        root.mkdir(parents=True, exist_ok=True)
        if suite_source is not None:
            config = config.replace("bench", suite=suite_source.name)
        workspace = cls(root, config)
        try:
            workspace._lay_out(suite_source)
        except BaseException:
            if created:
                shutil.rmtree(made, ignore_errors=True)  # with the parents it made: a failed init leaves nothing
            else:
                for child in root.iterdir():
                    if child.name in keep:
                        continue
                    if child.is_dir():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
            raise
        return workspace

    def _lay_out(self, suite_source: Path | None) -> None:
        for directory in (self.prompts_dir, self.logs_dir, self.results_dir, self.judge_dir):
            directory.mkdir()
        target, bench = self.config.target, self.config.bench
        for key, repo, vcs in (("target.repo", target.repo, self.target_vcs),
                               ("bench.repo", bench.repo, self.bench_vcs)):
            problem = repo and vcs.unusable(repo)
            if problem:
                raise UsageError(f"{key} {repo}: {problem}; nothing was created")
        try:
            self.target_vcs.clone(target.repo, self.reference_target)
        except VcsError as error:
            raise UsageError(f"target.repo {target.repo!r}: cannot clone it: {error}") from None
        self.target_vcs.prepare_reference(self.reference_target)
        self.target_base()  # a base that does not resolve is a configuration error
        if bench.repo:
            try:
                self.bench_vcs.clone(bench.repo, self.bench_dir)
            except VcsError as error:
                raise UsageError(f"bench.repo {bench.repo!r}: cannot clone it: {error}") from None
            self.bench_vcs.prepare_reference(self.bench_dir)
            self.bench_base()
        else:
            self.bench_dir.mkdir()
            if suite_source is not None:
                shutil.copyfile(suite_source, self.bench_dir / suite_source.name)
            (self.bench_dir / ".gitignore").write_text("".join(f"{p}\n" for p in BUILTIN_BENCH_IGNORES))
            self.bench_vcs.init(self.bench_dir, "orchard: the lab's built-in bench")
        config_file.write(self.config, self.config_path)
        self.config = config_module.load(self.config_path)

    @classmethod
    def open(cls, root: Path) -> Workspace:
        """Open an existing workspace (its orchard.toml is validated)."""
        root = Path(root).resolve()
        path = root / CONFIG_NAME
        if not path.is_file():
            raise UsageError(f"{root}: not an orchard workspace (no {CONFIG_NAME})")
        workspace = cls(root, config_module.load(path))
        for directory in (workspace.prompts_dir, workspace.logs_dir, workspace.results_dir):
            directory.mkdir(exist_ok=True)
        return workspace

    def target_warnings(self) -> list[str]:
        """What `orchard init` should tell the user about the target before any experiment."""
        said = self.uncommitted(f"HEAD, {self.target_base()[:12]}")
        if self.config.target.vcs != "git" or (self.reference_target / ".gitignore").exists():
            return said
        ignored = ", ".join(self.config.target.ignore) or "nothing"
        return [*said, f"the target has no .gitignore: whatever a build writes into a checkout counts as a change "
                f"unless [target] ignore names it (now: {ignored}); add a .gitignore or extend that list "
                "if the build writes elsewhere"]

    def uncommitted(self, used: str = "its own clone's main") -> list[str]:
        """The target's uncommitted edits, said at `orchard init` and at each run's start: a lab takes commits only
        (`used`: which), so they would otherwise be left out silently."""
        repo = self.config.target.repo
        if not self.target_vcs.is_working_copy(repo):
            return []
        try:
            changed = self.target_vcs.status(Path(repo))
        except VcsError:
            return []
        if not changed:
            return []
        return [f"target.repo {repo} has uncommitted changes ({len(changed)} {'file' if len(changed) == 1 else 'files'}"
                f": {visible(a_few(sorted(changed)))}): the lab works from commits only ({used}), never from "
                "uncommitted edits; commit them (and `orchard init` a new lab) for it to try them"]

    # -- workers --------------------------------------------------------------

    def setup_worker(
        self,
        name: str,
        *,
        target_base: str | None = None,
        bench_base: str | None = None,
        ignore: Sequence[str] = (),
    ) -> WorkerCheckout:
        """Give worker `name` fresh clones of target and bench at the base commits.

        Never recycled: whatever an earlier experiment or another worker left
        there (untracked, ignored, a hook, a config entry) is gone. `ignore`
        names scratch files its agent CLI writes into the checkout.
        """
        worker = self.worker(name)
        target_base = target_base or self.target_base()
        bench_base = bench_base or self.bench_base()
        worker.root.mkdir(exist_ok=True)
        for dest in (worker.target_dir, worker.bench_dir):
            if dest.exists() or dest.is_symlink():
                shutil.rmtree(dest) if dest.is_dir() and not dest.is_symlink() else dest.unlink()
        self.target_vcs.clone(str(self.reference_target), worker.target_dir, commit=target_base)
        give_bench(self, worker, bench_base)  # without its held-out inputs
        self.target_vcs.ignore_locally(worker.target_dir, [f"/{REPORT_NAME}", f"/{BASELINE_COPY}/",
                                                           *self.config.target.ignore, *ignore])
        for private in (worker.home_dir, worker.tmp_dir):  # nothing an earlier experiment left there
            shutil.rmtree(private, ignore_errors=True)
            private.mkdir()
        return WorkerCheckout(worker, target_base, bench_base)

    def setup_workers(self, names: Sequence[str], *, ignore: Sequence[str] = ()) -> list[WorkerCheckout]:
        """Set up several workers at the same bases, in parallel."""
        target_base, bench_base = self.target_base(), self.bench_base()
        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            futures = [pool.submit(self.setup_worker, name, target_base=target_base,
                                   bench_base=bench_base, ignore=ignore) for name in names]
            return [future.result() for future in futures]

    def remove_worker(self, name: str) -> None:
        """Delete a worker's directory and both of its checkouts."""
        shutil.rmtree(self.worker(name).root, ignore_errors=True)


