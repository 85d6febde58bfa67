"""Hostile workers and hostile candidates against a lab's judge hosts (issue 24): what the gaming battery tries
that matters where a verdict runs on a `dask worker` of its own, with its own copy of the lab.

A judge host keeps a copy of the lab in its temporary directory (its lab.db of
baselines and bench passes, its bench checkout, its judge checkouts: see
`landing/host_job.py`), on the same file system as the agent workers the same
dask worker runs. Two hostile experiments run beside an honest win, on two
judge hosts in network namespaces of their own:

- `edit-the-judge`: the worker tries to write the judge hosts' copies (lab.db,
  bench suite) and the lab's own files, loosens its own copy of the suite, and
  puts a forged `suite.toml` in its patch;
- `tamper-when-measured`: a candidate whose code, every time it is built,
  tested or measured on the judge host, appends to every lab.db and suite it
  can find (the judge host's copy, the lab's workspace, the served
  repositories), reaches for the lab host over the network, and writes forged
  timer reports on every descriptor it holds.

Each is KILLed with its reason, nothing of it lands, and a watcher that reads
the judge hosts' copies all through the run never sees a change of theirs.
"""

from __future__ import annotations

import base64
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchard.lab.records.judge_host import JudgeStarted, JudgeStep
from orchard.lab.records.judgment import Decision, Rule
from orchard.lab.workers.dask.remote import lab_id
from tests.lab.judge_host_support import judge_host_lab
from tests.lab.lab_helpers import assert_revisits_killed, git, tried_by_hypothesis
from tests.lab.lab_helpers import lab_events as events
from tests.lab.loop_support import FINISHED
from tests.lab.test_dask import add_command_hypothesis, finish, orchard

MARK = b"tampered-by-a-candidate"
FORGED_SUITE = "[suite]\\nname = \\\"forged\\\"\\nruns = 1\\n"


def _edit_the_judge(lab: Path) -> str:
    """The worker's line: waits (a bounded while) for a judge host's copy to appear, writes every one it sees and
    the lab's own files, loosens its bench copy, and adds a forged suite to its patch."""
    copies = "/tmp/orchard-judge-* {workspace}/../orchard-judge-*"
    return (f"for i in $(seq 15); do ls -d {copies} >/dev/null 2>&1 && break; sleep 2; done; "
            f"for d in {copies} {lab}; do printf '{MARK.decode()}' >> $d/lab.db; "
            f"printf '{FORGED_SUITE}' > $d/bench/suite.toml; : > $d/TAMPERED; done 2>/dev/null; "
            "sed -i 's/^runs = .*/runs = 1/' {bench_dir}/suite.toml 2>/dev/null; "
            f"printf '{FORGED_SUITE}' > suite.toml; printf '# tuned\\n' >> wordfreq/count.py; {FINISHED}")


def _tamper_code(lab: Path, addresses: list[str], port: int, temp: str = "/tmp") -> str:
    """Python appended to the demo's count.py: it runs at import, so in the build's checks, the tests and every
    measured run, silently (a candidate that broke its tests would never be measured). `temp`: where it looks
    for the judge hosts' and workers' copies."""
    return f'''

import glob as _glob, os as _os, socket as _socket


def _tamper():
    roots = _glob.glob({temp!r} + "/orchard-judge-*") + _glob.glob({temp!r} + "/orchard-dask-*") + [{str(lab)!r}]
    for root in roots:
        for name in ("lab.db", "bench/suite.toml", "origin/target.git/HEAD", "origin/bench/.git/HEAD",
                     "origin/bench/suite.toml"):
            try:
                with open(_os.path.join(root, name), "ab") as held:
                    held.write({MARK!r})
            except OSError:
                pass
        try:
            open(_os.path.join(root, "TAMPERED"), "w").close()
        except OSError:
            pass
    for address in {addresses!r}:
        try:
            _socket.create_connection((address, {port}), 1).close()
        except OSError:
            pass
    for fd in range(3, 32):  # a forged report for the timer, on whatever descriptor it was given
        try:
            _os.write(fd, b"1 1 1 1 1\\n")
        except OSError:
            pass


_tamper()
'''


def _appends(code: str) -> str:
    return f"echo {base64.b64encode(code.encode()).decode()} | base64 -d >> wordfreq/count.py; {FINISHED}"


def _changed(root: Path) -> list[str]:
    """What a hostile candidate changed of a copy of the lab: its lab.db grown by a part of a page (whatever an
    SQLite database holds, its size is whole pages, of 512 bytes or a multiple), its suite, a file it made."""
    found = []
    try:
        if (root / "lab.db").stat().st_size % 512:
            found.append(str(root / "lab.db"))
    except OSError:
        pass
    try:
        suite = (root / "bench" / "suite.toml").read_bytes()
        if MARK in suite or b"forged" in suite:
            found.append(str(root / "bench" / "suite.toml"))
    except OSError:
        pass
    return found + [str(root / "TAMPERED")] * (root / "TAMPERED").exists()


@contextmanager
def _watching(lab: str) -> Iterator[tuple[set[str], list[str]]]:
    """The judge hosts' copies read every half second while the lab runs (the lab removes them at its end): the
    copies seen, and what of them was changed."""
    copies: set[str] = set()
    changed: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.5):
            for copy in Path(tempfile.gettempdir()).glob(f"orchard-judge-{lab}-*"):
                copies.add(str(copy))
                changed.extend(p for p in _changed(copy) if p not in changed)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield copies, changed
    finally:
        stop.set()
        thread.join()


@contextmanager
def _listening() -> Iterator[tuple[int, list[str]]]:
    """A TCP listener on every address of the lab's host: who called it."""
    listener = socket.create_server(("0.0.0.0", 0))  # noqa: S104 - any candidate that reaches the lab host
    listener.settimeout(0.2)
    calls: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, peer = listener.accept()
            except OSError:
                continue
            calls.append(str(peer))
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], calls
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_the_hostile_candidate_changes_an_unconfined_judge_copy_and_the_watcher_sees_it(tmp_path: Path) -> None:
    """The attack is real: run as orchard's user, outside any sandbox, the candidate's code changes a judge
    host's copy (here one of its own under `tmp_path`) in every way the slow test looks for."""
    copy, lab = tmp_path / "orchard-judge-lab1-abcd", tmp_path / "lab"
    for root in (copy, lab):
        (root / "bench").mkdir(parents=True)
        sqlite3.connect(root / "lab.db").execute("CREATE TABLE t (x)").connection.commit()
        (root / "bench" / "suite.toml").write_text("[suite]\n")
    assert _changed(copy) == []
    subprocess.run([sys.executable, "-c", _tamper_code(lab, ["127.0.0.1"], 9, str(tmp_path))], check=True)
    assert _changed(copy) == [str(copy / "lab.db"), str(copy / "bench" / "suite.toml"), str(copy / "TAMPERED")]
    assert len(_changed(lab)) == 3


@pytest.mark.slow
@pytest.mark.timeout(1500)  # measurements on a shared machine; the lab's own waits are bounded
def test_hostile_workers_and_candidates_on_judge_hosts_are_killed_and_change_nothing(
        tmp_path: Path, mark: str) -> None:
    with judge_host_lab(tmp_path, mark, ["count-with-dict"]) as lab, _listening() as (port, calls):
        ws = lab.ws
        add_command_hypothesis(ws, "edit-the-judge", _edit_the_judge(ws.root), "report/wall_ms", "wordfreq/count.py")
        code = _tamper_code(ws.root, [lab.first.lab_address, lab.second.lab_address], port)
        add_command_hypothesis(ws, "tamper-when-measured", _appends(code), "report/wall_ms", "wordfreq/count.py")
        served = {name: git(ws.root / "origin" / name, "rev-parse", "HEAD").strip() for name in ("target.git", "bench")}
        suite = (ws.root / "origin" / "bench" / "suite.toml").read_bytes()
        with _watching(lab_id(ws.root)) as (copies, seen):
            output = finish(orchard("run", str(ws.root), mark=mark), timeout=1400)
    runs = tried_by_hypothesis(ws.root)
    judged = {name: tried.first for name, tried in runs.items()}  # each one's first; a revisit after the win is KILLed
    outcome = {h: (e.decision, e.judgment.rule if e.judgment else None, "; ".join(e.reasons))
               for h, e in judged.items()}
    assert_revisits_killed(runs, ["edit-the-judge", "tamper-when-measured"])
    assert outcome["count-with-dict"][0] == Decision.LAND, outcome  # the honest win still lands
    assert outcome["edit-the-judge"][:2] == (Decision.KILL, Rule.SCOPE), outcome
    assert "suite.toml" in outcome["edit-the-judge"][2], outcome  # named: the file outside its scope
    assert outcome["tamper-when-measured"][0] == Decision.KILL, outcome
    assert outcome["tamper-when-measured"][2], outcome  # with its reason
    tamper = judged["tamper-when-measured"]
    assert tamper.judgment is not None and tamper.judgment.judge is not None, "measured on a judge host"
    assert JudgeStep.VERDICT in {e.event.step for e in events(ws.root, JudgeStarted) if e.experiment == tamper.name}

    assert copies, "the watcher never saw a judge host's copy of the lab"  # it read what it vouches for
    assert seen == [], "a hostile worker or candidate changed a judge host's copy of the lab"
    assert calls == [], "a candidate measured on a judge host reached the lab's host over the network"
    assert sqlite3.connect(ws.root / "lab.db").execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert _changed(ws.root) == []
    for head in (ws.root / "origin" / "target.git" / "HEAD", ws.root / "origin" / "bench" / ".git" / "HEAD"):
        assert MARK not in head.read_bytes()
    assert not list((ws.root / "origin").rglob("TAMPERED"))
    assert git(ws.root / "origin" / "bench", "rev-parse", "HEAD").strip() == served["bench"]  # the suite is the lab's
    assert (ws.root / "origin" / "bench" / "suite.toml").read_bytes() == suite
    log = git(ws.root / "origin" / "target.git", "log", "--format=%s", f"{served['target.git']}..main")
    assert log.count("lab: merge") == 1 and "count-with-dict" in log, log  # only the honest win landed
    landed = git(ws.root / "origin" / "target.git", "ls-tree", "-r", "--name-only", "main")
    assert "suite.toml" not in landed.split()
    assert "_tamper" not in git(ws.root / "origin" / "target.git", "show", "main:wordfreq/count.py")
    assert "Traceback" not in output, output
