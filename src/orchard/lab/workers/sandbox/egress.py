"""How a worker's `network = "api"` (`records/network.py`) is made to hold.

`all` shares the host's network; `none` gives the sandbox a network
namespace of its own, loopback only. `api` does the same and gives back one
door: orchard runs a small allowlisting proxy outside the sandbox
(`egress_proxy.py`), listening on a Unix socket in a directory bound
read-only into the sandbox, and a bridge inside it that listens on the
sandbox's own loopback. The CLI is pointed at the bridge by the usual proxy
variables (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, lower-case too, with
`NO_PROXY` emptied); when the endpoint is on this machine's loopback, the
bridge also listens at the endpoint's own address inside the sandbox, so a
CLI that never proxies loopback still reaches it, and only it. The proxy
lets through CONNECT (or a plain-HTTP request) to the endpoint's host and
port exactly as the launcher names them, and refuses everything else
before resolving the name: not other local ports, not the lab's git
daemon, not the internet.

The proxy is a process of the worker's own wrapper (started before the
sandbox, ended after it), so it lives for the worker's life and dies with
its process tree when the worker is killed.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from orchard.lab.records.network import Endpoint

# Where the bridge listens for the CLI's proxy variables, inside the sandbox's own network namespace.
PROXY_PORT = 3128
# Exit code of the launch line when the bridge could not start: the launch line could not run (a launcher failure).
BRIDGE_FAILED = 126
SOCKET_NAME = "proxy.sock"
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")


@dataclass(frozen=True)
class Egress:
    """One worker's way out under `api`: its endpoint, the directory of the proxy's socket, the Python to run."""

    endpoint: Endpoint
    directory: Path  # holds the proxy's Unix socket; bound read-only into the sandbox
    python: str = sys.executable

    @property
    def proxy_port(self) -> int:
        return PROXY_PORT + 1 if self.endpoint.port == PROXY_PORT else PROXY_PORT

    def environment(self) -> dict[str, str]:
        """The proxy variables the CLI reads, pointing at the bridge inside its sandbox."""
        url = f"http://127.0.0.1:{self.proxy_port}"
        values = {name: url for name in PROXY_VARIABLES}
        values |= {name.lower(): url for name in PROXY_VARIABLES}
        return values | {"NO_PROXY": "", "no_proxy": ""}

    def _module(self, verb: str, *more: str) -> str:
        words = [self.python, "-m", "orchard.lab.workers.sandbox.egress_proxy", verb, str(self.directory / SOCKET_NAME),
                 str(self.endpoint), *more]
        return shlex.join(words)

    def outside(self, env_prefix: str) -> str:
        """Shell lines that start the proxy in the background (under `env_prefix`, e.g. `env -i ...`)."""
        return f"{env_prefix} {self._module('serve')} &\norchard_egress=$!\n"

    def after(self) -> str:
        """Shell lines, after the sandbox ended, that stop the proxy and keep the sandbox's exit status."""
        return "orchard_rc=$?\nkill $orchard_egress 2>/dev/null\nwait $orchard_egress 2>/dev/null\n(exit $orchard_rc)"

    def inside(self, launch: str) -> str:
        """`launch` preceded by the bridge, inside the sandbox; if the bridge cannot start, nothing runs."""
        bridge = self._module("bridge", str(self.proxy_port))
        return f"{bridge} || exit {BRIDGE_FAILED}\n{launch}"
