"""A worker's network (`[launcher] network = "none" | "api" | "all"`) and its model endpoint's host and port.

Records only: the config reads them, the launchers and the egress proxy
(`workers/sandbox/egress.py`, `workers/sandbox/egress_proxy.py`) act on them.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit


class Network(StrEnum):
    """What a worker's sandbox may reach (`[launcher] network`)."""

    NONE = "none"  # loopback only, its own
    API = "api"  # its launcher's model endpoint, through orchard's proxy, and nothing else
    ALL = "all"  # the host's network


# The older boolean spelling of `network`, still read.
LEGACY = {True: Network.ALL, False: Network.NONE}

@dataclass(frozen=True)
class Endpoint:
    """A model endpoint's host (as its URL names it, lower case) and port: the one door of `api`."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        """The endpoint is on this machine's loopback (a local model server, a scripted endpoint)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def endpoint(url: str) -> Endpoint:
    """The endpoint of an http(s) base URL; ValueError saying what is wrong with it."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise ValueError(f"{url!r} is not a URL ({error})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL with a host")
    return Endpoint(parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80))


def parse_endpoint(text: str) -> Endpoint:
    """`host:port` (IPv6 in brackets), as the proxy's command line and a CONNECT line write it."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not host:port")
    return Endpoint(host.strip("[]").lower(), int(port))
