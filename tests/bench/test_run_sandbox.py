"""Measured runs started fresh inside their side's sandbox (issue 33, item 8): nothing one run leaves reaches the next.

A hostile measured program, run several times in one campaign side as a
verdict runs it, plants state on its first run everywhere it can (files in
/tmp, /var/tmp, /dev/shm, $HOME, $TMPDIR, its working directory and
`{workdir}`; a daemon holding a file lock and serving a cached answer on an
abstract socket and a loopback port; SysV and POSIX IPC) and looks for all of
it on every later run. Each run must find nothing, print what the first one
printed, and still run as the sandbox uid under its own limits.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import pytest

from orchard.bench.measuring.measure import Observation, RunSpec, Workbench, observe, workbench
from orchard.bench.sandbox.confinement import RunConfinement, confine_runs
from orchard.bench.suites.suite_reader import load_suite
from orchard.limits import NO_LIMITS, Limits

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
              pytest.mark.skipif(os.geteuid() != 0, reason="runs share a side's sandbox where they drop to its uid"),
              pytest.mark.timeout(300)]

SUITE = """[suite]
name = "hostile"

[[scenario]]
name = "plant"
kind = "rows"
command = ["{bin}", "{workdir}"]

[[metric]]
name = "wall_ms"
"""
MARK = ".orchard-state-mark"
KEY = 0x4F524348  # the SysV key and POSIX queue every run plants and looks for
# looks for what an earlier run left, then leaves it all again (and a daemon serving "cached"); prints what it saw
HOSTILE = """#!/usr/bin/python3 -I
import ctypes, fcntl, json, os, select, socket, sys, time
port, me = PORT, sys.argv[0]
places = {"tmp": "/tmp", "var-tmp": "/var/tmp", "dev-shm": "/dev/shm", "home": os.environ["HOME"],
          "tmpdir": os.environ["TMPDIR"], "cwd": os.getcwd(), "workdir": sys.argv[1]}
found, planted = [], []
for name, where in places.items():
    mark = os.path.join(where, "MARK-" + name)
    if os.path.exists(mark):
        found.append(name)
    try:
        with open(mark, "w") as handle:
            handle.write("state")
        planted.append(name)
    except OSError:
        pass
def cached(family, address):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as client:
            client.settimeout(2)
            client.connect(address)
            return client.recv(16) == b"cached"
    except OSError:
        return False
found += [name for name, family, address in (("abstract-socket", socket.AF_UNIX, "\\0orchard-state"),
                                             ("loopback-port", socket.AF_INET, ("127.0.0.1", port)))
          if cached(family, address)]
with open(me) as handle:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        found.append("lock")
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.restype = ctypes.c_int
for name, get in (("sysv-shm", lambda flags: libc.shmget(KEY, 64, flags)),
                  ("sysv-queue", lambda flags: libc.msgget(KEY, flags)),
                  ("posix-queue", lambda flags: libc.mq_open(b"/orchard-state",
                                                             os.O_RDWR | (os.O_CREAT if flags else 0), 0o600, None))):
    if get(0) >= 0:
        found.append(name)
    if get(0o1600) >= 0:
        planted.append(name)
ready, said = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork():
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    lock = open(me)
    fcntl.flock(lock, fcntl.LOCK_EX)
    servers = []
    for family, address in ((socket.AF_UNIX, "\\0orchard-state"), (socket.AF_INET, ("127.0.0.1", port))):
        server = socket.socket(family, socket.SOCK_STREAM)
        try:
            server.bind(address)
            server.listen(8)
            servers.append(server)
        except OSError:
            pass
    os.write(said, b"%d" % len(servers))
    end = time.monotonic() + 600
    while time.monotonic() < end:
        for server in select.select(servers, [], [], 1)[0]:
            conn, _ = server.accept()
            conn.sendall(b"cached")
            conn.close()
    os._exit(0)
os.close(said)
if os.read(ready, 8) == b"2":
    planted += ["daemon", "abstract-socket", "loopback-port", "lock"]
print(json.dumps({"uid": os.getuid(), "found": found, "planted": planted}))
"""


# what a run sees: the places it could keep state in (and what it may write there), who it is, its limits
LOOK = """#!/usr/bin/python3 -I
import json, os, resource, sys
seen = []
for top in sorted({"/tmp", "/var/tmp", "/home", "/root", "/run", "/dev", os.environ["HOME"], os.getcwd(), sys.argv[1],
                   os.path.dirname(sys.argv[0])}):
    for root, dirs, files in os.walk(top):
        if root.count("/") - top.count("/") >= 5 or root.startswith("/dev/pts"):
            dirs[:] = []
        # bytecode the tests on other xdist workers write into the bound checkout meanwhile
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        for name in sorted([*dirs, *files]):
            path = os.path.join(root, name)
            info = os.lstat(path)
            seen.append([path, oct(info.st_mode), info.st_uid, os.access(path, os.W_OK), os.access(path, os.R_OK)])
status = [line for line in open("/proc/self/status") if line.startswith(("Cap", "NoNewPrivs", "Uid", "Gid", "Groups"))]
limits = [resource.getrlimit(getattr(resource, name)) for name in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_CPU",
                                                                   "RLIMIT_FSIZE")]
processes = sorted(p for p in os.listdir("/proc") if p.isdigit())
print(json.dumps({"seen": sorted(seen), "status": status, "limits": limits, "cwd": os.getcwd(),
                  "environment": sorted(os.environ), "processes": processes}))
"""


def _program(tmp_path: Path, text: str = HOSTILE, name: str = "hostile") -> Path:
    tmp_path.chmod(0o755)
    (tmp_path / "suite.toml").write_text(SUITE)
    program = tmp_path / "bin" / name
    program.parent.mkdir(mode=0o755, exist_ok=True)
    text = text.replace("PORT", str(20_000 + secrets.randbelow(20_000))).replace("MARK", MARK)
    program.write_text(text.replace("KEY", str(KEY)))
    program.chmod(0o755)
    return program


def _runs(bench: Workbench, program: Path, count: int) -> list[Observation]:
    scenario = bench.suite.scenarios[0]
    return [observe(bench, scenario, program, RunSpec("candidate", {"name": "candidate"}, run, {}, {"wall_ms"}))
            for run in range(count)]


def _said(run: Observation) -> dict[str, Any]:
    assert run.ok, run.failure
    (said,) = run.row["harness_rows"]
    assert isinstance(said, dict)
    return said


def _confined(tmp_path: Path, limits: Limits = NO_LIMITS) -> RunConfinement:
    confinement = confine_runs(True, reads=[tmp_path], limits=limits)
    assert confinement.note.startswith("measured runs confined (bubblewrap as uid"), confinement.note
    return confinement


def test_nothing_a_run_leaves_reaches_the_next_run_of_its_side(tmp_path: Path) -> None:
    program = _program(tmp_path)
    with workbench(load_suite(tmp_path / "suite.toml"), confinement=_confined(tmp_path)) as bench:
        runs = _runs(bench, program, 3)
        assert bench.sandboxes is not None and bench.sandboxes.started == 1  # the runs shared their side's sandbox
    first, *later = map(_said, runs)
    # the attack was live: every place it could write, it wrote (its directory and /dev/shm are not writable)
    assert set(first["planted"]) == {"tmp", "var-tmp", "home", "tmpdir", "workdir", "daemon", "abstract-socket",
                                     "loopback-port", "lock", "sysv-shm", "sysv-queue", "posix-queue"}, first
    assert first["uid"] not in (0, os.getuid())
    for said in later:
        assert said == first  # found nothing, so the same outcome every run


def test_each_run_has_its_own_limits_and_one_over_them_names_the_limit(tmp_path: Path) -> None:
    program = _program(tmp_path)
    hog = tmp_path / "bin" / "hog"
    hog.write_text("#!/bin/sh\nif [ -e \"$1/big\" ]; then echo second; exit 0; fi\n"
                   "head -c 3000000 /dev/zero > \"$1/big\" || exit $?\necho first\n")
    hog.chmod(0o755)
    limits = Limits(memory_mb=512, processes=32, cpu_s=60, file_mb=1)
    with workbench(load_suite(tmp_path / "suite.toml"), confinement=_confined(tmp_path, limits)) as bench:
        over = _runs(bench, hog, 2)
        honest = _runs(bench, program, 2)
    for run in over:  # the second run writes as much again: nothing of the first one's file counts
        assert not run.ok and "over its file-size limit while measured, file_mb = 1" in run.failure, run.failure
    assert [_said(run)["found"] for run in honest] == [[], []]


def test_a_run_in_its_sides_sandbox_sees_what_a_sandbox_of_its_own_showed_it(tmp_path: Path) -> None:
    look = _program(tmp_path, LOOK, "look")
    limits = Limits(memory_mb=1024, processes=64, cpu_s=60, file_mb=8)
    with workbench(load_suite(tmp_path / "suite.toml"), confinement=_confined(tmp_path, limits)) as bench:
        shared = _said(_runs(bench, look, 1)[0])
        assert bench.sandboxes is not None and bench.sandboxes.started == 1
        bench.sandboxes = None  # one sandbox per run, as before
        own = _said(_runs(bench, look, 1)[0])
    assert shared == own
    assert shared["limits"][0][0] == 1024 * 2**20 and shared["limits"][3][0] == 8 * 2**20


def test_a_run_past_its_timeout_ends_with_all_it_started_and_the_next_run_starts_fresh(tmp_path: Path) -> None:
    marker = f"7{secrets.randbelow(10**6)}"
    sleeper = _program(tmp_path, f"#!/bin/sh\nsetsid sleep 4{marker} &\nsleep 5{marker}\n", "sleeper")
    (tmp_path / "suite.toml").write_text(SUITE.replace('kind = "rows"\n', "timeout_s = 2\n"))
    with workbench(load_suite(tmp_path / "suite.toml"), confinement=_confined(tmp_path)) as bench:
        runs = _runs(bench, sleeper, 2)
        assert bench.sandboxes is not None and bench.sandboxes.started == 1
    assert [run.failure for run in runs] == ["timed out", "timed out"]
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and marker in _cmdline(pid)]
    assert not left, "a process a timed-out run started outlived it"


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
