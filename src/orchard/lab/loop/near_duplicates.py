"""Near-duplicates: a new hypothesis that would spend a worker on an idea the backlog already holds.

A planner asked again and again proposes the same idea in other words, and a person re-adds one the lab
already KILLed. A new hypothesis is a near-duplicate of an earlier one when both name the same set of scope
entries (compared with leading and trailing `/` stripped; two empty scopes are the same set) and their
`change` texts share at least `SIMILAR` of their words: the token-set Jaccard index |A ∩ B| / |A ∪ B| of the
lower-cased runs of letters and digits. Earlier means open, running or KILLed in lab.db (a landed idea is
done, an iterated one has its sharpened child open), or earlier in the same batch. docs/loop.md,
"Near-duplicates", states it for users.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from orchard.lab.db.state import LabState
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus

SIMILAR = 0.8  # the least share of common words that makes two changes of one scope the same idea
EARLIER = (HypothesisStatus.OPEN, HypothesisStatus.RUNNING, HypothesisStatus.KILLED)


def words(text: str) -> frozenset[str]:
    """A change's normalised words: the lower-cased runs of letters and digits."""
    return frozenset(re.findall(r"[a-z0-9]+", text.lower()))


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """The token-set Jaccard index of two changes' words (two texts without a word are the same text)."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


@dataclass(frozen=True)
class Refused:
    """A new hypothesis not added: the earlier one it repeats, where that one stands, how alike their changes are."""

    hypothesis: Hypothesis
    earlier: str
    standing: str  # the earlier one's status in lab.db, or "in the same batch"
    alike: float

    def reason(self) -> str:
        return (f"{self.hypothesis.id}: refused, a near-duplicate of {self.earlier} ({self.standing}): the same "
                f"scope and {self.alike:.0%} of the change's words alike (at least {SIMILAR:.0%})")


@dataclass(frozen=True)
class _Known:
    id: str
    standing: str
    scope: frozenset[str]
    words: frozenset[str]


def _known(hypothesis: Hypothesis, standing: str) -> _Known:
    return _Known(hypothesis.id, standing, frozenset(entry.strip("/") for entry in hypothesis.scope),
                  words(hypothesis.change))


def sorted_out(state: LabState, hypotheses: Sequence[Hypothesis]) -> tuple[list[Hypothesis], list[Refused]]:
    """The hypotheses to add, and those refused as near-duplicates of an earlier one (each naming it)."""
    known = [_known(r.hypothesis, str(r.status)) for r in state.hypotheses() if r.status in EARLIER]
    kept: list[Hypothesis] = []
    refused: list[Refused] = []
    for hypothesis in hypotheses:
        new = _known(hypothesis, "in the same batch")
        alike = ((similarity(new.words, k.words), k) for k in known if k.scope == new.scope)
        best = max(alike, key=lambda pair: pair[0], default=None)
        if best is not None and best[0] >= SIMILAR:
            refused.append(Refused(hypothesis, best[1].id, best[1].standing, best[0]))
            continue
        kept.append(hypothesis)
        known.append(new)
    return kept, refused
