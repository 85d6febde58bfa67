"""Token estimates: the one place that does this arithmetic.

An agent pays for a tool call twice: the command it writes and the output it
reads back. Without a tokenizer for every model, orchard estimates tokens as
ceil(characters / 4) of the command line plus the admitted output, and always
records the raw byte counts and truncation flags beside the estimate so a
reader can redo it with a real tokenizer.

What is counted must not depend on where a binary lives or what it is
called: two copies of one tool at different paths are the same tool to an
agent. The counted command line therefore renders the binary and every
per-run path (temporary directories, fixture directories, the subject's name
inside branch and workspace names, and in the lanes any path or URL a
command is given outside the run's directory: `FIXTURE` for the core lane's
cache) with stable stand-ins (`BIN`, `ROOT`, ...). Rows carry both: `command` is what ran, `counted_command` what was
counted. Every lane and the suite verdict render through `StandIns`.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
METHOD = (
    "ceil(chars/4) of the counted command line (stable stand-ins for binary and per-run paths)"
    " plus admitted stdout+stderr"
)

TOKEN_FIELDS = (
    "estimated_input_tokens",
    "estimated_output_tokens",
    "estimated_total_tokens",
    "admitted_output_chars",
)


def estimate(chars: int) -> int:
    """Tokens for `chars` characters of text."""
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


# A raw value is replaced only where it stands alone: not inside a longer word
# or file name ("git" in "remote.git" stays).
_EDGE = r"A-Za-z0-9_."


@dataclass(frozen=True)
class StandIns:
    """Raw text (paths, names) and the stable stand-in counted in its place."""

    pairs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, mapping: Mapping[str, str]) -> StandIns:
        pairs: dict[str, str] = {}
        for raw, stand_in in mapping.items():
            if raw:
                pairs[raw] = stand_in
                pairs.setdefault(shlex.quote(raw), stand_in)  # as a shell string quotes it
        return cls(tuple(sorted(pairs.items(), key=lambda pair: -len(pair[0]))))

    def merged(self, mapping: Mapping[str, str]) -> StandIns:
        return StandIns.of({**dict(self.pairs), **mapping})

    def text(self, text: str) -> str:
        """`text` with every raw value replaced, longest first."""
        if not self.pairs or not text:
            return text
        pattern = "|".join(re.escape(raw) for raw, _ in self.pairs)
        lookup = dict(self.pairs)
        return re.sub(f"(?<![{_EDGE}])(?:{pattern})(?![{_EDGE[:-1]}])", lambda m: lookup[m.group(0)], text)

    def command(self, command: Sequence[str] | str) -> str:
        """The command line that is counted: each argument rendered, then joined as typed."""
        if isinstance(command, str):
            return self.text(command)
        return shlex.join(self.text(str(part)) for part in command)


NO_STAND_INS = StandIns()  # count the command as it ran


def interaction_fields(
    command_text: str,
    stdout_text: str,
    stderr_text: str,
    *,
    stdout_bytes: int,
    stderr_bytes: int,
    stdout_truncated: bool,
    stderr_truncated: bool,
) -> dict[str, Any]:
    """Row fields for one tool call: what was written and what was read back."""
    admitted = len(stdout_text) + len(stderr_text)
    input_tokens = estimate(len(command_text))
    output_tokens = estimate(admitted)
    return {
        "counted_command": command_text,
        "stdout_bytes": stdout_bytes,
        "stderr_bytes": stderr_bytes,
        "stdout_truncated": stdout_truncated,
        "stderr_truncated": stderr_truncated,
        "admitted_output_chars": admitted,
        "estimated_input_tokens": input_tokens,
        "estimated_output_tokens": output_tokens,
        "estimated_total_tokens": input_tokens + output_tokens,
        "token_estimate_method": METHOD,
    }


def summed_fields(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Token and byte totals over step rows.

    A total is null (unmeasured) unless every step measured it: a sum that
    silently left a step out would understate the cost, as if null were zero.
    """
    rows = list(rows)
    totals: dict[str, Any] = {}
    for field in (*TOKEN_FIELDS, "stdout_bytes", "stderr_bytes"):
        values = [row.get(field) for row in rows]
        counted = [int(v) for v in values if v is not None]
        totals[field] = sum(counted) if counted and len(counted) == len(values) else None
    totals["stdout_truncated"] = any(bool(row.get("stdout_truncated")) for row in rows)
    totals["stderr_truncated"] = any(bool(row.get("stderr_truncated")) for row in rows)
    totals["token_estimate_method"] = "sum over steps of " + METHOD
    return totals
