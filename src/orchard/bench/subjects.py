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
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from orchard.bench.binary import binary_sha256, check_binary
from orchard.bench.environment import isolated_env
from orchard.errors import UsageError

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
        """What `orchard.bench.rows` needs to name the subject."""
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


def load_subjects_file(path: Path) -> dict[str, dict[str, Any]]:
    """The `[name]` tables of a subjects file, each with at least kind and bin."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise UsageError(f"subjects file {path} does not exist") from error
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"subjects file {path} is not valid TOML: {error}") from error
    table: dict[str, dict[str, Any]] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("bin"), str):
            raise UsageError(f"subjects file {path}: [{name}] needs a string `bin`")
        if not isinstance(entry.get("kind", name), str):
            raise UsageError(f"subjects file {path}: [{name}] `kind` must be a string")
        table[name] = entry
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
        head, _, explicit = item.partition("=")
        name, _, given_kind = (part.strip() for part in head.partition(":"))
        entry: Mapping[str, Any] = table.get(name, {})
        if given_kind and not explicit:
            raise UsageError(f"subject {item!r}: NAME:KIND needs =BIN")
        if explicit:
            binary = _explicit_binary(name, explicit.strip())
            kind = given_kind or str(entry.get("kind") or _infer_kind(name, explicit.strip(), known_kinds))
            subject = resolve(name, kind, str(entry.get("label", name)), binary, None)
        elif entry:
            kind = str(entry.get("kind", name))
            found = shutil.which(str(entry["bin"]))
            absent = None if found else f"no {entry['bin']} binary on PATH; give {name}=/path/to/{entry['bin']}"
            subject = resolve(name, kind, str(entry.get("label", name)), Path(found).resolve() if found else None,
                              absent)
        else:
            raise UsageError(
                f"unknown subject {name!r}: known names are {', '.join(sorted(table))}; or give NAME=/path/to/binary"
            )
        if subject.kind not in known_kinds:
            raise UsageError(
                f"subject {name}: no flow for kind {subject.kind!r} (flows: {', '.join(sorted(known_kinds))})"
            )
        if any(existing.name == subject.name for existing in subjects):
            raise UsageError(f"subject {name!r} is given twice")
        subjects.append(subject)
    return subjects
