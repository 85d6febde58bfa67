"""Measured runs, confined: each run of a binary under test in a sandbox of its own, or fresh in its side's.

A measured binary is untrusted (in a lab it is a worker's candidate), and it
runs while the verdict is taken: unconfined it could rewrite the baseline
between pairs, read the lab's records, or keep a cache from one run to the
next and look faster every time after the first. So every run of a
`command` or `rows` scenario, baseline and candidate alike (the comparison
stays fair), runs in bubblewrap (`orchard.confine`):

- the file system read-only; the suite's directory, the binary's directory
  and the fixtures read-only; the places a run could keep state in (`/tmp`,
  `/var/tmp`, your home, `/root`, `/run`, `$TMPDIR`, and whatever the caller
  hides, such as a lab's workspace) are a fresh empty tmpfs for this one run,
  with `HOME` and `TMPDIR` on it: nothing written there survives the run;
- `{workdir}` emptied before every run, and the results file of a `rows`
  scenario the only other thing it can write;
- no network (its own network namespace: loopback only) unless the scenario
  says `loopback = true`, which keeps the host's network;
- its own PID namespace: nothing it starts outlives the run;
- as the unprivileged sandbox uid when orchard is root (`confine.sandbox_id`);
  in a lab never as orchard's own: the judge opens its build trees to that
  uid first (`open_to_sandbox`), whatever modes a candidate's build left, and
  a path still closed refuses the runs (`ClosedTree`);
- in a lab, under `[workers]`' limits (`orchard.limits`), as workers and
  judge steps are: a run that hits one fails, its failure naming the limit.

Where orchard is root, the runs of one campaign side start fresh inside one
sandbox made for the side (`run_sandbox.py`): what each sees is the same, at
a fraction of a sandbox's cost.

How runs were confined is a comparability key (`env_isolation_version`)
and part of a calibration's key: confined and unconfined numbers are never
compared, and a calibration taken unconfined is not used for confined runs.
A `python` scenario's callable runs in its own Python inside the same sandbox
(`python_scenario.py`); instruction-count runs put their counter and the
program inside it; `orchard bench run` confines its runs alike.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from orchard import confine
from orchard.bench.sandbox.environment import ENV_ISOLATION_VERSION
from orchard.bench.sandbox.measured_view import View, missing_file, names_relative, top_level
from orchard.bench.sandbox.own_timing import FROM_OUTSIDE, OwnTiming
from orchard.bench.sandbox.run_sandbox import Sandboxes
from orchard.errors import OrchardError
from orchard.limits import NO_LIMITS, Limits
from orchard.within import below, inside

# On the run's own fresh /tmp (and /home): the same paths for baseline and candidate, gone when the run ends.
SCRATCH_TMP = Path("/tmp")
# 2: timed inside the sandbox (1 counted bubblewrap's set-up); 3: only what the scenario declares, HOME in /home
CONFINEMENT_VERSION = "3"
UNCONFINED_TIMING = "timer.1"  # unconfined runs timed by the same timer (unsuffixed: from Python, around the spawn)
HIDDEN = ("/root", "/run")
SCRATCH = ("/tmp", "/var/tmp")
OTHER_HOME = Path("/var/tmp/runner")
# innocuous, absent from the ordinary shape: more of them than are removed, so the count differs too
OTHER_VARIABLES = {"EDITOR": "vi", "VISUAL": "vi", "LESS": "-R", "HISTSIZE": "1000", "HISTFILESIZE": "2000",
                   "MAIL": "/var/mail/runner"}
UNSET_IN_OTHER = ("USER", "LOGNAME", "SHELL")


class Shape(StrEnum):
    """A confined run's surroundings: an ordinary user's for every timed run (HOME in /home, TMPDIR /tmp, nothing
    named after orchard), or another one for the check that a program cannot tell it is measured
    (`shape_check.py`): HOME and TMPDIR elsewhere, another working directory, variables added and removed."""

    ORDINARY = "ordinary"
    OTHER = "other"


def ordinary_home() -> Path:
    """/home/<you> on the run's own fresh /home where the host has a /home (root's is /home/user), else /tmp/home."""
    name = os.environ.get("USER") or "user"
    if not Path("/home").is_dir():
        return SCRATCH_TMP / "home"
    return Path("/home", "user" if name == "root" or "/" in name or name.startswith(".") else name)


@dataclass(frozen=True)
class RunConfinement:
    """How one campaign's measured runs are run; `note` says it in one line."""

    confined: bool
    note: str
    unprivileged: bool = True
    hide: tuple[Path, ...] = ()  # the caller's own places (a lab's workspace)
    trees: tuple[Path, ...] = ()  # what the binaries run from beyond their own directory (a lab's build checkouts)
    shape: Shape = Shape.ORDINARY
    limits: Limits = NO_LIMITS  # every run's rlimits (a lab's `[workers]` limits)

    @property
    def home(self) -> Path:
        """HOME inside the run, on its fresh scratch."""
        return ordinary_home() if self.shape is Shape.ORDINARY else OTHER_HOME

    @property
    def isolation(self) -> str:
        """The `env_isolation_version` of rows measured this way."""
        if not self.confined:
            return f"{ENV_ISOLATION_VERSION}+{UNCONFINED_TIMING}"
        owner = "" if self.unprivileged or not confine.dropping() else "-owner"
        return f"{ENV_ISOLATION_VERSION}+bwrap.{CONFINEMENT_VERSION}{owner}"

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The measured command's environment: HOME and TMPDIR on the run's fresh scratch, shaped by `shape`."""
        if not self.confined:
            return dict(env)
        if self.shape is Shape.ORDINARY:
            return {**env, "HOME": str(self.home), "TMPDIR": str(SCRATCH_TMP)}
        kept = {key: value for key, value in env.items() if key not in UNSET_IN_OTHER}
        return {**kept, **OTHER_VARIABLES, "HOME": str(self.home), "TMPDIR": "/var/tmp"}

    def mounts(self, *, cwd: Path, binary: Path, reads: Iterable[Path], writes: Iterable[Path],
               network: bool, withheld: Sequence[Path] = ()) -> confine.Mounts:
        """One run's sandbox: hidden places (and the `withheld` bench), then the tools (PATH, `binary`'s
        interpreter) and what it reads and writes, then its scratch HOME (and its directory, when withheld)."""
        scratch = [Path(p) for p in SCRATCH] + ([self.home.parent] if self.home.parent == Path("/home") else [])
        hidden = [p for p in _outermost([*scratch, *map(Path, HIDDEN), Path.home(), *self.hide, *withheld,
                                         *(Path(os.environ[k]) for k in ("TMPDIR", "XDG_RUNTIME_DIR")
                                           if os.environ.get(k))]) if p not in scratch]
        candidates = [*confine.tools(os.environ.get("PATH", "")), *confine.interpreter(binary)]
        bench = [*withheld, cwd] if withheld else []  # no tool brings back the bench (orchard's own demo suite)
        tools = [tool for tool in confine.visible(candidates, [*hidden, *scratch], [*hidden, *self.hide, *bench])
                 if not any(inside(tool, h) for h in self.hide)]
        return confine.Mounts(cwd=cwd, network=network, hidden=tuple(hidden), scratch=tuple(scratch),
                              readable=tuple(dict.fromkeys([*tools, *reads])), writable=tuple(writes),
                              dirs=(self.home, *([cwd] if any(inside(cwd, w) for w in [*withheld, self.home])
                                                 else [])),
                              unprivileged=self.unprivileged, pid1=True)

    def wrap(self, command: list[str] | str, *, binary: Path, suite_dir: Path, root: Path,
             results_file: Path | None, loopback: bool, timing: OwnTiming = FROM_OUTSIDE,
             scratch: Path | None = None, view: View | None = None, sandboxes: Sandboxes | None = None) -> list[str]:
        """`command` (a string runs through /bin/sh) inside this run's own sandbox, or as it is when runs are
        not confined; `timing`'s timer starts it either way, so its numbers are its own.

        It reads what `view` gives (without one: the suite's directory, the
        binary's and the fixtures under `root`) and never what it withholds;
        it writes `{workdir}` (emptied first) and `results_file`. `scratch`
        (an instruction counter's output directory) is writable too. With
        `sandboxes`, a run that writes neither starts fresh in its side's
        sandbox (`run_sandbox.py`) instead of one of its own.
        """
        argv = timing.command(["/bin/sh", "-c", command] if isinstance(command, str) else command)
        if not self.confined:
            return argv
        work = root / "work"
        fresh_workdir(work, self)
        writes = [work, *([scratch] if scratch is not None else [])]
        if scratch is not None and self.unprivileged:
            confine.hand_over([scratch])
        if results_file is not None:
            results_file.parent.mkdir(parents=True, exist_ok=True)
            results_file.touch()
            if self.unprivileged:
                confine.hand_over([results_file])
            if not inside(results_file, work):  # in `{workdir}` it is writable already
                writes.append(results_file)
        seen = view or View(readable=(suite_dir, binary.parent, root / "fixtures"))
        # the other shape's working directory is another, where no path the command names is relative to it
        moved = (self.shape is Shape.OTHER and view is not None and results_file is None
                 and not names_relative(command, suite_dir))
        cwd, reads = self.home / "work" if moved else suite_dir, (*seen.readable, *self.trees, *timing.reads)
        if sandboxes is None or writes != [work]:
            mounts = self.mounts(cwd=cwd, binary=binary, reads=reads, writes=writes, network=loopback,
                                 withheld=seen.withheld)
            return confine.argv(mounts, argv, self.limits)
        mounts = sandboxes.mounts((self, cwd, binary, reads, work, loopback, seen.withheld), lambda: self.mounts(
            cwd=cwd, binary=binary, reads=reads, writes=writes, network=loopback, withheld=seen.withheld))
        return sandboxes.argv(mounts, argv, self.limits, timing.fds) or confine.argv(mounts, argv, self.limits)

    def failure_hint(self, exit_code: int | None, stderr: str) -> str:
        """What a failed run's exit and stderr say: a limit it hit, or a file a confined run could not see."""
        limit = self.limits.measured_hint(exit_code, stderr) if self.confined else ""
        return limit or missing_file(self.confined, stderr)


class ClosedTree(OrchardError):
    """A tree a lab's measured runs must read stays closed to the sandbox uid: the runs would have to keep
    orchard's own uid, which a lab never does."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"closed its tree to the sandbox: {path} is not readable by the sandbox uid "
                         f"{confine.sandbox_id()}, and measured runs never run as orchard's own uid")
        self.path = path


UNCONFINED = RunConfinement(False, "measured runs are not confined")


def _outermost(paths: Iterable[Path]) -> list[Path]:
    real = sorted({Path(os.path.abspath(p)) for p in paths if p.is_dir() and Path(os.path.abspath(p)) != Path("/")},
                  key=lambda p: len(p.parts))
    return [p for p in real if not any(below(p, q) for q in real)]


def confine_runs(wanted: bool, *, reads: Iterable[Path] = (), hide: Iterable[Path] = (),
                 trees: Iterable[Path] = (), limits: Limits = NO_LIMITS, owner: bool = True) -> RunConfinement:
    """Confined when `wanted` and bubblewrap works here; `reads`: what the sandbox uid must be able to read;
    `trees`: more it reads, read-only, whatever `hide` hides (a binary's build checkout, with its virtualenv
    and the sources a development install points into); `limits`: every run's rlimits.

    When orchard is root and one of `reads` is not readable by other users,
    the runs are still confined but keep orchard's uid (the note says which
    path): a verdict of your own files never fails for it. Not with
    `owner=False` (a lab, whose trees a candidate built): `ClosedTree` then.
    """
    if not wanted:
        return RunConfinement(False, "measured runs are not confined (turned off)")
    why = confine.unavailable()
    if why is not None:
        return RunConfinement(False, f"measured runs are not confined: {why}")
    trees = tuple(trees)
    closed = [p for p in (*reads, *trees) if confine.dropping() and not confine.world_readable(p)]
    network = "no network unless a scenario says loopback = true"
    if closed and not owner:
        raise ClosedTree(closed[0])
    if closed:
        return RunConfinement(True, f"measured runs confined (bubblewrap, fresh HOME and TMPDIR per run, {network}) "
                                    f"but as orchard's own uid: {closed[0]} is not readable by other users",
                              unprivileged=False, hide=tuple(hide), trees=trees, limits=limits)
    who = f"as uid {confine.sandbox_id()}" if confine.dropping() else "as your user"
    return RunConfinement(True, f"measured runs confined (bubblewrap {who}, fresh HOME and TMPDIR per run, "
                                f"{network})", hide=tuple(hide), trees=trees, limits=limits)


def for_campaign(wanted: bool, suite_dir: Path, *binaries: Path) -> RunConfinement:
    """The confinement of a standalone campaign: bubblewrap when the suite allows it and it works here."""
    return confine_runs(wanted, reads=[suite_dir, *binaries, *(top_level(binary.parent) for binary in binaries)])


def fresh_workdir(workdir: Path, confinement: RunConfinement) -> None:
    """Empty `{workdir}` before a confined run, so no run finds what an earlier one left there: in place (a side's
    sandbox binds this directory once for all its runs), its mode made ordinary again."""
    if not confinement.confined:
        return
    workdir.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(workdir):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)
    if any(os.scandir(workdir)):
        raise OrchardError(f"cannot empty the measured runs' working directory {workdir}")
    os.chmod(workdir, 0o755)
    if confinement.unprivileged:
        confine.hand_over([workdir])


def open_to_sandbox(trees: Iterable[Path]) -> None:
    """Make every directory and file of `trees` readable by the sandbox uid (others' read, and search or run
    where the owner has it), links left alone: a lab's build trees, whatever modes their build set, so a
    candidate cannot close its tree and be measured as orchard's own uid. Only when orchard is root."""
    if not confine.dropping():
        return
    for tree in trees:
        if tree.is_symlink() or not tree.exists():
            continue
        _open(tree)
        for root, dirnames, filenames in os.walk(tree):
            for name in (*dirnames, *filenames):
                _open(Path(root, name))


def _open(path: Path) -> None:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return
    wanted = info.st_mode | 0o004 | (0o001 if stat.S_ISDIR(info.st_mode) or info.st_mode & 0o100 else 0)
    if wanted != info.st_mode:
        os.chmod(path, stat.S_IMODE(wanted))
