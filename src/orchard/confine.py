"""Confinement: the command line that runs one untrusted command in bubblewrap, unprivileged and limited.

Shared by the bench (every measured run) and the lab (workers, the planner,
the reviewer, judge steps): one place builds bwrap's arguments.

- **Mounts**: the whole system read-only, fresh /proc and /dev, the places
  named `hidden` covered by an empty tmpfs, then `readable` bound back
  read-only, `writable` read-write and `sealed` read-only again inside them;
  every host Unix socket still in sight covered by /dev/null (`host_sockets`).
- **Unprivileged**: when orchard runs as root, bwrap makes the mounts and
  the command inside starts through `setpriv` as a dedicated unprivileged uid
  and gid (`sandbox_id`: "nobody" unless `ORCHARD_SANDBOX_UID` says
  otherwise), with no supplementary groups, no capabilities and
  no_new_privs. (`bwrap --unshare-user --uid N` alone would still be root
  outside: the kernel checks files against the real uid, and /etc/shadow
  would look owned by the sandbox.) What the sandbox must write is handed to
  that uid (`hand_over`).
- **Limits**: the rlimits of `orchard.limits`, set by `prlimit` just before
  bwrap, so bwrap and everything under it inherit them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchard import host_sockets, sandbox_pids
from orchard.limits import NO_LIMITS, Limits
from orchard.read_binds import read_binds
from orchard.within import below, inside

PROBE_TIMEOUT_S = 30.0
# Given back under a hidden place: systemd-resolved's resolv.conf (where /etc/resolv.conf may point).
SYSTEM_VISIBLE = ("/run/systemd/resolve",)
UID_ENV = "ORCHARD_SANDBOX_UID"
NOBODY = 65534


def sandbox_id() -> int:
    """The uid (and gid) sandboxes run as when orchard is root: `ORCHARD_SANDBOX_UID`, else nobody."""
    value = os.environ.get(UID_ENV, "")
    return int(value) if value.isdigit() and int(value) > 0 else NOBODY


def dropping() -> bool:
    """Whether sandboxes drop to `sandbox_id()`: only when orchard runs as root."""
    return os.geteuid() == 0


@dataclass(frozen=True)
class Mounts:
    """What one sandbox sees: hidden places, what comes back read-only or read-write, its directory."""

    cwd: Path
    network: bool = False  # False: its own network namespace (loopback only)
    hidden: tuple[Path, ...] = ()  # covered by an empty tmpfs, in this order
    scratch: tuple[Path, ...] = ()  # covered by an empty tmpfs anyone in the sandbox may write
    readable: tuple[Path, ...] = ()  # bound read-only after hiding (skipped when missing)
    writable: tuple[Path, ...] = ()  # bound read-write
    sealed: tuple[Path, ...] = ()  # read-only again inside what is writable
    dirs: tuple[Path, ...] = ()  # created empty (inside a hidden tmpfs) after the mounts
    unprivileged: bool = True  # False: keep orchard's own uid (only where the sandbox uid could not read its input)
    # the command itself is PID 1 (no bwrap reaper in between), so its CPU time and peak memory reach the
    # caller's wait4; what it starts still dies with it
    pid1: bool = False

    @property
    def drops(self) -> bool:
        """Whether this sandbox runs as `sandbox_id()` (orchard is root and the sandbox is unprivileged)."""
        return self.unprivileged and dropping()

    def bwrap_args(self) -> list[str]:
        args = ["--die-with-parent", "--unshare-pid", "--unshare-ipc", "--new-session"]
        if not self.drops:
            args += ["--cap-drop", "ALL"]  # when it drops, setpriv inside takes every capability away
        if not self.network:
            args.append("--unshare-net")
        if self.pid1:
            args.append("--as-pid-1")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        bound = [*self.readable, *self.writable]
        closed = self._closed([*bound, self.cwd])
        for path in [*closed, *self.hidden]:
            args += ["--tmpfs", str(path)]
        for path in self.scratch:
            args += ["--perms", "1777", "--tmpfs", str(path)]
        for path in self._parents(bound, closed):  # made passable for the sandbox uid: empty but for what is bound
            args += ["--perms", "0755", "--dir", str(path)]
        for source, path in read_binds(self.readable, [*closed, *self.hidden, *self.scratch]):
            args += ["--ro-bind-try", str(source), str(path)]
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        for path in self.sealed:
            args += ["--ro-bind", str(path), str(path)]
        for path in self._host_sockets(closed):
            args += ["--ro-bind", "/dev/null", str(path)]
        for path in self.dirs:
            args += ["--perms", "0777", "--dir", str(path)]
        return [*args, "--chdir", str(self.cwd)]

    def _host_sockets(self, closed: Iterable[Path]) -> list[Path]:
        """The host's Unix sockets it would see (outside what it hides, or bound back): each is covered."""
        return host_sockets.visible(host_sockets.bound(), [*closed, *self.hidden, *self.scratch],
                                    [*self.readable, *self.writable], own=self.sealed)

    def cannot_read(self, path: Path) -> Path | None:
        """What stops the sandbox uid from reading `path` inside this sandbox (a directory it cannot enter, or
        the file itself), or None. Under a bound place its parents are passable and its own modes count; a
        place hidden and not bound back is not there at all (None: not a matter of permissions)."""
        if not self.drops:
            return None
        path = Path(os.path.abspath(path))
        bound = [b for b in (*self.readable, *self.writable) if inside(path, Path(os.path.abspath(b)))]
        if bound:
            start = max((Path(os.path.abspath(b)) for b in bound), key=lambda p: len(p.parts))
        elif any(inside(path, top) for top in (*self.hidden, *self.scratch)):
            return None
        else:
            start = Path("/")
        steps = [p for p in reversed(path.parents) if inside(p, start)]
        for directory in steps:
            if not passable(directory):
                return directory
        return None if readable_by_sandbox(path) else path

    def _closed(self, bound: Iterable[Path]) -> list[Path]:
        """The directories the sandbox uid cannot enter above what it is given (outside every hidden place),
        outermost only: each is covered by an empty tmpfs too, so what is bound under it is reached through
        passable parents (a lab in /srv/x, x 0700: its checkouts). Nothing else under it was reachable anyway."""
        if not self.drops:
            return []
        covered = [*self.hidden, *self.scratch]
        found = {parent for path in bound for parent in Path(os.path.abspath(path)).parents
                 if not any(inside(parent, top) for top in covered) and not passable(parent)}
        return [p for p in sorted(found, key=lambda p: len(p.parts)) if not any(below(p, q) for q in found)]

    def _parents(self, bound: Iterable[Path], closed: Iterable[Path] = ()) -> list[Path]:
        """The directories between a hidden place and what is bound inside it, outermost first."""
        covered = [*closed, *self.hidden, *self.scratch]
        found = {parent for path in bound for parent in path.parents
                 if any(below(parent, top) for top in covered)}
        return sorted(found, key=lambda p: len(p.parts))


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/bin/{name}"


def bwrap() -> str | None:
    """The `bwrap` on PATH, if any."""
    return shutil.which("bwrap")


def argv(mounts: Mounts, command: Iterable[str], limits: Limits = NO_LIMITS) -> list[str]:
    """The whole argv: [its pids cgroup] [prlimit] bwrap ARGS -- [setpriv as the sandbox uid] COMMAND.

    bwrap runs as orchard's user, so it can reach every path it binds; the
    command inside drops to the sandbox uid with no capabilities (and no way
    back: no_new_privs) after the mounts are made. Dropping, its process
    budget is a pids cgroup of its own where one can be made (`sandbox_pids`):
    the uid's rlimit would count every sandbox's processes together.
    """
    found = bwrap()
    if found is None:
        raise FileNotFoundError("bwrap")
    drop = [_tool("setpriv"), f"--reuid={sandbox_id()}", f"--regid={sandbox_id()}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"] if mounts.drops else []
    start: list[str] = []
    if limits.processes and mounts.drops:
        start = sandbox_pids.enter(limits.processes, Limits(processes=limits.processes).prlimit_args())
        limits = dataclasses.replace(limits, processes=None)
    return [*start, *limits.prlimit_args(), found, *mounts.bwrap_args(), "--", *drop, *command]


def unavailable() -> str | None:
    """Why no sandbox can be made here (bwrap missing or refused), or None when one can."""
    found = bwrap()
    return "bubblewrap (`bwrap`) is not on PATH" if found is None else _probe(found)


@functools.cache
def _probe(found: str) -> str | None:
    """Whether the `bwrap` at `found` makes a sandbox (each one once: PATH may name another later). A second try,
    with the host's sockets listed again, when the first fails: a socket removed between the listing and bwrap's
    mount over it (a browser's, in a directory of its own) fails that one sandbox, not every one."""
    why = _probe_once()
    return None if why is None else _probe_once()


def _probe_once() -> str | None:
    try:
        answer = subprocess.run(argv(Mounts(Path("/")), ["true"]), capture_output=True, text=True,
                                timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap (`bwrap`) cannot run: {error}"
    if answer.returncode != 0:
        tail = (answer.stderr or answer.stdout).strip().splitlines()[-1:] or [f"exit {answer.returncode}"]
        return f"bubblewrap (`bwrap`) cannot make a sandbox here ({tail[0][:200]})"
    return None


def tools(path: str, executable: str = "", extra: Iterable[str] = ()) -> list[Path]:
    """What a sandboxed command must read to run at all: PATH, a CLI's installation, orchard's Python, `extra`.

    A version manager's `shims` directory runs its manager's own scripts and
    versions (pyenv, rbenv, asdf, nodenv): its whole root is readable. A CLI
    that is a link into a virtualenv or package gets that installation.
    """
    found_tools = [Path(entry) for entry in path.split(os.pathsep) if entry]
    found_tools += [entry.parent for entry in found_tools if entry.name == "shims"]
    found = shutil.which(executable, path=path) if executable else None
    if found:
        found_tools += [Path(found).parent, *installation(Path(found).resolve())]
    package = Path(__file__).resolve().parent
    return [*found_tools, Path(sys.prefix), Path(sys.base_prefix), package.parent, *map(Path, SYSTEM_VISIBLE),
            *(Path(p).expanduser() for p in extra)]


def installation(real: Path) -> list[Path]:
    """What a CLI whose real file is `real` runs from: an npm CLI's outermost `node_modules` (its platform
    package, e.g. `@openai/codex-linux-x64`, is a package beside its own), else the directory above its `bin/`
    (a virtualenv, a package); for a virtualenv, also the Python it was made from (`home` in pyvenv.cfg)."""
    modules = [parent for parent in real.parents if parent.name == "node_modules"]
    if modules:
        return [modules[-1]]
    root = real.parent.parent if real.parent.name == "bin" else real.parent
    try:
        settings = (root / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return [root]
    homes = [line.partition("=")[2].strip() for line in settings if line.partition("=")[0].strip() == "home"]
    return [root, *(Path(home).parent for home in homes if home)]


def shebang(program: Path) -> Path | None:
    """A `#!` script's interpreter (an absolute path), or None."""
    try:
        with program.open("rb") as handle:
            line = handle.readline(512)
    except OSError:
        return None
    words = line[2:].decode(errors="replace").split() if line.startswith(b"#!") else []
    return Path(words[0]) if words and words[0].startswith("/") else None


def interpreter(binary: Path) -> list[Path]:
    """A `#!` script's interpreter, and the installation it belongs to (`.../bin/python` -> `...`)."""
    found = shebang(binary)
    if found is None:
        return []
    real = found.resolve().parent
    return [found.parent, real.parent if real.name == "bin" else real]


def visible(candidates: Iterable[Path], hidden: Sequence[Path], protected: Sequence[Path],
            private: Path | None = None) -> list[Path]:
    """The candidates a hidden place would take away, unless one is inside `private` or holds something
    `protected` (binding it would show what was hidden)."""
    out: list[Path] = []
    for tool in (Path(os.path.abspath(c)) for c in candidates):
        if (tool.exists() and tool not in out and any(inside(tool, h) for h in hidden)
                and not (private is not None and inside(tool, private))
                and not any(inside(p, tool) for p in protected)):
            out.append(tool)
    return out


def passable(directory: Path) -> bool:
    """Whether the sandbox uid may enter `directory`: its own, or open to others (it has no groups)."""
    try:
        info = directory.stat()
    except OSError:
        return True  # missing: nothing to enter (bwrap makes what it binds)
    return bool(info.st_mode & 0o001) or (info.st_uid == sandbox_id() and bool(info.st_mode & 0o100))


def readable_by_sandbox(path: Path) -> bool:
    """Whether the sandbox uid may read `path` (and enter it, a directory): its own, or open to others."""
    try:
        info = path.stat()
    except OSError:
        return True  # missing: its own error, not a matter of permissions
    bits = (info.st_mode >> 6) & 0o7 if info.st_uid == sandbox_id() else info.st_mode & 0o7
    return bool(bits & 0o4) and (not path.is_dir() or bool(bits & 0o1))


def world_readable(path: Path) -> bool:
    """Whether a user who is neither owner nor group (the sandbox uid) can read `path` (and enter it, a directory)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & 0o004) and (not path.is_dir() or bool(mode & 0o001))


def hand_over(paths: Iterable[Path], skip: Iterable[Path] = ()) -> None:
    """Make `paths` (recursively) the sandbox uid's, so an unprivileged sandbox can write them.

    Only when orchard is root (otherwise the sandbox runs as orchard's own
    user, who owns them already). Links are changed, never followed; what is
    under `skip` (object packs hard-linked with the judge's clone) is left alone.
    """
    if not dropping():
        return
    uid = sandbox_id()
    skipped = {Path(p) for p in skip}
    for path in paths:
        if not path.exists():
            continue
        os.lchown(path, uid, uid)
        for root, dirnames, filenames in os.walk(path):
            here = Path(root)
            dirnames[:] = [d for d in dirnames if here / d not in skipped]
            for name in (*dirnames, *filenames):
                os.lchown(here / name, uid, uid)
