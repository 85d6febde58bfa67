"""Asking an agent CLI itself whether it can work: its own login status command, before any hypothesis is touched.

A worker starts with a private, empty HOME and only its launcher's
allowlisted variables (`allowlist.worker_names`), so a login kept in your
home never reaches it. The status command is asked the same way: an empty
HOME and TMPDIR, the worker's variables (an API key there counts), no stdin,
a bounded time, its whole process group killed if it overruns. Only an
answer the launcher recognises as "not logged in" stops the lab, and only
when none of its credential variables is set; a CLI without that command
(an older version), or one that does not answer, is let through with a note.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from orchard.lab.workers.sandbox.allowlist import names

STATUS_TIMEOUT_S = 20.0


class LoginState(StrEnum):
    """What a CLI's status command says about its login."""

    LOGGED_IN = "logged-in"
    LOGGED_OUT = "logged-out"
    UNKNOWN = "unknown"  # no such command (an older CLI), an answer not recognised, or no answer in time


@dataclass(frozen=True)
class CliAnswer:
    """How one CLI call ended: its exit code (None: it could not start or did not end in time) and its output."""

    exit_code: int | None
    output: str  # stdout then stderr, stripped

    def said(self, limit: int = 300) -> str:
        """Its own words, on one line."""
        return " ".join(self.output.split())[:limit] or "no output"


def ask(argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
        timeout_s: float = STATUS_TIMEOUT_S) -> CliAnswer:
    """Run `argv` with no stdin for at most `timeout_s`; its process group is killed if it overruns."""
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, errors="replace", env=env, cwd=cwd, start_new_session=True)
    except OSError as error:
        return CliAnswer(None, str(error))
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        return CliAnswer(None, f"no answer within {timeout_s:.0f} s")
    return CliAnswer(process.returncode, "\n".join(part.strip() for part in (out, err) if part.strip()))


def ask_as_worker(argv: list[str], inherit: tuple[str, ...]) -> CliAnswer:
    """`argv` run as a worker would run it: an empty HOME and TMPDIR, only the variables named in `inherit`."""
    with tempfile.TemporaryDirectory(prefix="orchard-login-") as scratch:
        home, tmp = Path(scratch, "home"), Path(scratch, "tmp")  # apart, as a worker's are
        home.mkdir()
        tmp.mkdir()
        env = {name: os.environ[name] for name in inherit}
        env.update(HOME=str(home), TMPDIR=str(tmp))
        return ask(argv, env=env, cwd=str(home))


@dataclass(frozen=True)
class LoginCheck:
    """One launcher's answer to "can you work?", from its CLI's own status command."""

    launcher: str  # as orchard.toml names it
    command: str  # as run, e.g. `claude auth status`
    state: LoginState
    answer: CliAnswer
    credentials: tuple[str, ...]  # the variables it authenticates with
    credentials_set: tuple[str, ...]  # those the worker would inherit, non-empty
    fix: str  # what the user does about it

    @property
    def blocks(self) -> bool:
        """It says it is not logged in, and no credential variable would reach the worker."""
        return self.state == LoginState.LOGGED_OUT and not self.credentials_set

    def problem(self) -> str:
        exit_text = f"exit {self.answer.exit_code}"
        return (f"`{self.command}` says it is not logged in ({exit_text}: {self.answer.said()}) and none of "
                f"{', '.join(self.credentials)} is set: {self.fix}")

    def note(self) -> str | None:
        """What to say when the status could not tell (the run goes on), or None."""
        if self.state != LoginState.UNKNOWN:
            return None
        what = "did not answer" if self.answer.exit_code is None else f"exit {self.answer.exit_code}"
        return (f"launcher {self.launcher!r}: `{self.command}` could not tell whether it is logged in "
                f"({what}: {self.answer.said(200)}; an older CLI may not have it); its login was not checked")


def credentials_set(credentials: tuple[str, ...]) -> tuple[str, ...]:
    """The credential variables (a worker inherits them all) that hold a value here."""
    return tuple(name for name in names(credentials) if os.environ.get(name))
