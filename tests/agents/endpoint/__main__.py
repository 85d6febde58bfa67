"""`python -m tests.agents.endpoint SCRIPT LOG`: serve SCRIPT on 127.0.0.1, log requests to LOG.

It prints `listening on PORT` once the socket is bound (the port the OS
chose), then serves until it is stopped by a signal.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from tests.agents.endpoint.script import Script
from tests.agents.endpoint.server import Endpoint


def main(argv: list[str]) -> None:
    script_path, log_path = map(Path, argv)
    server = Endpoint(Script.load(script_path), log_path)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.stopped.set()
        server.server_close()


if __name__ == "__main__":
    main(sys.argv[1:])
