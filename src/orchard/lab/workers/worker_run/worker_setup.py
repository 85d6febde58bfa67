"""One experiment's worker made ready in a workspace: the same steps on the lab's host and on a dask worker's.

Fresh checkouts at the recorded bases (never a recycled one), the worker's
own copy of the baseline build it measures against, its prompt rendered
with this host's paths, and no log left from an earlier launch. A local
executor runs this in the lab's workspace before its job starts; a dask
task runs it in its host's scratch copy of the lab (`remote.run_experiment`).
"""

from __future__ import annotations

from pathlib import Path

from orchard.lab.records.build import BuiltBinary
from orchard.lab.records.experiment import Experiment
from orchard.lab.workers.launchers.launcher_base import Launcher
from orchard.lab.workers.workspace.builds import give_baseline
from orchard.lab.workers.workspace.prompts import render_prompt
from orchard.lab.workers.workspace.workspace import Workspace


def prepare(ws: Workspace, experiment: Experiment, launcher: Launcher, baseline: BuiltBinary | None) -> Path:
    """Set the worker up for `experiment`; return its prompt's path (`baseline` None: no build to copy)."""
    checkout = experiment.checkout
    ws.setup_worker(checkout.worker.name, target_base=checkout.target_base, bench_base=checkout.bench_base,
                    ignore=launcher.scratch)
    if baseline is not None:
        give_baseline(ws, checkout.worker, baseline)  # the worker measures against its own copy
    prompt = render_prompt(ws, experiment)
    ws.log_path(experiment.name).unlink(missing_ok=True)
    return prompt
