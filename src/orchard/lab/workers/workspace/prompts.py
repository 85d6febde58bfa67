"""The worker's prompt: `prompts/<experiment>.md`, rendered from `templates/worker.md`.

The template is plain Markdown with `$name` fields (Python's string.Template,
so commands and JSON in it need no escaping). Everything a worker needs is
written out: the hypothesis, the files it may touch, absolute paths computed
now, the exact commands with the binary passed explicitly, the rules, the
report's schema, and the bench's own changeset guidance when it has one.
"""

from __future__ import annotations

import json
import string
from importlib import resources
from pathlib import Path

from orchard.lab.records.experiment import Experiment
from orchard.lab.workers.workspace import report
from orchard.lab.workers.workspace.paths import experiment_commands, experiment_paths
from orchard.lab.workers.workspace.workspace import Workspace

NOT_CONFIGURED = "(none configured for this lab: skip this step)"


def _template() -> string.Template:
    text = resources.files("orchard.lab").joinpath("templates/worker.md").read_text(encoding="utf-8")
    return string.Template(text)


def _command(command: str) -> str:
    return f"`{command}`" if command else NOT_CONFIGURED


def _guidance(workspace: Workspace, bench_dir: Path) -> str:
    relative = workspace.config.bench.guidance
    path = bench_dir / relative if relative else None
    if path is None or not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    return f"\n## The benchmark's own guidance ({relative})\n\n{text}\n"


def prompt_text(workspace: Workspace, experiment: Experiment) -> str:
    """The prompt for `experiment`, with every path absolute and every command filled in."""
    paths = experiment_paths(workspace, experiment)
    commands = experiment_commands(workspace, paths)
    hypothesis = experiment.hypothesis
    scope = "\n".join(f"- `{entry}`" for entry in hypothesis.scope) or (
        "- any file in your checkout but the tests (this hypothesis names no scope)"
    )
    example = dict(report.EXAMPLE, experiment=experiment.name)
    return _template().substitute(
        experiment=experiment.name,
        title=hypothesis.title,
        metric=hypothesis.metric,
        current_value=hypothesis.current_value or "(not given)",
        suspected_cause=hypothesis.suspected_cause or "(not given)",
        change=hypothesis.change,
        predicted_effect=hypothesis.predicted_text,
        lane=hypothesis.lane,
        target_dir=paths.target_dir,
        bench_dir=paths.bench_dir,
        binary=paths.binary or "(this lab builds no binary)",
        report=paths.report,
        scope=scope,
        build=_command(commands.build),
        test=_command(commands.test),
        measure=_command(commands.measure),
        report_example=json.dumps(example, indent=2),
        guidance=_guidance(workspace, paths.bench_dir),
        review_note=", and a reviewer reads every win's diff before it lands" if (
            workspace.config.review.launcher or workspace.config.review.template) else "",
    )


def render_prompt(workspace: Workspace, experiment: Experiment) -> Path:
    """Write `prompts/<experiment>.md` and return its path."""
    path = workspace.prompt_path(experiment.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prompt_text(workspace, experiment), encoding="utf-8", errors="surrogateescape")  # as given
    return path
