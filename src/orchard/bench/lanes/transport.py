"""Loopback transports for git remotes: owned servers and a byte-counting proxy.

`--git-remote daemon` serves bare repositories with `git daemon` on
127.0.0.1 (a free port) behind `ByteProxy`, a TCP proxy that counts the bytes
each way, so every measured step can report its network bytes. The proxy can
also carry a `Fault` that sees the client's bytes first and may withhold them
from the server and drop the connection (the interrupted-publication
fixture). Every server process is started in its own process group and
stopped by that group id; every proxy thread is joined on stop.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchard.process import kill_group

LOOPBACK = "127.0.0.1"
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
CHUNK = 65536


def free_port() -> int:
    """A port that was free a moment ago (the server binding it may still race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((LOOPBACK, 0))
        return int(listener.getsockname()[1])


def wait_for_port(port: int, alive: Any = None, timeout_s: float = READY_TIMEOUT_S) -> bool:
    """True once something accepts on 127.0.0.1:port; `alive()` False aborts early."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            return False
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


class OwnedProcess:
    """A server process in its own process group, stopped by that group id."""

    def __init__(self, argv: list[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.argv = argv
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid = self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> bool:
        """Kill the whole group; True when the leader is reaped."""
        kill_group(self.pid)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False
        return True


class GitDaemon:
    """`git daemon` on 127.0.0.1 serving every repository under `base` (push enabled)."""

    def __init__(self, git: str, base: Path, env: Mapping[str, str]) -> None:
        self.base = base
        last_error = "git daemon did not start"
        for _ in range(5):  # the free port can be taken between probe and bind
            self.port = free_port()
            argv = [
                git, "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
                "--informative-errors", f"--listen={LOOPBACK}", f"--port={self.port}",
                f"--base-path={base}", str(base),
            ]
            self.process = OwnedProcess(argv, base, env)
            if wait_for_port(self.port, self.process.alive):
                return
            self.process.stop()
            last_error = f"git daemon exited before listening on port {self.port}"
        raise RuntimeError(last_error)

    def url(self, repo: str) -> str:
        return f"git://{LOOPBACK}:{self.port}/{repo}"

    def stop(self) -> bool:
        return self.process.stop()


class Fault(Protocol):
    """Decides, per connection, what of the client's bytes reach the server."""

    def client_bytes(self, connection: int, data: bytes) -> tuple[bytes, bool]:
        """(bytes to forward upstream, drop the connection now)."""

    def client_closed(self, connection: int) -> None:
        """The client closed its side (or the connection was dropped)."""


@dataclass
class ProxyCounts:
    connections: int = 0
    client_to_server_bytes: int = 0
    server_to_client_bytes: int = 0
    connection_errors: int = 0
    dropped_connections: int = 0

    def row_fields(self) -> dict[str, int]:
        return {
            "network_connections": self.connections,
            "network_client_to_server_bytes": self.client_to_server_bytes,
            "network_server_to_client_bytes": self.server_to_client_bytes,
            "network_connection_errors": self.connection_errors,
        }


@dataclass
class _Link:
    client: socket.socket
    upstream: socket.socket
    threads: list[threading.Thread] = field(default_factory=list)
    closed: bool = False


class ByteProxy:
    """A threaded TCP proxy on 127.0.0.1 that counts bytes and can inject a fault.

    Bytes from the client are counted as received by the proxy, whether or not
    a fault forwards them: that is what a server in its place would have seen.
    """

    def __init__(self, upstream_port: int, fault: Fault | None = None) -> None:
        self.upstream_port = upstream_port
        self.fault = fault
        self._lock = threading.Lock()
        self._counts = ProxyCounts()
        self._links: dict[int, _Link] = {}
        self._next_id = 0
        self._stopping = False
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind((LOOPBACK, 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._acceptor = threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True)
        self._acceptor.start()

    def counts(self) -> ProxyCounts:
        with self._lock:
            return ProxyCounts(**vars(self._counts))

    def reset(self) -> None:
        with self._lock:
            self._counts = ProxyCounts()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((LOOPBACK, self.upstream_port), timeout=READY_TIMEOUT_S)
                upstream.settimeout(None)
            except OSError:
                client.close()
                with self._lock:
                    self._counts.connection_errors += 1
                continue
            with self._lock:
                if self._stopping:
                    client.close()
                    upstream.close()
                    return
                ident = self._next_id
                self._next_id += 1
                self._counts.connections += 1
                link = _Link(client, upstream)
                self._links[ident] = link
            for name, target in (("up", self._pump_up), ("down", self._pump_down)):
                thread = threading.Thread(target=target, args=(ident, link), name=f"proxy-{ident}-{name}", daemon=True)
                link.threads.append(thread)
                thread.start()

    def _close(self, link: _Link) -> None:
        with self._lock:
            if link.closed:
                return
            link.closed = True
        for sock in (link.client, link.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _pump_up(self, ident: int, link: _Link) -> None:
        dropped = False
        try:
            while True:
                data = link.client.recv(CHUNK)
                if not data:
                    break
                with self._lock:
                    self._counts.client_to_server_bytes += len(data)
                forward, dropped = (data, False) if self.fault is None else self.fault.client_bytes(ident, data)
                if forward:
                    link.upstream.sendall(forward)
                if dropped:
                    with self._lock:
                        self._counts.dropped_connections += 1
                    break
            if not dropped:
                link.upstream.shutdown(socket.SHUT_WR)  # half-close: the reply may still come
                return
        except OSError:
            dropped = True
        finally:
            if self.fault is not None:
                self.fault.client_closed(ident)
        self._close(link)

    def _pump_down(self, ident: int, link: _Link) -> None:
        try:
            while True:
                data = link.upstream.recv(CHUNK)
                if not data:
                    break
                with self._lock:
                    self._counts.server_to_client_bytes += len(data)
                link.client.sendall(data)
        except OSError:
            pass
        self._close(link)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            links = list(self._links.values())
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._acceptor.join(timeout=STOP_TIMEOUT_S)
        for link in links:
            self._close(link)
            for thread in link.threads:
                thread.join(timeout=STOP_TIMEOUT_S)


@dataclass
class Remote:
    """Where a flow publishes, and what the rows say about it."""

    url: str
    transport: str
    server: str | None
    bare: Path | None = None  # the bare repository behind a local or loopback git remote
    repo: str | None = None  # oak repository spec
    proxy: ByteProxy | None = None

    def row_fields(self) -> dict[str, Any]:
        return {"remote_transport": self.transport, "remote_server": self.server}


class LoopbackServers:
    """Owns every server and proxy a lane run starts; `close()` stops them all."""

    def __init__(self, git: str, root: Path, env: Mapping[str, str]) -> None:
        self.git = git
        self.served = root / "served"
        self.env = env
        self._daemon: GitDaemon | None = None
        self._proxies: list[ByteProxy] = []
        self.processes: list[OwnedProcess] = []

    def daemon(self) -> GitDaemon:
        if self._daemon is None:
            self.served.mkdir(parents=True, exist_ok=True)
            self._daemon = GitDaemon(self.git, self.served, self.env)
        return self._daemon

    def proxy(self, upstream_port: int, fault: Fault | None = None) -> ByteProxy:
        proxy = ByteProxy(upstream_port, fault)
        self._proxies.append(proxy)
        return proxy

    def start(self, argv: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> OwnedProcess:
        """A server the lane owns (`env` laid over the pinned environment)."""
        process = OwnedProcess(argv, cwd, {**self.env, **(env or {})})
        self.processes.append(process)
        return process

    def close(self) -> bool:
        """Stop everything; True when every process was reaped."""
        stopped = True
        for proxy in self._proxies:
            proxy.stop()
        self._proxies.clear()
        if self._daemon is not None:
            stopped = self._daemon.stop() and stopped
            self._daemon = None
        for process in self.processes:
            stopped = process.stop() and stopped
        self.processes.clear()
        return stopped

    def __enter__(self) -> LoopbackServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def harness_git() -> str:
    """The git that builds fixtures and checks oracles (never a measured subject)."""
    found = shutil.which("git")
    if found is None:
        raise RuntimeError("git is needed on PATH to build the lane fixtures")
    return os.path.realpath(found)
