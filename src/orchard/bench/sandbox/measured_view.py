"""What a measured run can see: the program's own project, what its scenario names and declares, never the bench.

A candidate that can read the bench can read its answers: an expected-output
file beside its input, the suite's `expect` facts, a held-out input. So a
confined run's sandbox covers the bench (the suite's directory, or the
repository it is in) with an empty directory and gives back only:

- the binary's own project, read-only, wherever it lives: its VCS top level,
  else its directory (a `build/prog` wrapper runs the source one directory up),
  and the virtualenv it or its `#!` interpreter is in (a console script runs
  the virtualenv's packages);
- the files and directories the scenario's command names (`{suite_dir}/x`,
  `{fixture.NAME}/...`, a path relative to the suite's directory), and the
  fixtures it names;
- the scenario's `inputs` (globs relative to the suite's directory) and the
  suite's `readable` paths.

A command that names the suite's directory itself would give back the whole
bench: the suite refuses it when read, asking for `inputs` instead.
"""

from __future__ import annotations

import glob
import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchard.confine import shebang
from orchard.within import below, inside

VCS_MARKERS = (".git", ".hg", ".jj", ".oak", ".svn")
WHOLE_BENCH = ("{suite_dir}", "{suite_dir}/", "{suite_dir}/.")
WIDEN = ("widen what it sees with `inputs = [...]` in the scenario or `readable = [...]` in [suite] "
         "(docs/suites.md), or measure unconfined with --no-confine (`confine = false`)")
MISSING_FILE = ("no such file", "can't open file", "cannot open", "not found", "cannot access",
                "errno 2", "enoent")


@dataclass(frozen=True)
class View:
    """What one measured run reads (`readable`), and the bench it must not (`withheld`: hidden like your home)."""

    readable: tuple[Path, ...] = ()
    withheld: tuple[Path, ...] = ()


def top_level(directory: Path) -> Path:
    """The VCS top level above `directory`, else `directory` itself (never your home or anything above it: a
    dotfiles repository at ~ is not a project)."""
    start = Path(os.path.abspath(directory))
    home = Path.home()
    for above in (start, *start.parents):
        if inside(home, above):
            break
        if any((above / marker).exists() for marker in VCS_MARKERS):
            return above
    return start


def virtualenvs(binary: Path) -> list[Path]:
    """The virtualenv a console script lives in, or its `#!` interpreter's: its packages are the program."""
    found = []
    for program in (binary, shebang(binary)):
        if program is not None and program.parent.name == "bin" and (program.parent.parent / "pyvenv.cfg").exists():
            found.append(Path(os.path.abspath(program.parent.parent)))
    return found


def projects_of(binary: Path) -> list[Path]:
    """The projects a run of `binary` reads as its own: its VCS top level (of the path and of the file it links
    to), and its virtualenvs."""
    binary = Path(os.path.abspath(binary))
    return list(dict.fromkeys([top_level(binary.parent), top_level(binary.resolve().parent), *virtualenvs(binary)]))


def bench_root(suite_dir: Path, projects: Iterable[Path]) -> Path:
    """The bench a run must not read: the suite's repository, or only its directory when that repository is also
    a binary's project (a suite kept inside the program's own repository)."""
    top = top_level(suite_dir)
    return suite_dir if any(inside(p, top) for p in projects) else top


ASK_FOR_INPUTS = ("the command names the suite's directory itself ({suite_dir}): a measured run sees only what it "
                  "declares; name the files it reads, or list them as inputs = [\"data/*.txt\", ...]")


def names_whole_bench(template: list[str] | str | None) -> bool:
    """Whether a command names the suite's directory itself (a directory a program could walk)."""
    if template is None:
        return False
    words = template if isinstance(template, list) else _split(template)
    return any(word in WHOLE_BENCH for word in words)


def named(command: list[str] | str, cwd: Path) -> list[Path]:
    """The existing paths a rendered command names (an option's `--x=PATH`, a redirection's `<PATH`, the words of
    an `sh -c` script too), relative ones against `cwd`."""
    words = command if isinstance(command, list) else _split(command)
    words = [*words, *(inner for word in words if " " in word for inner in _split(word))]
    found = []
    for word in words:
        for part in {word, word.partition("=")[2], word.lstrip("<>")} - {""}:
            path = Path(os.path.abspath(Path(part) if part.startswith("/") else cwd / part))
            try:
                if path.exists():
                    found.append(path)
            except OSError:
                continue
    return found


def names_relative(command: list[str] | str, cwd: Path) -> bool:
    """Whether a command names an existing path relative to `cwd` (it needs to run there)."""
    words = command if isinstance(command, list) else _split(command)
    return any(not word.startswith("/") and (cwd / word).exists() for word in words if word)


def declared(suite_dir: Path, globs: Iterable[str]) -> list[Path]:
    """The files and directories `inputs` or `readable` globs name (relative ones to the suite's directory)."""
    return [Path(found) for pattern in globs
            for found in sorted(glob.glob(str(suite_dir / Path(pattern).expanduser()), recursive=True))]


def of_run(binary: Path, suite_dir: Path, command: list[str] | str | None, template: list[str] | str | None,
           fixtures: Mapping[str, Path], globs: Iterable[str]) -> View:
    """The view of one run of `binary`: its projects, the fixtures `template` names (every one for a callable),
    what `command` names and what the suite declares (`globs`); the suite's directory itself never."""
    binary = Path(os.path.abspath(binary))
    projects = projects_of(binary)
    text = " ".join(template) if isinstance(template, list) else template or ""
    used = [path for name, path in fixtures.items() if template is None or "{fixture." + name + "}" in text]
    wanted = [*projects, *(named(command, suite_dir) if command is not None else []), *declared(suite_dir, globs),
              *used, binary, binary.resolve()]
    bench = bench_root(suite_dir, projects)
    given = [q for p in wanted for q in (around(p, bench) if p in projects and below(bench, p) else [p])
             if not inside(suite_dir, q)]
    return View(readable=tuple(dict.fromkeys(given)), withheld=(bench,))


def around(holder: Path, bench: Path) -> list[Path]:
    """What `holder` (a project the suite lives in) holds but `bench`: the other entries of each directory on the
    way down to it."""
    found = []
    for directory in (holder, *(p for p in reversed(bench.parents) if below(p, holder))):
        step = bench.parts[len(directory.parts)]
        try:
            found += [entry for entry in directory.iterdir() if entry.name != step]
        except OSError:
            continue
    return found


def missing_file(confined: bool, stderr: str) -> str:
    """The hint a confined run's failure gets when it looks like a file it could not see ("" otherwise)."""
    if not confined or not any(mark in stderr.lower() for mark in MISSING_FILE):
        return ""
    return (" (the run is confined: it sees the binary's project, the files its command names and the suite's "
            f"`inputs`, not the rest of the bench; {WIDEN})")


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()
