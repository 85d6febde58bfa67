"""The interrupted publication's fault fixture: a loopback smart-HTTP git remote that takes the push request, then
drops the connection before it answers, and reports what it received and whether the ref moved."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from orchard.bench.lanes import pushwire

MAX_REQUEST_BYTES = 64 * 1024 * 1024


REQUEST_TIMEOUT_S = 2.0


@dataclass
class _Request:
    service: str | None = None
    head: bytes = b""
    body: bytes = b""
    parsed: pushwire.PushRequest | None = None


@dataclass
class FixtureReport:
    """What the fixture saw, independent of anything the CLI said."""

    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def mutation_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["commands"] or r["state"] != "complete"]

    def fields(self) -> dict[str, Any]:
        mutations = self.mutation_requests
        first = mutations[0] if mutations else None
        if first is None:
            delivery = "no_request_observed"
        else:
            delivery = {
                "complete": "complete_request_observed",
                "partial": "partial_request_observed",
                "invalid": "invalid_request_framing",
            }[first["state"]]
        return {
            "fixture_delivery_state": delivery,
            "fixture_received_complete_request_before_disconnect": bool(first and first["state"] == "complete"),
            "fixture_request_framing_valid": bool(first and first["state"] != "invalid"),
            "fixture_request_error": first and first.get("error"),
            "fixture_request_commands": first and first["commands"],
            "fixture_pack_objects": first and first.get("pack_objects"),
            "mutation_requests_observed": len(mutations),
            "blind_replay_requests": max(0, len(mutations) - 1),
            "network_request_bytes_observed": first and first["bytes"],
        }


class DropAfterPushRequest:
    """A `transport.Fault`: withholds each git push from the server, drops it when complete."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, _Request] = {}
        self.report = FixtureReport()

    def client_bytes(self, connection: int, data: bytes) -> tuple[bytes, bool]:
        with self._lock:
            request = self._open.setdefault(connection, _Request())
            if request.service is None:
                request.head += data
                try:
                    found = pushwire.service_request(request.head)
                except pushwire.InvalidRequest:
                    request.service = "unparsed"
                    return request.head, False
                if found is None:
                    return b"", False
                request.service, end = found
                forward, data = request.head[:end], request.head[end:]
                if not request.service.startswith("git-receive-pack"):
                    return forward + data, False
            elif not request.service.startswith("git-receive-pack"):
                return data, False
            else:
                forward = b""
            request.body += data
            if not request.body:
                return forward, False
            request.parsed = pushwire.parse_push(request.body)
            if request.parsed.state == "partial" and len(request.body) <= MAX_REQUEST_BYTES:
                return forward, False
            self._finish(connection)
            return forward, True

    def client_closed(self, connection: int) -> None:
        with self._lock:
            if connection in self._open:
                self._finish(connection)

    def _finish(self, connection: int) -> None:
        request = self._open.pop(connection)
        if request.service is None or not request.service.startswith("git-receive-pack") or not request.body:
            return
        parsed = request.parsed or pushwire.parse_push(request.body)
        self.report.requests.append(
            {
                "state": parsed.state,
                "commands": parsed.commands,
                "pack_objects": parsed.pack_objects,
                "bytes": len(request.body),
                "error": parsed.error,
            }
        )


class DropPushHandler(BaseHTTPRequestHandler):
    """Oak's push endpoint, reduced to: read the whole POST, then hang up."""

    server_version = "orchard-interruption/1"

    def log_message(self, *_args: object) -> None:
        return

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._reply(404, b'{"error": "absent synthetic repo"}')

    def do_POST(self) -> None:  # noqa: N802
        lengths = self.headers.get_all("Content-Length") or []
        text = lengths[0].strip() if len(lengths) == 1 else ""
        declared = int(text) if text.isdecimal() else None
        valid = declared is not None and declared <= MAX_REQUEST_BYTES and "Transfer-Encoding" not in self.headers
        body = b""
        if valid and declared is not None:
            self.connection.settimeout(REQUEST_TIMEOUT_S)
            try:
                while len(body) < declared:
                    chunk = self.rfile.read1(declared - len(body))
                    if not chunk:
                        break
                    body += chunk
            except OSError:
                pass
        if self.path != "/api/oak/repo/push":
            self._reply(200 if self.path == "/api/repos" else 404, b'{"name": "repo"}')
            return
        state = "invalid" if not valid else ("complete" if len(body) == declared else "partial")
        self.server.report.requests.append(  # type: ignore[attr-defined]
            {"state": state, "commands": ["POST /api/oak/repo/push"], "bytes": len(body), "pack_objects": None}
        )
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
