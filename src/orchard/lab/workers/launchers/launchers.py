"""The launchers by name, and the pre-flight that every configured one can run (and its agent is logged in).

`patch` runs no model: `python -m orchard.lab.workers.launchers.patch_worker` applies the
hypothesis's ready patch, builds, tests, measures and writes the report.
`command` runs the user's template. The agent CLIs' launchers are in
`agent_launchers.py` and `aider_launcher.py`; what all launchers share is `launcher_base.Launcher`.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.config.orchard_toml import Config
from orchard.lab.config.sections import LauncherConfig
from orchard.lab.records.experiment import Experiment, render_command
from orchard.lab.workers.launchers.agent_launchers import ClaudeLauncher, CodexLauncher, CursorLauncher
from orchard.lab.workers.launchers.agent_probe import probe
from orchard.lab.workers.launchers.aider_launcher import AiderLauncher
from orchard.lab.workers.launchers.launcher_base import LaunchContext, Launcher, join_words
from orchard.lab.workers.sandbox import sandbox, sandbox_reach


class PatchLauncher(Launcher):
    """No model: apply the hypothesis's ready patch, then build, test, measure, report."""

    name = "patch"
    default_executable = sys.executable

    def preflight(self) -> str | None:
        return None  # this Python, always there

    def patch_file(self, workspace_root: Path, experiment: Experiment) -> Path:
        patch = experiment.hypothesis.patch
        if not patch:
            raise UsageError(
                f"experiment {experiment.name!r}: the patch launcher needs a hypothesis with a ready `patch` file"
            )
        path = Path(patch) if Path(patch).is_absolute() else workspace_root / patch
        if not path.is_file():
            raise UsageError(f"experiment {experiment.name!r}: patch file {path} does not exist")
        return path

    def reads(self, context: LaunchContext) -> tuple[Path, ...]:
        """Besides the bench and the prompt: the ready patch (and a bench patch)."""
        root, hypothesis = context.paths.workspace, context.experiment.hypothesis
        bench_patch = [root / hypothesis.bench_patch] if hypothesis.bench_patch else []
        return *super().reads(context), self.patch_file(root, context.experiment), *bench_patch

    def command(self, context: LaunchContext) -> str:
        words = [
            self.executable,
            "-m",
            "orchard.lab.workers.launchers.patch_worker",
            "--experiment",
            context.experiment.name,
            "--patch",
            str(self.patch_file(context.paths.workspace, context.experiment)),
            "--target",
            str(context.paths.target_dir),
            "--bench",
            str(context.paths.bench_dir),
            "--report",
            str(context.paths.report),
            "--vcs",
            context.vcs,
            "--build",
            context.commands.build,
            "--test",
            context.commands.test,
            "--measure",
            context.commands.measure,
        ]
        if context.experiment.hypothesis.bench_patch:
            words += ["--bench-patch", context.experiment.hypothesis.bench_patch]
        return join_words(words)


class CommandLauncher(Launcher):
    """The user's own template from orchard.toml."""

    name = "command"

    def preflight(self) -> str | None:
        """The template's program must exist; a template starting with a placeholder or a shell word is not checked."""
        try:
            first = shlex.split(self.config.template)[0]
        except (ValueError, IndexError):
            return f"template {self.config.template!r} is not a shell command"
        if "{" in first or "=" in first or shutil.which(first) is not None or first in SHELL_WORDS:
            return None
        return f"`{first}` (the template's program) is not on PATH"

    def command(self, context: LaunchContext) -> str:
        if not self.config.template:
            raise UsageError("launcher.template: the command launcher needs a template")
        return render_command(self.config.template, context.paths.placeholders())


LAUNCHERS: dict[str, type[Launcher]] = {
    cls.name: cls
    for cls in (ClaudeLauncher, CodexLauncher, CursorLauncher, AiderLauncher, PatchLauncher, CommandLauncher)
}


SHELL_WORDS = ("cd", "exec", "set", "export", "if", "for", "while", "(", "{", "!", "true", ":", "echo", "test")


def make_launcher(config: LauncherConfig, label: str = "") -> Launcher:
    """The launcher orchard.toml's [launcher] section (or a [launchers.NAME] table) names."""
    try:
        return LAUNCHERS[config.name](config, label)
    except KeyError:
        raise UsageError(f"launcher.name: unknown launcher {config.name!r}; known: "
                         f"{', '.join(LAUNCHERS)}") from None


def launcher_for(config: Config, name: str = "") -> Launcher:
    """The launcher a hypothesis names (a [launchers.NAME] table); empty: the lab's default [launcher]."""
    if not name:
        return make_launcher(config.launcher)
    if name not in config.launchers:
        defined = ", ".join(config.launchers) or "none"
        raise UsageError(f"launcher {name!r} is not defined in orchard.toml (defined [launchers.NAME]: {defined}); "
                         "add the table or leave the hypothesis's launcher empty for the default")
    return make_launcher(config.launchers[name], name)


def preflight(config: Config, launchers: list[Launcher] | None = None,
              untouched: str = "no hypothesis was touched", workspace: Path | None = None) -> list[str]:
    """The sandbox works and every configured launcher (or those given) can run: its CLI answers `--version`,
    its own status command does not say it is logged out while no credential variable of its is set, and its
    test request (`agent_probe`), run in its worker's sandbox with `workspace` hidden, gets an answer.

    UsageError naming each problem; returns a note for each status command that could not tell and each
    test request answered with a transient error.
    """
    sandbox.preflight(config.workers.sandbox)
    if launchers is None:
        launchers = [make_launcher(config.launcher), *(launcher_for(config, name) for name in config.launchers)]
    problems = sandbox_reach.step_problems(config, workspace or Path.cwd())
    notes: list[str] = []
    for launcher in launchers:
        problem = launcher.preflight() or sandbox_reach.launch_problem(config, workspace or Path.cwd(), launcher.label,
                                                                       launcher.executable)
        check = launcher.check_login() if problem is None else None
        if check is not None and check.blocks:
            problem = check.problem()
        if problem is None:
            if check is not None and (note := check.note()) is not None:
                notes.append(note)
            answer = probe(launcher, config.workers, workspace)
            problem = answer.problem
            notes += [answer.note] if answer.note else []
        if problem is not None:
            problems.append(f"launcher {launcher.label!r}: {problem}")
    if problems:
        raise UsageError("; ".join(problems) + f"; {untouched}")
    return notes
