"""Pre-flight's test request: the agent CLI asked for one short answer, run as its worker will run it.

A key the service refuses, a model that does not exist or an endpoint that
cannot be reached would otherwise fail every worker, one hypothesis at a
time. So before anything is touched, each agent launcher that has a test
request (`Launcher.probe_words`) runs it once: the same CLI, inside the same
sandbox (its credentials and `pass_env`, its network, a scratch HOME, TMPDIR
and working directory), against the same endpoint and model. Its own error
message, read the way a worker's is, stops the run; a rate limit or an
overloaded service does not (the workers retry), it is only said.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from orchard.lab.config.sections import WorkersConfig
from orchard.lab.workers.launchers.agent_login import ask
from orchard.lab.workers.launchers.launcher_base import Launcher, join_words

PROBE_TIMEOUT_S = 300.0  # aider took 80-96 s here under a load average of 23 (its own start: 23-29 s)


@dataclass(frozen=True)
class ProbeAnswer:
    """What the test request showed: a problem that stops the run, or a note, or neither."""

    problem: str | None = None
    note: str | None = None


def probe(launcher: Launcher, workers: WorkersConfig, workspace: Path | None = None) -> ProbeAnswer:
    """Run the launcher's test request in its worker's sandbox (`workspace` hidden, as from a worker)."""
    words = launcher.probe_words()
    if words is None:
        return ProbeAnswer()
    with tempfile.TemporaryDirectory(prefix="orchard-probe-") as scratch:
        root = Path(scratch)
        work = root / "work"
        work.mkdir()
        confinement = launcher.sandbox(workers, workspace or root, cwd=work, own=[work], home=root / "home",
                                       tmp=root / "tmp")
        confinement = replace(confinement, setenv={**confinement.setenv, **launcher.probe_env})
        answer = ask(["bash", "-c", confinement.command(launcher.prelude() + join_words(words))],
                     timeout_s=PROBE_TIMEOUT_S)
    asked = f"a test request through `{launcher.executable}`, run as its worker runs it,"
    if answer.exit_code is None:
        return ProbeAnswer(problem=f"{asked} got no answer ({answer.said(200)})")
    error = launcher.agent_error(answer.output, answer.exit_code)
    if error is not None and error.kind.transient:
        return ProbeAnswer(note=f"launcher {launcher.label!r}: {asked} was answered {error.message!r} "
                                f"({error.kind}); the run goes on and its workers retry later")
    if error is not None:
        return ProbeAnswer(problem=f"{asked} failed ({error.kind}): {error.message}")
    if answer.exit_code != 0:
        return ProbeAnswer(problem=f"{asked} exited {answer.exit_code}: {answer.said(300)}")
    return ProbeAnswer()
