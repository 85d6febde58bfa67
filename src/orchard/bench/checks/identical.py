"""Identical programs are judged without measuring: a pull request that changes no byte the program runs is
NO-CHANGE at once, never INCONCLUSIVE because a noisy runner could not show it.

What is compared is what a confined run reads as the program (`measured_view.projects_of`): the binary and
every file of its project (its VCS top level, else its directory, and its virtualenv), each side's files by
their path inside its project, so two checkouts of one commit in two directories are the same program. Left
out on both sides, because no run of the program reads them as code:

- VCS metadata (`.git`, ...) and `__pycache__` (derived from the sources, which are compared);
- documentation: Markdown, reStructuredText and AsciiDoc files, the project's top-level `docs/` and `doc/`,
  and its LICENSE, COPYING, AUTHORS, CHANGELOG and NEWS files;
- the suite's own directory where it is inside the project (the bench, which a measured run never sees).

The suite, its inputs and fixtures are one for both sides. A program that does read its docs at run time
(a `--help` that prints the README) is measured with `--measure-identical`. A tree too big to hash quickly
is measured as before.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from orchard.bench.binary import binary_sha256
from orchard.bench.sandbox.measured_view import VCS_MARKERS, projects_of
from orchard.within import inside

DOC_SUFFIXES = (".md", ".markdown", ".rst", ".adoc")
DOC_DIRECTORIES = ("docs", "doc")  # at the project's top level
DOC_NAMES = ("license", "copying", "authors", "changelog", "news")  # at the top level, any suffix
SKIPPED_DIRECTORIES = (*VCS_MARKERS, "__pycache__")
MAX_FILES = 20_000
MAX_BYTES = 512 * 1024 * 1024


class TooBig(Exception):
    """A project over MAX_FILES or MAX_BYTES: hashing it would cost more than measuring."""


@dataclass(frozen=True)
class ProgramTree:
    """One side's program as content: a digest over its projects' files, and how many files that is."""

    digest: str
    files: int


def is_doc(relative: Path) -> bool:
    """Whether a file (by its path inside its project) is documentation no run reads as code."""
    top = relative.parts[0].lower()
    return (relative.suffix.lower() in DOC_SUFFIXES
            or (len(relative.parts) > 1 and top in DOC_DIRECTORIES)
            or (len(relative.parts) == 1 and top.split(".")[0] in DOC_NAMES))


def _project_files(project: Path, left_out: Path | None) -> list[Path]:
    """The files (and links) of one project, by their path inside it, without what no run reads as code."""
    found = []
    for directory, subdirectories, names in os.walk(project):
        here = Path(directory)
        subdirectories[:] = sorted(d for d in subdirectories if d not in SKIPPED_DIRECTORIES
                                   and (left_out is None or (here / d).relative_to(project) != left_out))
        found += [relative for name in names if not is_doc(relative := (here / name).relative_to(project))
                  and name not in VCS_MARKERS]
        if len(found) > MAX_FILES:
            raise TooBig(project)
    return sorted(found)


def _place(binary: Path) -> str:
    """The binary by its place in its project, and its content."""
    project = projects_of(binary)[0]
    return f"{binary.relative_to(project) if inside(binary, project) else binary.name}\0{binary_sha256(binary)}"


def projects_tree(projects: list[Path], left_out: Path | None) -> ProgramTree:
    """The content of a program's projects: each one's files by their path inside it. `left_out` is the bench's
    directory, relative to a project (None: the bench is outside)."""
    digest, count, size = hashlib.sha256(), 0, 0
    for index, project in enumerate(projects):
        digest.update(f"project {index}\0".encode())
        for relative in _project_files(project, left_out):
            path = project / relative
            if path.is_symlink():
                content = f"link {os.readlink(path)}"
            elif path.is_file():
                size += path.stat().st_size
                if size > MAX_BYTES:
                    raise TooBig(project)
                content = binary_sha256(path)
            else:
                continue  # sockets, fifos: nothing a program runs
            digest.update(f"{relative}\0{content}\0".encode())
            count += 1
    return ProgramTree(digest.hexdigest(), count)


def bench_inside(suite_dir: Path, *binaries: Path) -> Path | None:
    """The suite's directory relative to the project of a binary that holds it (the same place is left out on
    every side), else None."""
    for binary in binaries:
        for project in projects_of(binary):
            if inside(suite_dir, project) and suite_dir != project:
                return suite_dir.relative_to(project)
    return None


def same_program(suite_dir: Path, baseline: Path, candidate: Path) -> str:
    """Why the two sides are one program, in one sentence for the verdict's reasons; "" when they are not shown
    to be (different content, or a tree too big to hash)."""
    baseline, candidate = Path(os.path.abspath(baseline)), Path(os.path.abspath(candidate))
    left_out = bench_inside(Path(os.path.abspath(suite_dir)), baseline, candidate)
    try:
        if _place(baseline) != _place(candidate):  # the usual case, told without reading a tree
            return ""
        old = projects_tree(projects_of(baseline), left_out)
        new = old if projects_of(candidate) == projects_of(baseline) else projects_tree(projects_of(candidate),
                                                                                      left_out)
    except (TooBig, OSError):
        return ""
    if old != new:
        return ""
    return (f"identical programs, not measured: the baseline's and the candidate's binaries and all "
            f"{new.files:,} files of their projects are byte-identical (docs, VCS metadata and the bench left out; "
            f"sha256 {new.digest[:12]}); --measure-identical measures them anyway")
