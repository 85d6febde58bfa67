"""Token estimates: the one place that does this arithmetic.

An agent pays for a tool call twice: the command it writes and the output it
reads back. Without a tokenizer for every model, orchard estimates tokens as
ceil(characters / 4) of the command line plus the admitted output, and always
records the raw byte counts and truncation flags beside the estimate so a
reader can redo it with a real tokenizer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

CHARS_PER_TOKEN = 4
METHOD = "ceil(chars/4) of command line plus admitted stdout+stderr"

TOKEN_FIELDS = (
    "estimated_input_tokens",
    "estimated_output_tokens",
    "estimated_total_tokens",
    "admitted_output_chars",
)


def estimate(chars: int) -> int:
    """Tokens for `chars` characters of text."""
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


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
