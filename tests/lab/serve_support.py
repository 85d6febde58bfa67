"""`orchard serve` as a user starts it: a real process on a real port, stopped by its own pid."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.lab.lab_helpers import wait_for


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str  # as printed, with the token when there is one
    token: str | None
    output: list[str]

    @property
    def base(self) -> str:
        return self.url.split("?", 1)[0]


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    """(status, body, headers) of one GET; HTTP errors are answers too."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers)


@contextmanager
def serving(workspace: Path, *args: str, mark: str = "") -> Iterator[Server]:
    """`orchard serve WORKSPACE --port 0 ARGS` until the block ends, then Ctrl-C (SIGINT) and wait."""
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    process = subprocess.Popen([sys.executable, "-m", "orchard", "serve", str(workspace), "--port", "0", *args],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    output: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            output.append(line)
            if "Ctrl-C" in line:
                break
        found = re.search(r"(http://\S+)", "".join(output))
        assert found, f"serve printed no address: {''.join(output)}"
        token = re.search(r"needs the token (\S+)", "".join(output))
        yield Server(process, found.group(1), token.group(1) if token else None, output)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stderr:
                output.append(process.stderr.read())
                process.stderr.close()


def wait_until_served(server: Server) -> None:
    wait_for(lambda: fetch(server.base + "api/page", _auth(server))[0] == 200, "the dashboard to answer", 60)


def _auth(server: Server) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}"} if server.token else {}
