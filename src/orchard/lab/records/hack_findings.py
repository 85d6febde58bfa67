"""What the hack review found in a win's patch, and how a person settled a win it held.

`judge/hack_review.py` scans the lines a patch adds; each finding is one
`HackFlag` at a file and line, definite (the judge KILLs) or doubtful (the
win is held for a person: `orchard review`). The journal records the hold
(`WinHeld`) and the person's answer (`WinSettled`, with who asked).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from orchard.lab.records.events import Event, EventKind, texts


class HackFlag(StrEnum):
    """One pattern of benchmark gaming (docs/security.md says each one's rule and what it does not see)."""

    LARGE_LITERAL = "large-literal"  # a long string or bytes literal, a base64 or hex run, a data file
    SPLIT_CONSTANTS = "split-constants"  # many small constants adding up to something large
    BENCH_PATH = "bench-path"  # the bench's directory, its suite file or a file of it named
    EXPECTED_OUTPUT = "expected-output"  # a file named like an expected output, or an expected fact written in
    INPUT_HASH = "input-hash"  # hashing what the program reads, to key a lookup
    KEYED_LOOKUP = "keyed-lookup"  # an input hash and a large payload in the same file
    CLOCK_TAMPERING = "clock-tampering"  # time functions replaced or wrapped, LD_PRELOAD, faketime, timers
    CACHE_WRITE = "cache-write"  # ~/.cache, /dev/shm, $XDG_*, files under /tmp, on-disk caches
    BENCH_NAME = "bench-name"  # a bench input's name written in the patch
    BENCH_SIZE = "bench-size"  # a bench input's byte size written in the patch
    ENV_SNIFFING = "env-sniffing"  # ORCHARD_*, CI, PYTEST*, GITHUB_*, the environment counted, isatty


@dataclass(frozen=True)
class Finding:
    """One flag at one added line of the patch (line: the new file's line number; 0 for a whole file)."""

    flag: HackFlag
    file: str
    line: int
    snippet: str
    definite: bool

    def describe(self) -> str:
        """`<flag> at file:line: <snippet>`, as a reason, the journal and `orchard review` print it."""
        return f"{self.flag} at {self.file}:{self.line}: {self.snippet}"

    def to_dict(self) -> dict[str, Any]:
        return {"flag": self.flag.value, "file": self.file, "line": self.line, "snippet": self.snippet,
                "definite": self.definite}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(HackFlag(data["flag"]), str(data["file"]), int(data["line"]), str(data["snippet"]),
                   bool(data["definite"]))


class Settlement(StrEnum):
    """What a person decided about a held win."""

    LAND = "land"
    KILL = "kill"


@dataclass(frozen=True)
class WinHeld(Event):
    """A win the hack review doubted: not landed, waiting for a person (`orchard review`)."""

    kind = EventKind.HELD
    findings: tuple[str, ...]  # each as `Finding.describe` says it

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(texts(data.get("findings")))


@dataclass(frozen=True)
class WinSettled(Event):
    """A person's answer to a held win: land it (the normal landing from where it was held) or kill it."""

    kind = EventKind.SETTLED
    settlement: Settlement
    by: str  # who asked

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(Settlement(data["settlement"]), str(data.get("by", "?")))
