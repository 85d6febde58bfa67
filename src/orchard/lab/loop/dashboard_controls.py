"""The dashboard's steering controls: stop one experiment's worker, pause the lab, resume it.

They call the functions `orchard stop`, `orchard pause` and `orchard resume` call (lab/loop/steering.py), so
a request from the dashboard is journaled and carried out as one from the command line. Who asked: the user
who started `orchard serve` (the token was printed to them: whoever clicks holds it), through the dashboard,
from the browser's address. `orchard serve` guards these routes (the token, POST only, same origin); a bad
request (no such experiment, nothing to resume) answers 400 with the command line's one message.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from orchard.errors import UsageError
from orchard.lab.db.state import LabState
from orchard.lab.loop.steering import ask_stop, pause, resume
from orchard.lab.workers.workspace.workspace import Workspace

Act = Callable[[LabState, str], str]


def who(request: Request) -> str:
    """The token's holder through the dashboard, as the journal records who asked."""
    address = request.client.host if request.client else "an unknown address"
    return f"{getpass.getuser()} via the dashboard from {address}"


def routes(ws: Workspace) -> Sequence[BaseRoute]:
    """POST /api/stop/{experiment} (`?kill=1`: KILL its hypothesis), /api/pause, /api/resume."""

    def act(request: Request, do: Act) -> Response:
        state = LabState.open(ws.root)
        try:
            state.check_intact()
            said = do(state, who(request))
        except UsageError as error:
            return PlainTextResponse(f"{error}\n", status_code=400)
        finally:
            state.close()
        return PlainTextResponse(f"{said}\n", headers={"Cache-Control": "no-store"})

    def stop(request: Request) -> Response:
        name, kill = request.path_params["experiment"], request.query_params.get("kill") == "1"
        return act(request, lambda state, by: ask_stop(ws, state, name, requeue=not kill, by=by))

    def pause_lab(request: Request) -> Response:
        return act(request, lambda state, by: pause(ws, state, by))

    def resume_lab(request: Request) -> Response:
        return act(request, lambda state, by: resume(ws, state, by, {}))

    return [Route("/api/stop/{experiment}", stop, methods=["POST"]),
            Route("/api/pause", pause_lab, methods=["POST"]),
            Route("/api/resume", resume_lab, methods=["POST"])]
