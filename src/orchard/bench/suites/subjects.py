"""Subjects: the explicit binaries a lane measures.

A subject is a name, a kind (which flow drives it), a label and one binary.
Every row records the binary's path, version string and sha256, so a number
can always be traced to the exact program that produced it. Subjects come
from a TOML file (one ships with orchard) or from `--subjects`:
`git,oak=/path/to/oak,NAME=BIN,NAME:KIND=BIN` (KIND names the flow when
NAME is not itself a flow kind).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from orchard.bench.binary import binary_sha256, check_binary
from orchard.bench.sandbox.environment import isolated_env
from orchard.bench.suites.flow_reader import load_flows
from orchard.bench.suites.flows import Flow
from orchard.errors import UsageError
from orchard.tomlfile import read_table

VERSION_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Subject:
    """One measured binary. `bin` is None when it is absent here (skip rows)."""

    name: str
    kind: str
    label: str
    bin: Path | None
    version: str | None = None
    sha256: str | None = None
    absent_reason: str | None = None
    version_error: str | None = None  # why `BIN --version` gave no version

    def identity(self) -> dict[str, Any]:
        """What `orchard.bench.measuring.rows` needs to name the subject."""
        return {"name": self.name, "kind": self.kind, "label": self.label}

    def row_fields(self) -> dict[str, Any]:
        """Provenance recorded in every row of this subject."""
        return {
            "subject_bin": None if self.bin is None else str(self.bin),
            "subject_version": self.version,
            "subject_version_error": self.version_error,
            "subject_binary_sha256": self.sha256,
        }


def default_subjects_file() -> Path:
    return Path(str(resources.files("orchard.bench").joinpath("subjects.toml")))


def binary_version(path: Path) -> tuple[str | None, str | None]:
    """(first line of `BIN --version`, None), or (None, why there is no version)."""
    try:
        done = subprocess.run(
            [str(path), "--version"],
            env=isolated_env(),
            capture_output=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"`--version` timed out after {VERSION_TIMEOUT_S:.0f} s"
    except OSError as error:
        return None, f"`--version` could not start: {error.strerror or error}"
    text = (done.stdout or done.stderr).decode("utf-8", errors="replace").strip()
    first = text.splitlines()[0][:200] if text else ""
    if done.returncode != 0:
        return None, f"`--version` failed (exit {done.returncode})" + (f": {first}" if first else "")
    if not first:
        return None, "`--version` printed nothing"
    return first, None


@dataclass(frozen=True)
class SubjectEntry:
    """One `[name]` table of a subjects file. No `kind`: the name or the binary's name tells."""

    name: str
    bin: str
    kind: str | None
    label: str


def load_subjects_file(path: Path) -> dict[str, SubjectEntry]:
    """The `[name]` tables of a subjects file: `bin` (required), `kind`, `label`; nothing else."""
    root = read_table(path, "subjects")
    table: dict[str, SubjectEntry] = {}
    for name in list(root.data):
        entry = root.table(name)
        table[name] = SubjectEntry(name, entry.get("bin", str, required=True), entry.get("kind", str, None),
                                   entry.get("label", str, name))
        entry.finish()
    root.finish()
    return table


def _explicit_binary(name: str, text: str) -> Path:
    """An explicitly given binary must exist and be executable (else exit 2)."""
    candidate = Path(text).expanduser()
    if "/" not in text:
        found = shutil.which(text)
        if found is None:
            raise UsageError(f"subject {name}: binary {text!r} is not on PATH")
        candidate = Path(found)
    return check_binary(candidate, f"subject {name}")


def _infer_kind(name: str, binary: str, known_kinds: set[str]) -> str:
    for guess in (name, Path(binary).name):
        if guess in known_kinds:
            return guess
    raise UsageError(
        f"subject {name}={binary}: cannot tell its kind; name it after a flow kind "
        f"({', '.join(sorted(known_kinds))}), write {name}:KIND={binary}, or give it a `kind` in a subjects file"
    )


def resolve(name: str, kind: str, label: str, binary: Path | None, absent: str | None) -> Subject:
    """Fill in version and sha256 for a found binary."""
    if binary is None:
        return Subject(name, kind, label, None, absent_reason=absent)
    version, version_error = binary_version(binary)
    return Subject(name, kind, label, binary, version, binary_sha256(binary), version_error=version_error)


def _split(item: str) -> tuple[str, str, str]:
    """One `NAME[:KIND][=BIN]` item as (name, kind, bin), '' for a part not given."""
    head, _, binary = item.partition("=")
    name, _, kind = (part.strip() for part in head.partition(":"))
    return name, kind, binary.strip()


def _once(names: Iterable[str], name: str) -> None:
    if name in names:
        raise UsageError(f"subject {name!r} is given twice")


def parse_binaries(specs: Sequence[str]) -> dict[str, Path]:
    """`orchard bench run --subject NAME=BIN` pairs into {name: binary}, checking each binary.

    A suite's scenarios run `{bin}` directly, so these subjects have no kind
    and no file entry: BIN is a path (relative to here), never a PATH lookup.
    """
    subjects: dict[str, Path] = {}
    for spec in specs:
        name, kind, binary = _split(spec)
        if not name or kind or not binary:
            raise UsageError(f"--subject must be NAME=BIN, got {spec!r}")
        _once(subjects, name)
        subjects[name] = check_binary(binary, f"subject {name}")
    if not subjects:
        raise UsageError("give at least one --subject NAME=BIN")
    return subjects


def parse_subjects(
    spec: str | None,
    known_kinds: set[str],
    subjects_file: Path | None = None,
) -> list[Subject]:
    """Subjects from `--subjects` (or every entry of the subjects file when None).

    `NAME` takes the file's entry; a binary named there but absent from this
    machine gives a subject with `bin=None` (its rows will be skips).
    `NAME=BIN` is explicit: BIN must exist and be executable.
    """
    table = load_subjects_file(subjects_file or default_subjects_file())
    items = list(table) if spec is None else [part.strip() for part in spec.split(",")]
    subjects: list[Subject] = []
    for item in items:
        if not item:
            raise UsageError(f"--subjects {spec!r}: empty subject name")
        name, given_kind, explicit = _split(item)
        entry = table.get(name)
        if given_kind and not explicit:
            raise UsageError(f"subject {item!r}: NAME:KIND needs =BIN")
        if explicit:
            binary = _explicit_binary(name, explicit)
            kind = given_kind or (entry and entry.kind) or _infer_kind(name, explicit, known_kinds)
            subject = resolve(name, kind, entry.label if entry else name, binary, None)
        elif entry:
            found = shutil.which(entry.bin)
            absent = None if found else f"no {entry.bin} binary on PATH; give {name}=/path/to/{entry.bin}"
            subject = resolve(name, entry.kind or name, entry.label, Path(found).resolve() if found else None, absent)
        else:
            raise UsageError(
                f"unknown subject {name!r}: known names are {', '.join(sorted(table))}; or give NAME=/path/to/binary"
            )
        if subject.kind not in known_kinds:
            raise UsageError(
                f"subject {name}: no flow for kind {subject.kind!r} (flows: {', '.join(sorted(known_kinds))})"
            )
        _once({existing.name for existing in subjects}, subject.name)
        subjects.append(subject)
    return subjects


def lane_subjects(
    spec: str | None, subjects_file: Path | None, flow_files: Iterable[Path]
) -> tuple[list[Subject], dict[str, Flow]]:
    """A VCS lane's subjects and the flows (shipped, then the user's) that drive them."""
    flows = load_flows(flow_files)
    return parse_subjects(spec, set(flows), subjects_file), flows
