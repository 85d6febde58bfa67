"""The Launcher: what every worker's launch line shares, whichever CLI it starts.

A launcher renders a bash launch line from the experiment's prompt file and
paths, names the scratch files its CLI drops into the checkout (ignored
there, so they never count as changes), declares the credentials its CLI
reads (the only secrets its worker inherits) and what it reads and writes
outside its checkout, which is all its sandbox (`sandbox.py`) lets it see
besides; it turns all that into the executor's `Job`. An agent launcher also
names its CLI's own login status command and how to read its answer
(`agent_login.py`), so a lab whose agent is not logged in stops before any
hypothesis is touched.
"""

from __future__ import annotations

import os
import shlex
import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from orchard.errors import UsageError
from orchard.lab.config.prices import ModelPrice
from orchard.lab.config.sections import LauncherConfig, WorkersConfig
from orchard.lab.records.agent_errors import AgentError, AgentErrorKind
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.experiment import Commands, Experiment, ExperimentPaths
from orchard.lab.records.network import Network, endpoint
from orchard.lab.workers.jobs.job import Job
from orchard.lab.workers.launchers.agent_login import (
    CliAnswer,
    LoginCheck,
    LoginState,
    ask,
    ask_as_worker,
    credentials_set,
)
from orchard.lab.workers.sandbox import sandbox
from orchard.lab.workers.sandbox.allowlist import worker_names
from orchard.lab.workers.sandbox.egress import Egress
from orchard.lab.workers.workspace.paths import experiment_commands, experiment_paths
from orchard.lab.workers.workspace.workspace import Workspace

VERSION_TIMEOUT_S = 30.0
# A shell that could not run the command at all: not executable, not found.
CANNOT_RUN = (126, 127)


@dataclass(frozen=True)
class LaunchContext:
    """What a launcher renders a launch line from."""

    experiment: Experiment
    paths: ExperimentPaths
    commands: Commands
    log_dir: Path
    vcs: str  # the target's VCS kind
    sandbox: str = sandbox.SandboxMode.BWRAP.value  # `[workers] sandbox`: whether orchard confines the CLI


def prompt_arg(prompt_file: Path) -> str:
    """The prompt file's text as one shell word, read when the line runs."""
    return f'"$(cat {shlex.quote(str(prompt_file))})"'


def join_words(words: list[str]) -> str:
    """The words as one shell line, each quoted."""
    return shlex.join(words)


class Launcher(ABC):
    """Renders one agent CLI's launch line and reads its usage back."""

    name: ClassVar[str] = ""
    default_executable: ClassVar[str] = ""
    scratch: ClassVar[tuple[str, ...]] = ()  # files the CLI drops into the checkout
    credentials: ClassVar[tuple[str, ...]] = ()  # variables the CLI authenticates with (`X_*`: a prefix)
    status_command: ClassVar[tuple[str, ...]] = ()  # its CLI's own login status words, e.g. ("auth", "status")
    login_fix: ClassVar[str] = ""  # what the user does when the status says it is not logged in
    default_base_url: ClassVar[str] = ""  # the CLI's own model service, when it has one fixed
    base_url_variable: ClassVar[str] = ""  # the variable the CLI reads its endpoint from, when passed in `pass_env`
    # Variables set for pre-flight's test request only (e.g. no retries: the answer is wanted now).
    probe_env: ClassVar[dict[str, str]] = {}

    def __init__(self, config: LauncherConfig | None = None, label: str = "") -> None:
        self.config = config or LauncherConfig(name=self.name)
        self.label = label or self.name  # as orchard.toml names it: "claude", or a [launchers.NAME] key

    @property
    def executable(self) -> str:
        return self.config.executable or self.default_executable

    def preflight(self) -> str | None:
        """What stops this launcher from running at all (missing CLI, a version flag that fails), or None."""
        found = shutil.which(self.executable)
        if found is None:
            return f"`{self.executable}` is not on PATH (install it, or set its `executable`)"
        answer = ask([found, "--version"], timeout_s=VERSION_TIMEOUT_S)
        if answer.exit_code is None:
            return f"`{self.executable} --version` did not answer: {answer.said(200)}"
        if answer.exit_code != 0:
            tail = answer.output.splitlines()[-1:] or [""]
            return f"`{self.executable} --version` exited {answer.exit_code}: {tail[0][:200]}"
        return None

    def login_state(self, answer: CliAnswer) -> LoginState:
        """What its status command's answer says (default: it cannot tell)."""
        return LoginState.UNKNOWN

    def check_login(self) -> LoginCheck | None:
        """Its CLI's own status command, asked as its worker would ask it; None when it declares none."""
        if not self.status_command:
            return None
        inherit = worker_names(self.credentials, self.config.pass_env)
        answer = ask_as_worker([shutil.which(self.executable) or self.executable, *self.status_command], inherit)
        state = LoginState.UNKNOWN if answer.exit_code is None else self.login_state(answer)
        return LoginCheck(self.label, join_words([self.executable, *self.status_command]), state, answer,
                          self.credentials, credentials_set(self.credentials), self.login_fix)

    def agent_error(self, log_text: str, exit_code: int | None) -> AgentError | None:
        """The error the agent reported in its output (its own words and their kind), or None."""
        if exit_code in CANNOT_RUN:
            lines = [line for line in log_text.splitlines() if line.strip() and not line.startswith("WORKER_DONE_")]
            said = (lines[-1:] or ["no output"])[0][:300]
            return AgentError(AgentErrorKind.OTHER, f"the launch line could not run (exit {exit_code}): {said}")
        return None

    def failure(self, log_text: str, exit_code: int | None) -> str | None:
        """The agent's own account of why it could not work (no credentials, no network, no CLI), or None."""
        error = self.agent_error(log_text, exit_code)
        return None if error is None else error.message

    def model_answered(self, log_text: str) -> bool | None:
        """Whether its model answered at all in this log (None: its CLI prints nothing orchard can tell it by)."""
        return None

    def retry_span_s(self) -> float:
        """How long its CLI may retry a failing endpoint on its own (`cli_retries.py`), added to the worker's
        timeout so a CLI still retrying is not taken for a hung one."""
        return 0.0

    def probe_words(self) -> list[str] | None:
        """Pre-flight's test request: the CLI asked for one short answer, or None when it has none."""
        return None

    def prelude(self) -> str:
        """Shell text run in the sandbox before its CLI (worker and test request alike), ending in `&& `; or ""."""
        return ""

    @abstractmethod
    def command(self, context: LaunchContext) -> str:
        """The bash launch line, run in the worker's target checkout."""

    def usage(self, log_text: str) -> AgentUsage:
        """Cost and tokens from the worker's log (default: the CLI reports none)."""
        return AgentUsage()

    def priced(self, usage: AgentUsage, prices: Mapping[str, ModelPrice]) -> AgentUsage:
        """`usage` with the cost its CLI did not print worked out from its tokens (default: as the CLI said)."""
        return usage

    def _tail(self) -> str:
        """`--model` and the configured extra arguments, for CLIs that take `--model`."""
        words = ["--model", self.config.model] if self.config.model else []
        return join_words(words + list(self.config.args))

    def context(self, workspace: Workspace, experiment: Experiment) -> LaunchContext:
        paths = experiment_paths(workspace, experiment)
        return LaunchContext(experiment, paths, experiment_commands(workspace, paths), workspace.logs_dir,
                             workspace.config.target.vcs, workspace.config.workers.sandbox)

    def reads(self, context: LaunchContext) -> tuple[Path, ...]:
        """What the worker reads outside its checkout: its bench clone and its prompt."""
        return context.paths.bench_dir, context.paths.prompt_file

    def writes(self, context: LaunchContext) -> tuple[Path, ...]:
        """Files the CLI writes outside its checkout (default: none)."""
        return ()

    def base_url(self) -> str:
        """Where its CLI reaches its model: `base_url`, else its own variable when `pass_env` passes it, else the
        CLI's own service ("" when orchard cannot tell)."""
        variable = self.base_url_variable
        if not self.config.base_url and variable and variable in worker_names((), self.config.pass_env):
            return os.environ[variable]
        return self.config.base_url or self.default_base_url

    def environment(self) -> dict[str, str]:
        """Literal variables its CLI gets (not secrets: they are written into the launch script)."""
        return {}

    def egress(self, directory: Path) -> Egress | None:
        """Its one way out under `network = "api"` (the proxy's socket in `directory`); None otherwise."""
        if self.config.network != Network.API:
            return None
        url = self.base_url()
        if not url:
            raise UsageError(f"launcher {self.label!r}: network = \"api\" needs a base_url (orchard does not know "
                             f"the {self.name} CLI's model endpoint)")
        try:
            return Egress(endpoint(url), directory)
        except ValueError as error:
            raise UsageError(f"launcher {self.label!r}: its model endpoint {error}") from None

    def confinement(self, workspace: Workspace, context: LaunchContext, *, cwd: Path, own: list[Path], home: Path,
                    tmp: Path, reads: tuple[Path, ...] = (), path: str | None = None,
                    hide: tuple[Path, ...] = (), hand_over: bool = True) -> sandbox.Confinement:
        """Its sandbox: writable `own` dirs, private `home` and `tmp`, what it reads and writes, its credentials;
        `hide`: more places of the orchestrator's (the lab's workspace, seen from a dask worker)."""
        return self.sandbox(workspace.config.workers, workspace.root, cwd=cwd, own=own, home=home, tmp=tmp,
                            reads=(*self.reads(context), *reads), writes=self.writes(context), path=path, hide=hide,
                            hand_over=hand_over)

    def sandbox(self, workers: WorkersConfig, workspace: Path, *, cwd: Path, own: list[Path], home: Path, tmp: Path,
                reads: tuple[Path, ...] = (), writes: tuple[Path, ...] = (), path: str | None = None,
                hide: tuple[Path, ...] = (), hand_over: bool = True) -> sandbox.Confinement:
        """The sandbox any run of its CLI gets (a worker's, pre-flight's test request): its network, credentials
        and installation, `[workers] sandbox` and `sandbox_read`."""
        return sandbox.worker_confinement(
            workers.sandbox, workspace=workspace, cwd=cwd, network=self.config.network == Network.ALL,
            inherit=worker_names(self.credentials, self.config.pass_env), home=home, tmp=tmp, reads=reads,
            writes=writes, executable=self.executable, own=own, extra_reads=workers.sandbox_read, path=path,
            hide=hide, setenv=self.environment(), egress=self.egress(home.parent / "egress"), limits=workers.limits(),
            hand_over=hand_over)

    def job(self, workspace: Workspace, experiment: Experiment, env: dict[str, str] | None = None,
            hide: tuple[Path, ...] = (), hand_over: bool = True) -> Job:
        """The executor job for `experiment`: its launch line, run sandboxed in its target checkout
        (`hand_over=False`: its checkouts are made after, and handed to the sandbox uid then)."""
        context = self.context(workspace, experiment)
        paths, worker = context.paths, experiment.checkout.worker
        own = [paths.target_dir] + ([] if paths.target_dir in paths.report.parents else [paths.report.parent])
        confinement = self.confinement(workspace, context, cwd=paths.target_dir, own=own, home=worker.home_dir,
                                       tmp=worker.tmp_dir, path=(env or {}).get("PATH"), hide=hide,
                                       hand_over=hand_over)
        return Job(
            name=experiment.name,
            command=self.command(context),
            cwd=paths.target_dir,
            log_path=paths.log_file,
            timeout_s=workspace.config.workers.timeout_minutes * 60.0 + self.retry_span_s(),
            env=dict(env or {}),
            sandbox=confinement,
        )
