"""Perturbations: how a held-out variant of a bench input is made from it.

A change that recognises the bench's input (by its name, path, size, a hash of
its bytes or of a normalised form of them) and answers from an embedded copy
wins on that input only. Each variant is the input under another name in
another directory; a perturbation also changes its content, so a lookup keyed
on anything the worker saw misses. Names combine with `+` (applied left to
right): `shuffle-paragraphs+duplicate-paragraph`.

The defaults for text keep its kind (the same lines or paragraphs, reordered,
one repeated), so the program does the same sort of work and an honest win
shows there too, while size, hash, normalised content and prefix all change.
Binary inputs get `rename` only: no generic edit keeps an unknown format valid.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

RENAME = "rename"
DEFAULT_TEXT = (RENAME, "shuffle-paragraphs+duplicate-paragraph")
DEFAULT_BINARY = (RENAME,)
PLACEHOLDERS = ("suite_dir", "input", "output", "seed")  # what a scenario's `variant_command` may use
_BLANK = re.compile(rb"\n[ \t]*\n")


def _units(body: bytes, paragraphs: bool) -> tuple[list[bytes], bytes]:
    """The body cut into paragraphs (at blank lines) or, when it has fewer than two, lines; and the joint."""
    if paragraphs:
        parts = [p for p in _BLANK.split(body) if p.strip()]
        if len(parts) > 1:
            return parts, b"\n\n"
    return body.split(b"\n"), b"\n"


def _edit(paragraphs: bool, edit: Callable[[list[bytes], random.Random], list[bytes]]) -> Callable[
        [bytes, random.Random], bytes]:
    """A perturbation editing the input's units; a trailing newline run stays where it was."""
    def perturb(data: bytes, rng: random.Random) -> bytes:
        body = data.rstrip(b"\n")
        units, joint = _units(body, paragraphs)
        return joint.join(edit(units, rng)) + data[len(body):]
    return perturb


def _shuffle(units: list[bytes], rng: random.Random) -> list[bytes]:
    shuffled = list(units)
    rng.shuffle(shuffled)
    if shuffled == units and len(set(units)) > 1:  # the identity permutation: rotate instead
        shuffled = units[1:] + units[:1]
    return shuffled


def _duplicate(units: list[bytes], rng: random.Random) -> list[bytes]:
    at = rng.randrange(len(units))
    return [*units[:at + 1], units[at], *units[at + 1:]]


def _drop(units: list[bytes], rng: random.Random) -> list[bytes]:
    if len(units) < 2:
        return units
    at = rng.randrange(len(units))
    return units[:at] + units[at + 1:]


PERTURBATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    RENAME: lambda data, rng: data,
    "append-newline": lambda data, rng: data + b"\n",
    "shuffle-lines": _edit(False, _shuffle),
    "shuffle-paragraphs": _edit(True, _shuffle),
    "duplicate-paragraph": _edit(True, _duplicate),
    "drop-paragraph": _edit(True, _drop),
}


def unknown(names: Sequence[object]) -> str | None:
    """Why a scenario's `variants` list cannot be used, or None."""
    for name in names:
        steps = name.split("+") if isinstance(name, str) else [name]
        bad = next((step for step in steps if step not in PERTURBATIONS), None)
        if bad is not None:
            return f"unknown perturbation {bad!r}; known: {', '.join(PERTURBATIONS)} (combine with '+')"
    return None


def is_text(data: bytes) -> bool:
    """UTF-8 without NUL bytes: what the text defaults may edit."""
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def defaults(data: bytes) -> tuple[str, ...]:
    return DEFAULT_TEXT if is_text(data) else DEFAULT_BINARY


def perturb(name: str, data: bytes, rng: random.Random) -> bytes:
    """`data` through each of the `+`-joined perturbations in `name`."""
    for step in name.split("+"):
        data = PERTURBATIONS[step](data, rng)
    return data
