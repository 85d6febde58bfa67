"""The allowlisting proxy behind `network = "api"`, and the bridge to it inside the worker's sandbox.

`python -m orchard.lab.workers.sandbox.egress_proxy serve SOCKET HOST:PORT` runs outside
the sandbox: it listens on the Unix socket and, per connection, reads one
request head. A CONNECT to HOST:PORT, or a plain-HTTP request whose URL
names it, is connected and piped both ways; anything else is answered 403
before any name is resolved or any connection made, and said on stderr
(the worker's log). It ends on SIGTERM, or when its parent (the worker's
wrapper) is gone.

`python -m orchard.lab.workers.sandbox.egress_proxy bridge SOCKET HOST:PORT PROXY_PORT`
runs inside the sandbox, in its own network namespace: it waits for the
proxy's socket, listens on 127.0.0.1:PROXY_PORT (passed through to the
proxy as is) and, for an endpoint on loopback, on the endpoint's own
address (each connection tunnelled to it with a CONNECT), then goes to the
background, where it dies with the sandbox.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from orchard.lab.records.agent_errors import PROXY_UNREACHABLE
from orchard.lab.records.network import Endpoint, parse_endpoint

TAG = "[orchard egress]"
HEAD_LIMIT = 16 * 1024
CONNECT_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 15.0
PARENT_CHECK_S = 0.5
CHUNK = 64 * 1024
HOP_FIELDS = (b"connection:", b"proxy-connection:", b"keep-alive:")


def say(text: str) -> None:
    print(f"{TAG} {text}", file=sys.stderr, flush=True)


class Silent(Exception):
    """A client that closed before sending a byte (the bridge's readiness probe): nothing to answer or say."""


def read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    """A request head (through its blank line) and whatever came after it; ValueError if none comes whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            raise ValueError(f"no request head in the first {HEAD_LIMIT} bytes")
        chunk = conn.recv(CHUNK)
        if not chunk:
            if not data:
                raise Silent
            raise ValueError("the connection closed before a whole request head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def pipe(one: socket.socket, other: socket.socket) -> None:
    """Copy bytes both ways until both sides have finished sending."""
    open_ends = {one: other, other: one}
    with selectors.DefaultSelector() as selector:
        for sock in open_ends:
            selector.register(sock, selectors.EVENT_READ)
        while open_ends:
            for key, _ in selector.select():
                source = key.fileobj
                assert isinstance(source, socket.socket)
                try:
                    data = source.recv(CHUNK)
                except OSError:
                    data = b""
                target = open_ends[source]
                try:
                    if data:
                        target.sendall(data)
                        continue
                    target.shutdown(socket.SHUT_WR)
                except OSError:
                    return
                selector.unregister(source)
                del open_ends[source]


def destination(head: bytes) -> tuple[Endpoint, bytes | None]:
    """Where a request head asks to go, and the head to send on (None: a CONNECT, answered here)."""
    line, _, fields = head.partition(b"\r\n")
    try:
        method, target, version = line.decode("latin-1").split(" ")
    except ValueError:
        raise ValueError(f"not a proxy request: {line[:120]!r}") from None
    if method == "CONNECT":
        return parse_endpoint(target), None
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"not a proxy request: {method} {target[:120]}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    endpoint = Endpoint(parts.hostname.lower(), parts.port or 80)
    # One request per connection: a next one the client sent on it would reach the endpoint unread.
    kept = [field for field in fields.split(b"\r\n") if field and not field.lower().startswith(HOP_FIELDS)]
    sent = [f"{method} {path} {version}".encode("latin-1"), *kept, b"Connection: close", b"", b""]
    return endpoint, b"\r\n".join(sent)


def _answer(conn: socket.socket, status: str, body: str = "") -> None:
    data = body.encode()
    conn.sendall(f"HTTP/1.1 {status}\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)


def handle(conn: socket.socket, allowed: Endpoint) -> None:
    """One client of the proxy: piped to its one destination if that is the endpoint, else refused."""
    with conn:
        try:
            _handle(conn, allowed)
        except (OSError, Silent):
            pass  # the client or the endpoint went away


def _handle(conn: socket.socket, allowed: Endpoint) -> None:
    try:
        head, rest = read_head(conn)
        wanted, forward = destination(head)
    except ValueError as error:
        say(f"refused: {error}")
        _answer(conn, "400 Bad Request")
        return
    if wanted != allowed:  # before any name is resolved: nothing but the endpoint is ever looked up
        say(f"refused {wanted}: only the launcher's model endpoint {allowed} is reachable (network = \"api\")")
        _answer(conn, "403 Forbidden", f"orchard: network = \"api\" allows only {allowed}\n")
        return
    try:
        upstream = socket.create_connection((allowed.host, allowed.port), timeout=CONNECT_TIMEOUT_S)
    except OSError as error:
        say(f"cannot reach {allowed}: {error}")
        _answer(conn, "502 Bad Gateway", f"{PROXY_UNREACHABLE} {allowed}: {error}\n")
        return
    with upstream:
        upstream.settimeout(None)
        conn.settimeout(None)
        if forward is None:
            conn.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            upstream.sendall(forward)
        if rest:
            upstream.sendall(rest)
        pipe(conn, upstream)


def _thread(target: Callable[..., None], *args: object) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()


def listen_unix(socket_path: Path) -> socket.socket:
    """The proxy's listening socket at `socket_path`, bound by its name from its directory (this process's
    cwd from now on): a workspace path can be longer than a socket's path may be."""
    os.chdir(socket_path.parent)
    Path(socket_path.name).unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(socket_path.name)
    os.chmod(socket_path.name, 0o666)  # the sandbox's command runs as the unprivileged sandbox uid (confine.py)
    server.listen(64)
    return server


def serve(server: socket.socket, allowed: Endpoint, stop: threading.Event | None = None) -> None:
    """Answer clients of `server` until `stop` or the parent's end; each client in its own thread."""
    parent = os.getppid()
    stop = stop or threading.Event()
    server.settimeout(PARENT_CHECK_S)
    while not stop.is_set() and os.getppid() == parent:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        conn.settimeout(CONNECT_TIMEOUT_S)
        _thread(handle, conn, allowed)


def _connect(socket_path: Path) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(socket_path.name)
    except OSError:
        client.close()
        raise
    return client


def _relay(conn: socket.socket, socket_path: Path, tunnel: Endpoint | None) -> None:
    """One connection inside the sandbox, to the proxy: as it comes, or first tunnelled to `tunnel`."""
    with conn:
        try:
            upstream = _connect(socket_path)
        except OSError as error:
            say(f"the proxy is gone: {error}")
            return
        with upstream:
            if tunnel is not None:
                upstream.sendall(f"CONNECT {tunnel} HTTP/1.1\r\nHost: {tunnel}\r\n\r\n".encode())
                try:
                    answer, rest = read_head(upstream)
                except (OSError, ValueError, Silent):
                    return
                if b" 200 " not in answer.split(b"\r\n", 1)[0] + b" ":
                    return
                if rest:
                    conn.sendall(rest)
            pipe(conn, upstream)


def _accept(server: socket.socket, socket_path: Path, tunnel: Endpoint | None) -> None:
    while True:
        conn, _ = server.accept()
        _thread(_relay, conn, socket_path, tunnel)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(64)
    return server


def _tunnel_hosts(allowed: Endpoint) -> list[str]:
    return ["127.0.0.1", "::1"] if allowed.host == "localhost" else [allowed.host]


def bridge(socket_path: Path, allowed: Endpoint, proxy_port: int) -> int:
    """Wait for the proxy, listen, go to the background; 1 (and why, on stderr) if it cannot."""
    os.chdir(socket_path.parent)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            _connect(socket_path).close()
            break
        except OSError as error:
            if time.monotonic() > deadline:
                say(f"the proxy did not come up within {READY_TIMEOUT_S:g} s ({error}); the worker has no network")
                return 1
            time.sleep(0.02)
    try:
        listeners: list[tuple[socket.socket, Endpoint | None]] = [(_listen("127.0.0.1", proxy_port), None)]
        if allowed.loopback:
            for host in _tunnel_hosts(allowed):
                try:
                    listeners.append((_listen(host, allowed.port), allowed))
                except OSError:
                    if host != "::1":  # a sandbox without IPv6 loopback still has 127.0.0.1
                        raise
    except OSError as error:
        say(f"cannot listen inside the sandbox: {error}")
        return 1
    if os.fork() != 0:
        return 0  # the launch line goes on; the child serves until the sandbox ends
    for server, tunnel in listeners[1:]:
        _thread(_accept, server, socket_path, tunnel)
    _accept(listeners[0][0], socket_path, listeners[0][1])
    return 0


def main(argv: list[str]) -> int:
    verb, socket_path, allowed = argv[0], Path(argv[1]), parse_endpoint(argv[2])
    if verb == "bridge":
        return bridge(socket_path, allowed, int(argv[3]))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with listen_unix(socket_path) as server:
        serve(server, allowed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
