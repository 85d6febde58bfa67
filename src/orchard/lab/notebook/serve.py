"""`orchard serve`: a live web dashboard of one lab, and its steering controls.

A small Starlette app run by uvicorn. It opens lab.db read-only (SQLite
`mode=ro`; under WAL a reader never blocks the lab's writes) and builds one
snapshot for all clients, and only when something it shows changed (lab.db,
a log, the measurement lock; checked at most every `REFRESH_S`, rebuilt at
least every `settled.RECHECK_S` for the clocks), so fifty browsers cost the lab no
more than one and an idle lab costs a few stat calls a second. The page
polls `/api/page` with the version it has; the server answers 204 while
nothing changed. The server lowers its own CPU priority: on the lab's
machine the lab's builds and verdicts come first.

It binds to 127.0.0.1 unless told otherwise. On any other address every
request needs the token printed at start (`?token=` once, then a cookie, or
`Authorization: Bearer`): a lab's logs and hypotheses are not for anonymous
readers on the network. A control (stop, pause, resume: routes the command
line hands in, as the dashboard's floor cannot steer a lab) changes the lab,
so it needs the token on loopback too (any local program or web page reaches
loopback), is a POST, and takes the token only from the cookie (SameSite
strict: another site's form never carries it) or the header (another site's
script cannot set it), from this dashboard's own origin.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from orchard.errors import UsageError
from orchard.lab.db.settled import Settled
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import lock_status
from orchard.lab.notebook import experiment_page, pages, view
from orchard.lab.notebook.chart_cache import ChartCache
from orchard.lab.workers.workspace.workspace import Workspace

DEFAULT_HOST = "127.0.0.1"
REFRESH_S = 1.0
NICENESS = 10
COOKIE = "orchard_token"
READS = ("GET", "HEAD")
Say = Callable[[str], None]
Controls = Callable[[Workspace], Sequence[BaseRoute]]  # the steering routes of one lab


class Snapshots:
    """The one page every client sees, built again only when what it shows may have changed."""

    def __init__(self, ws: Workspace, state: LabState) -> None:
        self.ws, self.state = ws, state
        self._lock = threading.Lock()
        self._charts = ChartCache()
        self._page: pages.Page | None = None
        self._json = ""
        self._checked = 0.0
        self._settled = Settled()

    def _inputs(self) -> Hashable:
        """Everything a new snapshot could differ in: lab.db's writes, every log, the measurement lock."""
        logs: list[tuple[str, int, int]] = []
        try:
            with os.scandir(self.ws.logs_dir) as entries:
                for entry in entries:
                    if entry.is_file():
                        found = entry.stat()
                        logs.append((entry.name, found.st_mtime_ns, found.st_size))
        except OSError:
            pass
        return self.state.version(), tuple(sorted(logs)), lock_status()

    def page(self) -> tuple[str, str]:
        """(version, JSON) of the current page."""
        with self._lock:
            now = time.monotonic()
            if self._page is None or now - self._checked >= REFRESH_S:
                self._checked = now
                inputs = self._inputs()
                if self._page is None or not self._settled.unchanged(inputs):
                    snapshot = view.build(self.ws, self.state)
                    self._page = pages.build_page(snapshot, live=True, cache=self._charts)
                    self._json = self._page.to_json()
                    self._settled.decided(inputs)
            return self._page.version, self._json

    def experiment(self, name: str) -> str | None:
        """An experiment's own page (None: no such experiment), read when asked for."""
        with self._lock:
            found = experiment_page.read_page(self.ws, self.state, name)
        return None if found is None else experiment_page.page_html(self.ws, found)

    def view_json(self) -> str:
        with self._lock:
            return view.to_json(view.build(self.ws, self.state))


class TokenGate(BaseHTTPMiddleware):
    """401 for a control without the token, and for every request when reads are guarded too; `?token=` on a
    page sets a cookie so scripts need nothing more; 403 for a control from another origin."""

    def __init__(self, app: ASGIApp, token: str, guard_reads: bool) -> None:
        super().__init__(app)
        self.token, self.guard_reads = token, guard_reads

    def _given(self, request: Request, *, query: bool) -> tuple[str, bool]:
        found = request.query_params.get("token") if query else None
        if found is not None:
            return found, True
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            return bearer[7:].strip(), False
        return request.cookies.get(COOKIE, ""), False

    def _holds(self, given: str) -> bool:
        return secrets.compare_digest(given.encode(), self.token.encode())

    async def dispatch(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        control = request.method not in READS
        given, from_query = self._given(request, query=not control)
        if (control or self.guard_reads) and not self._holds(given):
            what = "steering the lab needs" if control else "this dashboard needs"
            return PlainTextResponse(f"401: {what} the token `orchard serve` printed at start (open the address "
                                     "it printed)\n", status_code=401)
        if control and not _same_origin(request):
            return PlainTextResponse("403: a control is taken only from the dashboard's own page\n", status_code=403)
        response = await call_next(request)
        if from_query and self._holds(given):
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
        return response


def _same_origin(request: Request) -> bool:
    """Whether the browser says the request comes from this dashboard's page (a client that is no browser
    sends neither header, and had to hold the token to get here)."""
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        return False
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


def make_app(snapshots: Snapshots, token: str, *, guard_reads: bool, controls: Sequence[BaseRoute] = ()) -> Starlette:
    def index(request: Request) -> Response:
        return HTMLResponse(pages.dashboard_html(), headers={"Cache-Control": "no-store"})

    def plotly(request: Request) -> Response:
        return Response(pages.plotly_js(), media_type="text/javascript",
                        headers={"Cache-Control": "max-age=86400"})

    def page(request: Request) -> Response:
        version, body = snapshots.page()
        if request.query_params.get("since") == version:
            return Response(status_code=204)
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    def experiment(request: Request) -> Response:
        html = snapshots.experiment(request.path_params["name"])
        if html is None:
            return PlainTextResponse("404: this lab has no experiment of that name\n", status_code=404)
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    def snapshot(request: Request) -> Response:
        return Response(snapshots.view_json(), media_type="application/json", headers={"Cache-Control": "no-store"})

    routes = [Route("/", index), Route("/static/plotly.min.js", plotly), Route("/api/page", page),
              Route("/api/view", snapshot), Route("/experiment/{name}", experiment), *controls]
    return Starlette(routes=routes, middleware=[Middleware(TokenGate, token=token, guard_reads=guard_reads)])


@dataclass(frozen=True)
class Binding:
    host: str
    port: int
    token: str

    @property
    def guard_reads(self) -> bool:
        """Off loopback, reading needs the token too (steering always does)."""
        return self.host != DEFAULT_HOST

    @property
    def url(self) -> str:
        """An address a browser reaches: for a wildcard bind (0.0.0.0, ::), this machine's name, not the wildcard."""
        host = socket.gethostname() if _wildcard(self.host) else self.host
        return _url(host, self.port, self.token)

    @property
    def local_url(self) -> str | None:
        """On this machine, for a wildcard bind: the loopback address (which the wildcard covers)."""
        if not _wildcard(self.host):
            return None
        return _url("::1" if ":" in self.host else "127.0.0.1", self.port, self.token)


def _wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _url(host: str, port: int, token: str) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/?token={token}"


def bind(host: str, port: int) -> tuple[socket.socket, Binding]:
    """The listening socket (port 0: any free one) and how to reach it, with the token."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: expected 0-65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise UsageError(f"--host {host}: not an address of this machine ({error})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise UsageError(f"--host {host} --port {port}: cannot listen there ({error.strerror})") from None
    sock.listen(128)
    return sock, Binding(host, sock.getsockname()[1], secrets.token_urlsafe(24))


def serve(workspace: Path, host: str = DEFAULT_HOST, port: int = 8765, *, say: Say = print,
          controls: Controls | None = None) -> None:
    """Serve the dashboard until Ctrl-C (or SIGTERM); lab.db is only ever read, but by the controls."""
    ws = Workspace.open(workspace)
    state = LabState.open_readonly(ws.root)
    try:
        sock, binding = bind(host, port)
        os.nice(NICENESS)  # once the address is ours: bad input changes nothing
        try:
            app = make_app(Snapshots(ws, state), binding.token, guard_reads=binding.guard_reads,
                           controls=controls(ws) if controls else ())
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off",
                                                   timeout_graceful_shutdown=3))
            say(f"dashboard of {ws.root}: {binding.url}")
            if binding.local_url:
                say(f"on this machine: {binding.local_url}")
            if binding.guard_reads:
                say(f"not on loopback: every request needs the token {binding.token}")
            else:
                say(f"stop, pause and resume on the dashboard: needs the token {binding.token} (in the address)")
            say("Ctrl-C stops the dashboard (never the lab)")
            try:
                server.run(sockets=[sock])
            except KeyboardInterrupt:
                pass  # uvicorn shut down cleanly, then re-raised the Ctrl-C it caught: stopping is the normal end
            say("dashboard stopped")
        finally:
            sock.close()
    finally:
        state.close()
