"""The scripted model endpoint's HTTP server: one request, one script step, one log line.

A stdlib threading server on 127.0.0.1 (port chosen by the OS). Each wire
format is one module with the same four functions; the path a request is
sent to picks the module. Every request, matched or not, is logged as one
JSON line before it is answered, so a test reads what the CLI sent even when
the reply stalls.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from tests.agents.endpoint import anthropic, chat, responses
from tests.agents.endpoint.exchange import Asked, Reply
from tests.agents.endpoint.script import Script

STALL_LIMIT_S = 3600.0  # a stalled reply waits this long, or until the server process is stopped


class Wire(Protocol):
    """One API's request and reply shapes."""

    @property
    def PATHS(self) -> tuple[str, ...]: ...  # noqa: N802 (a module constant)

    def parse(self, body: dict[str, Any]) -> Asked: ...

    def message(self, reply: Reply, asked: Asked, ids: str) -> dict[str, Any]: ...

    def events(self, reply: Reply, asked: Asked, ids: str) -> list[bytes]: ...

    def error(self, reply: Reply) -> dict[str, Any]: ...


# one module per wire format
WIRES: tuple[Wire, ...] = (anthropic, responses, chat)


class Endpoint(ThreadingHTTPServer):
    """The server, its script and its request log."""

    daemon_threads = True

    def __init__(self, script: Script, log_path: Path) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = script
        self.log_path = log_path
        self.log_lock = threading.Lock()
        self.count = 0
        self.stopped = threading.Event()

    def record(self, entry: dict[str, Any]) -> int:
        with self.log_lock:
            self.count += 1
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(json.dumps({"n": self.count, **entry}) + "\n")
            return self.count


class Handler(BaseHTTPRequestHandler):
    server: Endpoint
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        """Quiet: the JSON-lines log is the record."""

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        if status == 429:
            self.send_header("retry-after", "0")
        self.end_headers()
        self.wfile.write(data)

    def _unknown(self) -> None:
        self.server.record({"path": self.path, "method": self.command, "step": None, "status": 404})
        self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no {self.path}"}})

    do_GET = do_HEAD = _unknown  # noqa: N815 (the stdlib's names)

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        path = self.path.split("?", 1)[0]
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        wire = next((w for w in WIRES if path in w.PATHS), None)
        if wire is None:
            self.server.record({"path": path, "method": "POST", "step": None, "status": 404, "body": body})
            self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no {path}"}})
            return
        asked = wire.parse(body)
        step, captures, reply = self.server.script.answer(asked)
        ids = uuid.uuid4().hex[:12]
        self.server.record({"path": path, "method": "POST", "step": step, "status": reply.status,
                            "stall_after": reply.stall_after, "captures": captures, "asked": asdict(asked),
                            "headers": {k.lower(): v for k, v in self.headers.items() if k.lower() != "x-api-key"},
                            "body": body})
        if reply.status != 200:
            self._send(reply.status, wire.error(reply))
        elif not asked.stream:
            if reply.stall_after is not None:
                self._stall()
            self._send(200, wire.message(reply, asked, ids))
        else:
            self._stream(wire.events(reply, asked, ids), reply.stall_after)

    def _stream(self, chunks: list[bytes], stall_after: int | None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for index, chunk in enumerate(chunks):
            if stall_after is not None and index >= stall_after:
                self.wfile.flush()
                self._stall()
            self.wfile.write(chunk)
        self.wfile.flush()

    def _stall(self) -> None:
        """Send nothing more, keeping the connection open, until the server is stopped."""
        self.server.stopped.wait(STALL_LIMIT_S)
        raise ConnectionAbortedError("stalled on purpose")
