"""The worker's bubblewrap sandbox, tried by hostile `command` workers through real executors and `orchard run`.

A hostile worker is a script on PATH (PATH directories are what the sandbox
binds back): it tries to read and write what is the orchestrator's, to write
its bench clone, and leaves a `setsid` daemon behind. Each attempt prints
LEAK when it succeeds; none may.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import psutil
import pytest

from orchard import confine
from orchard.lab.db.state import LabState
from orchard.lab.judge import review
from orchard.lab.loop.lab import Lab
from orchard.lab.loop.worker_start import worker_start
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.executors import make_executor
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace import builds
from orchard.lab.workers.workspace.prompts import render_prompt
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import (
    ALPHA_TARGET,
    BENCH_FILES,
    NO_CHANGE_BENCH,
    README_TARGET,
    assert_nothing_left,
    command_launcher,
    lab_config,
    one_worker,
    processes_marked,
)
from tests.lab.loop_support import add_hypotheses, bare_candidate, metric, snapshot, verdict_of

HOSTILE = r"""#!/bin/bash
# argv: workspace target bench other-worker orchestrator-home a-file-in-that-home
ws=$1 target=$2 bench=$3 other=$4 home=$5 homefile=$6
try() { if eval "$2" >/dev/null 2>&1; then echo "LEAK $1"; else echo "blocked $1"; fi; }
try read-lab-db "test -s $ws/lab.db && cat $ws/lab.db"
try read-config "grep -q target $ws/orchard.toml"
try list-judge "ls $ws/judge/target | grep -q ."
try read-lab-bench "ls $ws/bench | grep -q ."
try read-logs "ls $ws/logs | grep -q ."
try read-other-worker "cat $other/README"
try read-home-file "cat $homefile"
try read-ssh "ls $home/.ssh"
try list-host-sockets "ls /run | grep -vx systemd | grep -q ."
service=$(dirname "$0")/service.sock
try connect-host-socket "python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' $service"
try write-bench "echo friendlier >> $bench/bench.py"
try read-shadow "head -c1 /etc/shadow | grep -q ."
try write-shared-pack "pack=\$(ls $target/.git/objects/pack/*.pack | head -1) && chmod u+w \$pack && echo x >> \$pack"
echo '[broken' >> "$ws/orchard.toml" 2>/dev/null  # lands, if anywhere, in the sandbox's own empty tmpfs
echo "own checkout: $(cat $target/README)"
echo mine >> "$target/src/alpha.txt" && echo "wrote own checkout"
echo "home is $HOME"
setsid sleep 3600 </dev/null >/dev/null 2>&1 &
echo "daemon started"
"""

PROBES = ("read-lab-db", "read-config", "list-judge", "read-lab-bench", "read-logs", "read-other-worker",
          "read-home-file", "read-ssh", "list-host-sockets", "connect-host-socket", "write-bench", "read-shadow",
          "write-shared-pack")


@pytest.fixture
def hostile_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mark: str) -> Iterator[Path]:
    """A directory on orchard's PATH with the hostile worker; every daemon it left is killed afterwards."""
    bindir = tmp_path / "hostile-bin"
    bindir.mkdir()
    script = bindir / "hostile-worker"
    script.write_text(HOSTILE)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    # a service's Unix socket anyone may connect to, in a directory the sandbox reads: a door out of any network
    # namespace unless the sandbox covers it
    with socket.socket(socket.AF_UNIX) as service:
        service.bind(str(bindir / "service.sock"))
        service.listen()
        (bindir / "service.sock").chmod(0o777)
        yield bindir
    for proc in processes_marked(mark):  # on a lab without a PID namespace the daemon outlives the worker
        proc.kill()


def run_one(workspace: Workspace, kind: str = "subprocess") -> str:
    """Set up workers w0 (the hostile one) and w1, run w0's experiment to its end; its log."""
    checkout, _other = workspace.setup_workers(["w0", "w1"])
    experiment = Experiment("hostile", Hypothesis(metric="m", change="c", scope=("src/alpha.txt",)), checkout)
    render_prompt(workspace, experiment)
    with make_executor(kind, workspace.tmux_socket) as executor:
        executor.start(make_launcher(workspace.config.launcher).job(workspace, experiment))
        (result,) = executor.wait(timeout_s=120)
    assert result.exit_code == 0, result.log_path.read_text()
    return result.log_path.read_text()


HOSTILE_CONFIG = """
[launcher]
name = "command"
template = "hostile-worker {{workspace}} {{target_dir}} {{bench_dir}} {other} {home} {home_file}"
"""


@pytest.mark.parametrize("kind", ["tmux", "subprocess"])
def test_a_hostile_worker_reaches_nothing_of_the_lab_and_its_daemon_dies_with_it(
    kind: str, make_workspace: Callable[..., Workspace], hostile_bin: Path, mark: str
) -> None:
    home = Path.home()
    home_file = next(p for p in sorted(home.iterdir()) if p.is_file())  # e.g. ~/.bashrc: readable here
    config = HOSTILE_CONFIG.format(other="{workspace}/worker-w1/target", home=home, home_file=home_file)
    workspace = make_workspace(config)
    LabState.open(workspace.root).close()  # lab.db exists
    config_before = workspace.config_path.read_text()
    packs = {p: p.read_bytes() for p in (workspace.reference_target / ".git/objects/pack").iterdir()}

    log = run_one(workspace, kind)

    for probe in PROBES:
        assert f"blocked {probe}\n" in log, log
    assert "LEAK" not in log
    assert "own checkout: a target" in log and "wrote own checkout" in log  # it could do its work
    assert f"home is {workspace.worker('w0').home_dir}" in log
    assert (workspace.worker("w0").target_dir / "src/alpha.txt").read_text() == "alpha 1\nmine\n"
    assert workspace.config_path.read_text() == config_before
    assert {p: p.read_bytes() for p in packs} == packs  # the judge's objects, hard-linked into the checkout
    assert (workspace.worker("w0").bench_dir / "bench.py").read_text() == BENCH_FILES["bench.py"]
    # the `setsid` daemon was in the worker's PID namespace: gone when the worker ended, before any cleanup
    assert "daemon started" in log
    assert [p.cmdline() for p in processes_marked(mark) if p.status() != psutil.STATUS_ZOMBIE] == []
    assert_nothing_left(mark, workspace.tmux_socket)


NETWORK_CONFIG = """
[launcher]
name = "command"
template = "(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo CONNECTED || echo NO-NETWORK"
{network}
"""


@pytest.mark.parametrize("network", [None, False, True])
def test_network_false_cuts_the_worker_off_a_port_listened_on_outside(
    network: bool | None, make_workspace: Callable[..., Workspace], mark: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        setting = "" if network is None else f"network = {str(network).lower()}"
        workspace = make_workspace(NETWORK_CONFIG.format(port=port, network=setting))
        log = run_one(workspace)
    # the command launcher's default is no network; `network = true` gives it back (so this test can fail)
    assert ("CONNECTED" in log) is (network is True), log
    assert_nothing_left(mark, workspace.tmux_socket)


def _orchard(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=env, check=False)


BROKEN_BWRAP = "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"


@pytest.mark.parametrize("bwrap", ["missing", "broken"])
def test_orchard_run_refuses_to_start_without_a_working_bubblewrap(
    bwrap: str, make_workspace: Callable[..., Workspace], tmp_path: Path
) -> None:
    workspace = make_workspace('[launcher]\nname = "command"\ntemplate = "true"\n')
    bindir = tmp_path / "no-bwrap-bin"
    bindir.mkdir()
    for tool in ("git", "bash", "env", "tmux"):  # everything but bwrap
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if found:
            (bindir / tool).symlink_to(found)
    if bwrap == "broken":
        (bindir / "bwrap").write_text(BROKEN_BWRAP)
        (bindir / "bwrap").chmod(0o755)
    before = snapshot(workspace.root)
    result = _orchard("run", workspace.root, env={**os.environ, "PATH": str(bindir)})
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "install bubblewrap" in lines[0] and 'sandbox = "none"' in lines[0], result.stderr
    assert ("not on PATH" if bwrap == "missing" else "No permissions") in lines[0]
    assert snapshot(workspace.root) == before


UNSANDBOXED_CONFIG = lab_config(target=README_TARGET, bench=NO_CHANGE_BENCH, workers=one_worker(sandbox="none"),
                                launcher=command_launcher("echo changed >> src/alpha.txt"), stop={"top_attempted": 1})


def test_an_unsandboxed_lab_says_so_in_status_and_in_every_journal_judgment(
    make_workspace: Callable[..., Workspace], mark: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    ws = make_workspace(UNSANDBOXED_CONFIG)
    said: list[str] = []
    state = LabState.open(ws.root)
    try:
        add_hypotheses(state, {"id": "h1", "scope": ["src/"]})
        Lab(ws, state, say=said.append).run()
        judgments = state.events("judgment")
    finally:
        state.close()
    assert_nothing_left(mark, None)
    assert len(judgments) == 1 and any("UNSANDBOXED" in line for line in said)
    journal = (ws.root / "JOURNAL.md").read_text()
    entry = journal.split("· judgment ·", 1)[1].split("\n## ", 1)[0]
    assert "UNSANDBOXED" in entry
    status = _orchard("status", ws.root, env=dict(os.environ))
    assert status.returncode == 0 and "UNSANDBOXED" in status.stdout, status.stdout + status.stderr


REVIEWER_CONFIG = """
[launchers.reviewer]
name = "command"
template = '''env; hostile-worker {{workspace}} {{target_dir}} {{bench_dir}} {{workspace}}/worker-w0 \\
{home} {home_file}; echo '{{{{"decision": "approve", "reasons": ["read it"]}}}}' > {{report}}'''

[review]
launcher = "reviewer"
"""


def test_the_reviewer_runs_sandboxed_with_the_allowlist_too(
    make_workspace: Callable[..., Workspace], hostile_bin: Path, monkeypatch: pytest.MonkeyPatch, mark: str
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "canary-GITHUB_TOKEN")
    home = Path.home()
    home_file = next(p for p in sorted(home.iterdir()) if p.is_file())
    ws = make_workspace(REVIEWER_CONFIG.format(home=home, home_file=home_file))
    LabState.open(ws.root).close()
    hypothesis = Hypothesis(id="h", metric="m", change="c", scope=("src/alpha.txt",))
    candidate = bare_candidate(experiment="h", patch="", target_base=ws.target_base())
    verdict = verdict_of([metric("report/wall_ms", "improved", -0.5)])
    checkout = builds.checkout_with_patch(ws, ws.judge_dir / "h" / "target", ws.target_base(), "")  # as the judge
    check = review.review(ws, review.experiment_for("h", hypothesis, candidate, ws), candidate, verdict, [], checkout)
    log = Path(str(check.log)).read_text()
    assert check.passed, check.detail + "\n" + log
    for probe in ("read-lab-db", "read-config", "list-judge", "read-lab-bench", "read-logs", "read-home-file",
                  "read-ssh", "list-host-sockets"):
        assert f"blocked {probe}\n" in log, log
    # its {bench_dir} is its own review directory, where it writes its answer: the only place it may write
    assert [line for line in log.splitlines() if line.startswith("LEAK")] == ["LEAK write-bench"]
    assert "canary-GITHUB_TOKEN" not in log and f"ORCHARD_TEST_MARK={mark}" in log
    assert_nothing_left(mark, None)


BUILD = r"""try() { if eval "$2" >/dev/null 2>&1; then echo "LEAK $1"; else echo "blocked $1"; fi; }
try read-config "grep -q target $WS/orchard.toml"
try read-lab-db "test -s $WS/lab.db"
echo forged > $WS/lab.db 2>/dev/null  # lands, if anywhere, in the sandbox's own empty tmpfs
try write-baseline "ls $WS/judge/target >/dev/null && echo forged > $WS/judge/target/README"
try read-home "ls $ORCHESTRATOR_HOME/.ssh $ORCHESTRATOR_HOME"
try read-shadow "head -c1 /etc/shadow | grep -q ."
try reach-network "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $PORT), 2)'"
echo built > built.txt && echo "wrote its checkout"
"""


@pytest.mark.parametrize("sandbox", ["bwrap", "none", "bwrap-network"])
def test_a_candidates_build_and_tests_write_only_the_checkout_they_build(
        make_workspace: Callable[..., Workspace], sandbox: str) -> None:
    """The judge runs a candidate's own build and tests: hostile code, confined like a worker, unprivileged
    even when orchard is root, and off the network unless `[target] build_network = true`."""
    mode, _, network = sandbox.partition("-")
    ws = make_workspace(f'[target]\nbuild = "bash build.sh"\nbuild_network = {str(bool(network)).lower()}\n\n'
                        f'[workers]\nsandbox = "{mode}"\n')
    checkout = builds.checkout_with_patch(ws, ws.judge_dir / "hostile" / "target", ws.target_base(), "")
    with socket.create_server(("127.0.0.1", 0)) as server:
        script = (BUILD.replace("$WS", str(ws.root)).replace("$ORCHESTRATOR_HOME", str(Path.home()))
                  .replace("$PORT", str(server.getsockname()[1])))
        (checkout / "build.sh").write_text(script)
        LabState.open(ws.root).close()  # the lab.db a lab holds
        before = (ws.root / "lab.db").read_bytes()
        check = builds.candidate_step(ws, "build", ws.config.target.build, checkout, {},
                                      ws.judge_dir / "hostile" / "logs")
    output = Path(check.log or "").read_text()
    assert check.passed and "wrote its checkout" in output and (checkout / "built.txt").exists(), output
    if sandbox == "bwrap":
        assert "LEAK" not in output, output
        assert output.count("blocked") == 6
    elif sandbox == "bwrap-network":  # the network given back, nothing else
        assert "LEAK reach-network" in output and output.count("LEAK") == 1, output
    else:  # the allowlisted environment only: everything orchard's user can reach
        assert "LEAK read-config" in output and "LEAK reach-network" in output
    if mode == "bwrap":
        assert (ws.root / "lab.db").read_bytes() == before
        assert (ws.reference_target / "README").read_text() != "forged\n"


def test_a_cli_installed_with_npm_prefix_sees_its_platform_package_beside_it(
    make_workspace: Callable[..., Workspace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mark: str
) -> None:
    """`npm --prefix DIR` puts the CLI's package and its platform package side by side under DIR/node_modules,
    the CLI on PATH as a link into its own package (Codex: `@openai/codex` runs `@openai/codex-linux-x64`)."""
    modules = tmp_path / "cli-prefix" / "node_modules"  # under /tmp: hidden unless bound back
    (modules / ".bin").mkdir(parents=True)
    (modules / "@vendor/fakecli/bin").mkdir(parents=True)
    (modules / "@vendor/fakecli-linux-x64").mkdir(parents=True)
    (modules / "@vendor/fakecli-linux-x64/native").write_text("#!/bin/sh\necho native binary ran\n")
    (modules / "@vendor/fakecli-linux-x64/native").chmod(0o755)
    entry = modules / "@vendor/fakecli/bin/fakecli.sh"
    entry.write_text('#!/bin/bash\nexec "$(dirname "$(readlink -f "$0")")/../../fakecli-linux-x64/native"\n')
    entry.chmod(0o755)
    (modules / ".bin/fakecli").symlink_to("../@vendor/fakecli/bin/fakecli.sh")
    monkeypatch.setenv("PATH", f"{modules / '.bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    workspace = make_workspace('[launcher]\nname = "command"\nexecutable = "fakecli"\ntemplate = "fakecli"\n')
    log = run_one(workspace)
    assert "native binary ran" in log


def test_a_sandboxed_workers_directories_are_handed_to_the_sandbox_uid_once_after_its_checkouts_are_made(
    make_workspace: Callable[..., Workspace], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Handing over walks every file of the checkouts (a chown each, as root): the job's confinement is built
    before its checkouts are made anew, so handing over then was wasted work, done again after them."""
    ws = make_workspace(lab_config(target=ALPHA_TARGET, launcher=command_launcher("true"),
                                   workers={"sandbox": "bwrap"}))
    handed: list[list[tuple[Path, bool]]] = []
    real = confine.hand_over

    def spy(paths: Iterable[Path], skip: Iterable[Path] = ()) -> None:
        paths = list(paths)
        handed.append([(path, path.exists()) for path in paths])
        real(paths, skip)

    state = LabState.open(ws.root)
    try:
        builds.baseline_binary(ws, state, ws.target_base())  # built (and handed over) before: cached for the worker
        add_hypotheses(state, {"id": "h1", "scope": ["src/*"]})
        state.add_experiment("h1-r1", "h1", "w1", "exploit", 1, ws.target_base(), ws.bench_base(), "starting")
        monkeypatch.setattr(confine, "hand_over", spy)
        start = worker_start(Lab(ws, state, say=lambda _: None), state.experiment("h1-r1"))
        assert handed == []
        start.prepare()
    finally:
        state.close()
    (paths,) = handed
    assert start.experiment.checkout.worker.target_dir in {path for path, _ in paths}
    assert all(exists for _, exists in paths)
