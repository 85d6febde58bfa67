"""What went wrong when an agent CLI reported an error, sorted by what the lab does about it.

The CLI's own message is always kept as the reason. The kind decides the
outcome: a refused key, a missing model or an endpoint that cannot be
reached is a launcher failure (the lab cannot use that agent; pre-flight
refuses to start); a rate limit or an overloaded service is transient (the
hypothesis waits and is tried again, with backoff); a turn limit or a
refusal is the agent's own end of the experiment (KILLed with its reason).
An endpoint that is overloaded, rate limited or unreachable once the lab runs
is the endpoint's fault, never the hypothesis's (`endpoint_fault`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AgentErrorKind(StrEnum):
    """The kinds of agent errors, by the outcome each needs."""

    AUTH = "auth"  # the key or token was refused (HTTP 401, 403)
    MODEL = "model"  # no such model, or no access to it (HTTP 404)
    UNREACHABLE = "unreachable"  # no HTTP answer at all: connection refused, DNS, no network
    RATE_LIMITED = "rate-limited"  # HTTP 429
    OVERLOADED = "overloaded"  # HTTP 500, 502, 503, 504, 529
    MAX_TURNS = "max-turns"  # the CLI's turn or context limit ended the session
    REFUSAL = "refusal"  # the model refused to go on
    OTHER = "other"  # anything else the CLI reported as an error, or a launch line that could not run

    @property
    def transient(self) -> bool:
        """Worth trying again later: the service said so."""
        return self in (AgentErrorKind.RATE_LIMITED, AgentErrorKind.OVERLOADED)

    @property
    def endpoint_fault(self) -> bool:
        """Mid-run, the endpoint's fault: the hypothesis goes back and waits (pre-flight still refuses an endpoint
        it cannot reach: there it is a setting to fix, not a passing fault)."""
        return self.transient or self == AgentErrorKind.UNREACHABLE

    @property
    def ends_experiment(self) -> bool:
        """The agent worked and stopped on its own: the experiment is judged KILLed with its reason."""
        return self in (AgentErrorKind.MAX_TURNS, AgentErrorKind.REFUSAL)


HTTP_KINDS = {401: AgentErrorKind.AUTH, 403: AgentErrorKind.AUTH, 404: AgentErrorKind.MODEL,
              429: AgentErrorKind.RATE_LIMITED, 500: AgentErrorKind.OVERLOADED, 502: AgentErrorKind.OVERLOADED,
              503: AgentErrorKind.OVERLOADED, 504: AgentErrorKind.OVERLOADED, 529: AgentErrorKind.OVERLOADED}
# Words a CLI's message uses when no HTTP answer came back.
UNREACHABLE_WORDS = ("ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ENETUNREACH", "EHOSTUNREACH",
                     "Connection refused", "Connection error", "Unable to connect")
# Words a CLI's message uses for an overloaded service when it names no status: Codex 0.171.0 says this of a 500.
OVERLOADED_WORDS = ("experiencing high demand", "Overloaded", "Service Unavailable")


# What orchard's egress proxy (workers/sandbox/egress_proxy.py) answers (502) when the endpoint cannot be reached.
PROXY_UNREACHABLE = "orchard: cannot reach"


def http_kind(status: int | None, message: str) -> AgentErrorKind:
    """The kind of an API error from its HTTP status, or from the message when there was no HTTP answer (or
    only the egress proxy's, which says it could not reach the endpoint)."""
    if PROXY_UNREACHABLE in message:
        return AgentErrorKind.UNREACHABLE
    if status is not None:
        return HTTP_KINDS.get(status, AgentErrorKind.OTHER)
    if any(word.lower() in message.lower() for word in UNREACHABLE_WORDS):
        return AgentErrorKind.UNREACHABLE
    if any(word.lower() in message.lower() for word in OVERLOADED_WORDS):
        return AgentErrorKind.OVERLOADED
    return AgentErrorKind.OTHER


@dataclass(frozen=True)
class AgentError:
    """An error the agent CLI reported: its kind, its own message (one line), the HTTP status if any."""

    kind: AgentErrorKind
    message: str
    status: int | None = None
