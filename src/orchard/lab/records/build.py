"""What a build and a step left: the binary the judge built with its files' hashes, and one check's outcome.

`workers/builds.py` makes both (it hashes a binary right after building it,
and again before and after every verdict: `changed`); here they are only data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class BuiltBinary:
    """A binary the judge built, with what its files held right after the build."""

    path: Path
    files: dict[str, str]  # relative to the binary's directory: sha256 (a symlink: "->" + its target)
    commit: str = ""  # the commit a baseline was built from ("" for a candidate)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "files": dict(self.files), "commit": self.commit}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuiltBinary:
        return cls(Path(data["path"]), {str(k): str(v) for k, v in data["files"].items()}, str(data.get("commit", "")))


@dataclass
class Check:
    """One thing established about a candidate (a step run, a collection check), passed or not."""

    name: str
    passed: bool
    detail: str
    log: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Check:
        return cls(str(data["name"]), bool(data["passed"]), str(data["detail"]), data.get("log"))
