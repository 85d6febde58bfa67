"""What may land: exactly the patch the judge judged, as the journal's judgment of it names it.

Checked before anything of a landing reaches a repository, and again for
every checkout a landing makes: the patch is the one its sha256 names,
inside the hypothesis's scope, with no special file, and the journal (not
only the experiment's row, which a worker without a sandbox could write)
holds the judge's LAND of it. Anything else is `LabIntegrityError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchard.lab.judge.measuring import LabIntegrityError
from orchard.lab.records.hack_findings import Settlement, WinSettled
from orchard.lab.records.hypothesis import Hypothesis, outside_scope
from orchard.lab.records.judgment import Decision, Judgment, JudgmentEntry, patch_digest
from orchard.lab.text import a_few
from orchard.lab.workers.workspace import special_files
from orchard.lab.workers.workspace.builds import checkout_with_patch
from orchard.lab.workers.workspace.patches import patch_files
from orchard.lab.workers.workspace.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState


def landing_checkout(ws: Workspace, name: str, base: str, judgment: Judgment, hypothesis: Hypothesis,
                     purpose: str = "land") -> Path:
    """A fresh judge-owned checkout of `base` plus exactly the judged patch, checked again before it lands."""
    checked_patch(name, judgment, hypothesis)
    return checkout_with_patch(ws, ws.judge_dir / name / purpose, base, judgment.patch)


def checked_patch(name: str, judgment: Judgment, hypothesis: Hypothesis) -> None:
    """The patch recorded as judged is the one its sha256 names, inside the scope, with no special file."""
    patch = judgment.patch
    if not patch or patch_digest(patch) != judgment.patch_sha256:
        raise LabIntegrityError(f"{name}: the judged patch stored in lab.db does not match its sha256 (or is "
                                "missing): lab.db was edited; nothing was committed, merged or pushed")
    files = patch_files(patch)
    refused = [f"outside the scope: {a_few(v)}" for v in [outside_scope(files, hypothesis.scope)] if v]
    refused += special_files.in_patch(patch)
    if not files or refused:
        raise LabIntegrityError(f"{name}: the patch recorded as judged is not one the judge passes "
                                f"({'; '.join(refused) or 'it changes no file'}): lab.db was edited; nothing was "
                                "committed, merged or pushed")


def recorded_judgment(state: LabState, name: str, judgment: Judgment) -> None:
    """A LAND only the judge decided: the journal holds this experiment's LAND judgment of this very patch.

    lab.db's experiment row alone is not enough (a worker without a sandbox can write it): without the
    journal's entry nothing is committed, pushed or merged; a win the hack review held needs a person's
    `orchard review --land` in the journal too.
    """
    entries = [e.event for e in state.events_of(JudgmentEntry) if e.experiment == name]
    landing = [e for e in entries if e.decision == Decision.LAND and e.patch_sha256 == judgment.patch_sha256]
    if not judgment.patch_sha256 or not landing:
        raise LabIntegrityError(f"{name}: lab.db says LAND, but the journal has no judgment that landed this patch "
                                f"({judgment.patch_sha256[:12] or 'no hash'}): lab.db was edited; nothing was "
                                "committed, merged or pushed")
    settled = [e.event.settlement for e in state.events_of(WinSettled) if e.experiment == name]
    if any(e.held for e in landing) and Settlement.LAND not in settled:
        raise LabIntegrityError(f"{name}: the hack review held this win for a person and nobody landed it "
                                "(`orchard review --land`): lab.db was edited; nothing was committed, merged or "
                                "pushed")
