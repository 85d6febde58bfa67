"""A scripted model endpoint: a local HTTP server that answers agent CLIs from a script file.

`ScriptedEndpoint.start(script, log)` runs `python -m tests.agents.endpoint`
as its own process group on 127.0.0.1 (the OS picks the port) and returns
once it listens; `requests()` reads its log back as typed records; `stop()`
ends it by its own process group. The `endpoint` fixture
(tests/agents/conftest.py) does both around a test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.agents.endpoint.exchange import Asked

ROOT = Path(__file__).resolve().parents[3]  # the repository: `tests` is a package from here
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
START_LIMIT_S = 30.0


@dataclass(frozen=True)
class LoggedRequest:
    """One request the endpoint got: which step answered it (None: no step), and what was sent."""

    n: int
    path: str
    step: str | None
    status: int
    asked: Asked | None  # None for a path no wire format serves
    captures: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_line(cls, line: str) -> LoggedRequest:
        item = json.loads(line)
        asked = item.get("asked")
        return cls(n=item["n"], path=item["path"], step=item.get("step"), status=item["status"],
                   asked=Asked(**{**asked, "tools": tuple(asked["tools"])}) if asked else None,
                   captures=item.get("captures") or {}, body=item.get("body") or {},
                   headers=item.get("headers") or {})


@dataclass
class ScriptedEndpoint:
    """A running endpoint process: its URL, its log, its process group."""

    process: subprocess.Popen[str]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, script: Path, log_path: Path, env: dict[str, str] | None = None) -> ScriptedEndpoint:
        """Serve `script` (a path, or a name under tests/agents/scripts/); logs to `log_path`."""
        if not script.is_absolute() and not script.exists():
            script = SCRIPTS / script
        log_path.touch()
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.agents.endpoint", str(script), str(log_path)], cwd=ROOT,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, env={**os.environ, **(env or {})})
        assert process.stdout is not None
        first = process.stdout.readline()  # the server prints it once bound; EOF if it died
        if not first.startswith("listening on "):
            rest = first + process.stdout.read()
            process.wait(START_LIMIT_S)
            raise RuntimeError(f"the scripted endpoint did not start: {rest.strip()}")
        return cls(process, int(first.split()[-1]), log_path)

    def requests(self) -> list[LoggedRequest]:
        """Every request so far, in the order they came."""
        return [LoggedRequest.from_line(line) for line in self.log_path.read_text().splitlines() if line.strip()]

    def stop(self) -> str:
        """End the server's process group (it is its own); return what it printed after starting."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        assert self.process.stdout is not None
        output = self.process.stdout.read()
        self.process.stdout.close()
        return output
