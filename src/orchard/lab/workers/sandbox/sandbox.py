"""The worker's sandbox: bubblewrap around its launch line, and the scrubbed environment it starts with.

A worker is a coding agent: untrusted. Its launch line runs inside `bwrap`
with the system read-only, a fresh /proc, /dev and /tmp, and every place
that is the orchestrator's (the workspace, your home, /root, temp and
runtime directories) hidden under an empty tmpfs. Into that it gets back,
at the same paths: its target checkout and a private HOME and TMPDIR
writable, its bench clone, prompt and input files read-only, the files its
CLI writes outside the checkout, and every PATH directory (and orchard's own
Python) that would otherwise be hidden, read-only. It has its own PID and IPC
namespaces and dies with its parent, so no daemon it starts outlives it; no
capabilities, even when orchard runs as root; and with `network = "none"` or
`"api"` its own network namespace (loopback only; with `api`, the one way
out that `egress.py` gives back).

Only the launcher command is confined: the executor's wrapper around it
(the `tee` into logs/ and the exit line) runs outside. Either way the
command starts under `env -i` with only the allowlisted variables
(`allowlist.py`); inherited values are referred to by name in the script,
never written into it, so no secret appears on a command line.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from orchard import confine
from orchard.errors import UsageError
from orchard.lab.workers.sandbox.egress import Egress
from orchard.limits import NO_LIMITS, Limits

# Always hidden when they exist; the workspace, $HOME, $TMPDIR and friends are added per sandbox.
# /run holds the host's service sockets (docker, dbus, databases): a read-only mount would not stop a connect().
SYSTEM_HIDDEN = ("/root", "/tmp", "/var/tmp", "/run")
HINT = ("install bubblewrap (Debian: `apt-get install bubblewrap`), or set [workers] sandbox = \"none\" in "
        "orchard.toml to run workers unsandboxed, as you, with access to everything you can read")


class SandboxMode(StrEnum):
    """How workers are confined (`[workers] sandbox`)."""

    BWRAP = "bwrap"
    NONE = "none"


UNSANDBOXED_NOTE = ("UNSANDBOXED: workers run without bubblewrap ([workers] sandbox = \"none\"): "
                    "they can read and write everything orchard's user can")


BUILD_NETWORK_NOTE = ("the judge's build and test steps have the network ([target] build_network = true): "
                      "a candidate's build can reach outside addresses")


def sandbox_notes(mode: str, build_network: bool) -> list[str]:
    """What a lab says (and journals) at each start about how weakly it confines: nothing when fully."""
    return ([UNSANDBOXED_NOTE] if mode == SandboxMode.NONE else []) + ([BUILD_NETWORK_NOTE] if build_network else [])


def bwrap_path() -> str:
    """The `bwrap` on PATH, or UsageError saying what to do."""
    found = shutil.which("bwrap")
    if found is None:
        raise UsageError(f"bubblewrap (`bwrap`) is not on PATH, and workers run in its sandbox: {HINT}")
    return found


def preflight(mode: str) -> None:
    """With the bwrap sandbox: bwrap is installed and can make a sandbox here. UsageError otherwise."""
    if mode != SandboxMode.BWRAP:
        return
    bwrap_path()
    why = confine.unavailable()
    if why is not None:
        raise UsageError(f"{why}: {HINT}")


@dataclass(frozen=True)
class Confinement:
    """How one launch line runs: its environment and, with bwrap, what it can see and touch."""

    mode: SandboxMode
    cwd: Path
    network: bool
    inherit: tuple[str, ...] = ()  # variables taken, by name, from the wrapper's own environment
    setenv: Mapping[str, str] = field(default_factory=dict)  # literal values (HOME, TMPDIR)
    hidden: tuple[Path, ...] = ()  # covered by an empty tmpfs
    readable: tuple[Path, ...] = ()  # bound read-only (after hiding)
    writable: tuple[Path, ...] = ()  # bound read-write
    sealed: tuple[Path, ...] = ()  # read-only again inside what is writable (files shared with the judge)
    egress: Egress | None = None  # network = "api": the proxy run beside the sandbox, the bridge inside it
    limits: Limits = NO_LIMITS

    def hand_over(self) -> None:
        """What it writes, made the unprivileged sandbox uid's (when orchard is root), for a confinement built
        with `hand_over=False` before its directories were made (a directory made after is orchard's own)."""
        if self.mode == SandboxMode.BWRAP:
            confine.hand_over(self.writable, skip=self.sealed)

    def mounts(self) -> confine.Mounts:
        sealed = (*self.sealed, *([self.egress.directory] if self.egress else []))
        return confine.Mounts(cwd=self.cwd, network=self.network, hidden=self.hidden, readable=self.readable,
                              writable=self.writable, sealed=sealed)

    def command(self, launch: str, extra: Iterable[str] = ()) -> str:
        """The shell text that runs `launch` confined; `extra`: more variables to pass by name.

        With an egress, the text starts the proxy first (its own `env -i`, with only the `ORCHARD_*`
        variables), runs the sandbox with the bridge before `launch`, stops the proxy and keeps the
        sandbox's exit status.
        """
        names = sorted({*self.inherit, *(name for name in extra if name.isidentifier())} - set(self.setenv))
        words = [*_env_by_name(names), *(shlex.quote(f"{key}={value}") for key, value in self.setenv.items())]
        if self.mode != SandboxMode.BWRAP:
            return " ".join([*words, "bash", "-c", shlex.quote(launch)])
        if self.egress is None:
            return " ".join([*words, *map(shlex.quote, confine.argv(self.mounts(), ["bash", "-c", launch],
                                                                     self.limits))])
        proxy_env = " ".join(_env_by_name(name for name in names if name.startswith("ORCHARD_")))
        inner = confine.argv(self.mounts(), ["bash", "-c", self.egress.inside(launch)], self.limits)
        confined = " ".join([*words, *map(shlex.quote, inner)])
        return self.egress.outside(proxy_env) + confined + "\n" + self.egress.after()


def _env_by_name(names: Iterable[str]) -> list[str]:
    """`env -i` and each variable by reference (`${NAME+"NAME=$NAME"}`): no value is written into the text."""
    return ["env", "-i", *(f'${{{name}+"{name}=${name}"}}' for name in names)]


def _absolute(path: Path | str) -> Path:
    return Path(os.path.abspath(path))


def _hidden(workspace: Path, more: Iterable[Path] = ()) -> list[Path]:
    """The orchestrator's places, outermost only (a tmpfs over a parent already hides a child)."""
    found = {workspace, *(Path(p) for p in SYSTEM_HIDDEN), Path.home(), *more}
    found |= {Path(os.environ[key]) for key in ("TMPDIR", "XDG_RUNTIME_DIR", "TMUX_TMPDIR") if os.environ.get(key)}
    real = sorted({_absolute(p) for p in found if p.is_dir() and _absolute(p) != Path("/")}, key=lambda p: len(p.parts))
    return [p for p in real if not any(q != p and q in p.parents for q in real)]


def _shared(directory: Path) -> list[Path]:
    """A checkout's object packs when they are hard links into the judge's reference clone.

    A local clone hard-links the reference's pack: writing it in place (after
    a chmod) would rewrite the judge's own objects.
    """
    pack = directory / ".git" / "objects" / "pack"
    try:
        shared = any(entry.is_file() and entry.stat().st_nlink > 1 for entry in pack.iterdir())
    except OSError:
        return []
    return [pack] if shared else []


def worker_confinement(mode: str, *, workspace: Path, cwd: Path, network: bool, inherit: Iterable[str],
                       home: Path, tmp: Path, reads: Iterable[Path], writes: Iterable[Path], executable: str = "",
                       own: Iterable[Path] = (), extra_reads: Iterable[str] = (),
                       path: str | None = None, hide: Iterable[Path] = (), setenv: Mapping[str, str] | None = None,
                       egress: Egress | None = None, limits: Limits = NO_LIMITS,
                       hand_over: bool = True) -> Confinement:
    """The confinement of one worker.

    `own`: its directories (the target checkout) bound writable (but for
    object packs it shares with the judge's clone, read-only), like its
    private `home` and `tmp` (its HOME and TMPDIR); `reads`: its bench clone,
    prompt and input files, read-only; `writes`: single files it writes
    outside them (created empty here if missing, so they can be bound);
    `extra_reads`: more paths it may read (`[workers] sandbox_read`);
    `path`: its PATH, when it is not orchard's own; `hide`: more places of
    the orchestrator's (on a dask worker sharing the lab's file system, the
    lab's workspace: its own `workspace` there is only the scratch copy);
    `setenv`: literal variables of its CLI's (never secrets); `egress`: its
    one way out under `network = "api"` (with bwrap only: unsandboxed,
    nothing confines it). With bwrap, what it writes is handed to the
    unprivileged sandbox uid when orchard is root (`confine.hand_over`;
    `hand_over=False` leaves that to the caller, whose directories are not made
    yet: `Confinement.hand_over` once they are), and `limits` apply.
    """
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    writes = [_absolute(p) for p in writes]
    for written in writes:
        written.parent.mkdir(parents=True, exist_ok=True)
        written.touch(exist_ok=True)
    setenv = {**(setenv or {}), "HOME": str(home), "TMPDIR": str(tmp)}
    inherit = tuple(name for name in inherit if name not in setenv)
    if mode != SandboxMode.BWRAP:
        return Confinement(SandboxMode.NONE, cwd, network, inherit, setenv)
    workspace = _absolute(workspace)
    hidden = _hidden(workspace, hide)
    tools = _tools(workspace, hidden, os.environ.get("PATH", "") if path is None else path, executable, extra_reads)
    readable = [*tools, *map(_absolute, reads)]
    own = [_absolute(p) for p in own]
    writable = dict.fromkeys([*own, *map(_absolute, (home, tmp, *writes))])
    sealed = [pack for directory in own for pack in _shared(directory)]
    if hand_over:
        confine.hand_over(writable, skip=sealed)
    if egress is not None:
        egress.directory.mkdir(parents=True, exist_ok=True)
        setenv |= egress.environment()
        network = False
    return Confinement(SandboxMode.BWRAP, cwd, network, inherit, setenv, tuple(hidden), tuple(readable),
                       tuple(writable), tuple(sealed), egress, limits)


def _tools(workspace: Path, hidden: list[Path], path: str, executable: str, extra_reads: Iterable[str]) -> list[Path]:
    """What a sandbox gets back of its PATH, its CLI's installation and `sandbox_read` (`confine.tools`)."""
    return confine.visible(confine.tools(path, executable, extra_reads), hidden, [*hidden, workspace], workspace)


def worker_mounts(workspace: Path, path: str, executable: str = "", extra_reads: Iterable[str] = ()) -> confine.Mounts:
    """What any sandbox of the lab sees of the system and its tools, without its own checkouts (nothing made)."""
    workspace = _absolute(workspace)
    hidden = _hidden(workspace)
    return confine.Mounts(cwd=workspace, hidden=tuple(hidden),
                          readable=tuple(_tools(workspace, hidden, path, executable, extra_reads)))


def step_confinement(mode: str, *, workspace: Path, checkout: Path, inherit: Iterable[str], network: bool = False,
                     limits: Limits = NO_LIMITS) -> Confinement:
    """A judge step that runs candidate code (its build, its tests): like a worker, it sees nothing of the
    workspace and writes only the checkout it builds and a scratch HOME and TMPDIR beside it; no network
    unless `network` (`[target] build_network`: a build that fetches its dependencies)."""
    scratch = checkout.parent / "step-scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    return worker_confinement(mode, workspace=workspace, cwd=checkout, network=network, inherit=inherit,
                              home=scratch / "home", tmp=scratch / "tmp", reads=(), writes=(), own=(checkout,),
                              limits=limits)
