"""`network = "none" | "api" | "all"`: what a sandboxed worker reaches, and the allowlisting proxy behind `api`.

The model endpoint is a local HTTP server; a second local server stands for
everything else on this machine (another service, the lab's git daemon):
under `api` the worker reaches the first, through the proxy or at its own
address, and never the second. No test sends traffic off this machine: a
name the proxy must refuse is checked to be refused before it is resolved.
"""

from __future__ import annotations

import http.server
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchard.errors import UsageError
from orchard.lab.config.orchard_toml import ConfigError, from_dict
from orchard.lab.config.sections import LauncherConfig
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.network import Endpoint, Network, endpoint
from orchard.lab.workers.executors import make_executor
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.sandbox import egress_proxy
from orchard.lab.workers.workspace.prompts import render_prompt
from orchard.lab.workers.workspace.workspace import Workspace
from tests.helpers import slow_but
from tests.lab.lab_helpers import assert_nothing_left, processes_marked, wait_for


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        self.server.connection_fields.append(self.headers.get_all("Connection"))  # type: ignore[attr-defined]
        body = f"{self.server.word} {self.path}".encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[Callable[[str], http.server.ThreadingHTTPServer]]:
    """Local HTTP servers answering `<word> <path>`; each records the paths it was asked for."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(word: str) -> http.server.ThreadingHTTPServer:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
        server.word, server.paths, server.connection_fields = word, [], []  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _exchange(socket_path: Path, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(str(socket_path))
        client.sendall(request)
        client.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := client.recv(65536):
            data += chunk
        return data


def test_the_proxy_lets_through_the_endpoint_only_and_resolves_no_other_name(
    local_server: Callable[[str], http.server.ThreadingHTTPServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, other = local_server("MODEL"), local_server("OTHER")
    allowed = Endpoint("127.0.0.1", model.server_address[1])
    looked_up: list[object] = []
    real_getaddrinfo = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: looked_up.append(host)
                        or real_getaddrinfo(host, *a, **k))
    path = tmp_path / "p.sock"
    stop = threading.Event()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen()
        serving = threading.Thread(target=egress_proxy.serve, args=(server, allowed, stop))
        serving.start()
        try:
            tunnelled = _exchange(path, f"CONNECT {allowed} HTTP/1.1\r\n\r\nGET /v1/messages HTTP/1.0\r\n\r\n".encode())
            forwarded = _exchange(path, f"GET http://{allowed}/v1/models?x=1 HTTP/1.1\r\nHost: {allowed}\r\n"
                                        "Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n".encode())
            other_port = other.server_address[1]
            to_other = _exchange(path, f"CONNECT 127.0.0.1:{other_port} HTTP/1.1\r\n\r\n".encode())
            plain_other = _exchange(path, f"GET http://127.0.0.1:{other_port}/ HTTP/1.0\r\n\r\n".encode())
            by_name = _exchange(path, b"CONNECT api.example.invalid:443 HTTP/1.1\r\n\r\n")
            same_port_by_name = _exchange(path, f"CONNECT localhost:{allowed.port} HTTP/1.1\r\n\r\n".encode())
            garbage = _exchange(path, b"HELLO\r\n\r\n")
        finally:
            stop.set()
            serving.join()
    assert tunnelled.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.0 200"), tunnelled
    assert tunnelled.endswith(b"MODEL /v1/messages")
    assert forwarded.endswith(b"MODEL /v1/models?x=1")  # sent on in origin form
    assert model.connection_fields[-1] == ["close"]  # type: ignore[attr-defined]  # one request per connection
    for refused in (to_other, plain_other, by_name, same_port_by_name):
        assert refused.startswith(b"HTTP/1.1 403 Forbidden"), refused
        assert f"allows only {allowed}".encode() in refused
    assert garbage.startswith(b"HTTP/1.1 400")
    assert other.paths == []  # type: ignore[attr-defined]
    assert "api.example.invalid" not in looked_up and "localhost" not in looked_up, looked_up


def test_endpoints_are_read_from_base_urls() -> None:
    assert endpoint("https://api.anthropic.com") == Endpoint("api.anthropic.com", 443)
    assert endpoint("http://LocalHost:8080/v1") == Endpoint("localhost", 8080)
    assert endpoint("http://[::1]:9/v1").loopback and str(endpoint("http://[::1]:9/v1")) == "[::1]:9"
    assert not endpoint("https://api.openai.com/v1").loopback
    for bad in ("api.anthropic.com", "ftp://host/", "http://:80/", "http://host:99999/"):
        with pytest.raises(ValueError, match="URL"):
            endpoint(bad)


def _launcher_table(**keys: object) -> dict[str, object]:
    return {"target": {"repo": "/nowhere"}, "launcher": keys}


def test_network_defaults_the_older_booleans_and_what_api_needs() -> None:
    def network(**keys: object) -> str:
        return from_dict(_launcher_table(**keys)).launcher.network

    assert network(name="claude") == network(name="codex") == Network.API
    assert network(name="patch") == network(name="command", template="x") == Network.NONE
    assert network(name="aider") == network(name="cursor") == Network.ALL  # their endpoint depends on the model
    assert network(name="aider", base_url="http://127.0.0.1:8000/v1") == Network.API
    assert network(name="claude", network=True) == Network.ALL
    assert network(name="claude", network=False) == Network.NONE
    with pytest.raises(ConfigError) as refused:
        from_dict(_launcher_table(name="aider", network="api", base_url="localhost:8000"))
    assert "launcher.base_url: 'localhost:8000' is not an http:// or https:// URL" in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        from_dict({"target": {"repo": "/x"}, "launchers": {"a": {"name": "cursor", "network": "api"}},
                   "launcher": {"network": "everything"}})
    message = str(refused.value)
    assert "launchers.a.network: \"api\" needs a base_url" in message
    assert "launcher.network: 'everything' is not one of none, api, all" in message


def test_a_launcher_passes_its_base_url_variable_as_its_endpoint(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:4010")
    passed = make_launcher(from_dict(_launcher_table(name="claude", pass_env=["ANTHROPIC_BASE_URL"])).launcher)
    plain = make_launcher(from_dict(_launcher_table(name="claude")).launcher)
    assert (egress := passed.egress(tmp_path)) is not None and egress.endpoint == Endpoint("127.0.0.1", 4010)
    assert (egress := plain.egress(tmp_path)) is not None and egress.endpoint == Endpoint("api.anthropic.com", 443)
    command = make_launcher(from_dict(_launcher_table(name="command", template="x", network="all")).launcher)
    assert command.egress(tmp_path) is None
    with pytest.raises(UsageError, match="needs a base_url"):  # built in code, past the file's own check
        make_launcher(LauncherConfig(name="command", template="x", network="api")).egress(tmp_path)


PROBE = r"""#!{python}
import socket, sys, urllib.error, urllib.request
model, other = int(sys.argv[1]), int(sys.argv[2])

def tcp(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "open"
    except OSError:
        return "closed"

def get(url, proxies=None):
    handlers = [] if proxies is None else [urllib.request.ProxyHandler(proxies)]
    try:
        return urllib.request.build_opener(*handlers).open(url, timeout=10).read().decode()
    except urllib.error.HTTPError as error:
        return f"HTTP {{error.code}}"
    except OSError as error:
        return "unreachable"

def connect_by_name():
    import os
    proxy = os.environ.get("HTTPS_PROXY")
    if not proxy:
        return "no-proxy"
    host, port = proxy.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"CONNECT api.example.invalid:443 HTTP/1.1\r\n\r\n")
        return s.recv(100).split(b"\r\n")[0].decode()

print("model-port", tcp(model))
print("model-direct", get(f"http://127.0.0.1:{{model}}/direct", proxies={{}}))
print("model-proxied", get(f"http://127.0.0.1:{{model}}/proxied"))
print("other-port", tcp(other))
print("other-direct", get(f"http://127.0.0.1:{{other}}/direct", proxies={{}}))
print("other-proxied", get(f"http://127.0.0.1:{{other}}/proxied"))
print("by-name", connect_by_name())
"""

EXPECTED = {
    Network.NONE: {"model-port": "closed", "model-direct": "unreachable", "model-proxied": "unreachable",
                   "other-port": "closed", "other-direct": "unreachable", "other-proxied": "unreachable",
                   "by-name": "no-proxy"},
    Network.API: {"model-port": "open", "model-direct": "MODEL /direct", "model-proxied": "MODEL /proxied",
                  "other-port": "closed", "other-direct": "unreachable", "other-proxied": "HTTP 403",
                  "by-name": "HTTP/1.1 403 Forbidden"},
    Network.ALL: {"model-port": "open", "model-direct": "MODEL /direct", "model-proxied": "MODEL /proxied",
                  "other-port": "open", "other-direct": "OTHER /direct", "other-proxied": "OTHER /proxied",
                  "by-name": "no-proxy"},
}


@pytest.mark.parametrize("network", slow_but(list(Network), Network.API))
def test_a_sandboxed_worker_reaches_what_its_network_allows(
    network: Network, make_workspace: Callable[..., Workspace], local_server: Callable[[str], object],
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mark: str,
) -> None:
    model, other = local_server("MODEL"), local_server("OTHER")
    model_port, other_port = model.server_address[1], other.server_address[1]  # type: ignore[attr-defined]
    bindir = tmp_path / "probe-bin"
    bindir.mkdir()
    (bindir / "probe").write_text(PROBE.format(python=sys.executable))
    (bindir / "probe").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    workspace = make_workspace(f'[launcher]\nname = "command"\ntemplate = "probe {model_port} {other_port}"\n'
                               f'network = "{network}"\nbase_url = "http://127.0.0.1:{model_port}/v1"\n')
    checkout = workspace.setup_worker("w0")
    experiment = Experiment("probe", Hypothesis(metric="m", change="c", scope=("src/alpha.txt",)), checkout)
    render_prompt(workspace, experiment)
    with make_executor("subprocess", workspace.tmux_socket) as executor:
        executor.start(make_launcher(workspace.config.launcher).job(workspace, experiment))
        (result,) = executor.wait(timeout_s=120)
    log = result.log_path.read_text()
    assert result.exit_code == 0, log
    seen = dict(line.split(" ", 1) for line in log.splitlines() if line.split(" ", 1)[0] in EXPECTED[network])
    assert seen == EXPECTED[network], log
    reached_other = other.paths  # type: ignore[attr-defined]
    assert reached_other == ([] if network != Network.ALL else ["/direct", "/proxied"])
    if network == Network.API:
        assert f"[orchard egress] refused 127.0.0.1:{other_port}: only the launcher's model endpoint" in log
        assert "[orchard egress] refused api.example.invalid:443" in log
        assert sum("[orchard egress]" in line for line in log.splitlines()) == 2, log  # nothing else to say
    assert [p.cmdline() for p in processes_marked(mark)] == []  # the proxy ended with the worker
    assert_nothing_left(mark, workspace.tmux_socket)


@pytest.mark.slow
def test_the_proxy_dies_with_a_worker_killed_at_its_timeout(
    make_workspace: Callable[..., Workspace], local_server: Callable[[str], object], mark: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = local_server("MODEL")
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    workspace = make_workspace(f'[workers]\ntimeout_minutes = 0.05\n[launcher]\nname = "command"\n'
                               f'template = "sleep 600"\nnetwork = "api"\n'
                               f'base_url = "http://127.0.0.1:{model.server_address[1]}"\n')  # type: ignore[attr-defined]
    experiment = Experiment("sleeper", Hypothesis(metric="m", change="c", scope=("src/alpha.txt",)),
                            workspace.setup_worker("w0"))
    render_prompt(workspace, experiment)
    with make_executor("tmux", workspace.tmux_socket) as executor:
        executor.start(make_launcher(workspace.config.launcher).job(workspace, experiment))
        wait_for(lambda: any(egress_proxy.__name__ in " ".join(p.cmdline()) for p in processes_marked(mark)),
                 "the worker's proxy")
        (result,) = executor.wait(timeout_s=120)
    assert result.timed_out
    assert [p.cmdline() for p in processes_marked(mark)] == []
    assert_nothing_left(mark, workspace.tmux_socket)
