"""Hostile candidates against the measured runs (issue 20): confined, none of their tricks reaches the verdict.

Each candidate prints exactly what the baseline prints and tries one trick
while it is measured: a cache kept between runs (in $TMPDIR, $HOME/.cache,
/var/tmp), a swap of the baseline binary, a daemon, a reach into your files
or onto the host's loopback. Each test also runs the trick unconfined
(`confine = false`) where it worked before confinement, so it shows the
attack is real.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import socket
import threading
from pathlib import Path

import pytest

from orchard.bench.campaigns.campaign import run_verdict
from orchard.bench.deciding.verdict import Verdict, VerdictWord
from orchard.bench.suites.suite import Suite
from orchard.bench.suites.suite_reader import load_suite

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")]

SUITE = """[suite]
name = "hostile"
runs = 8
min_runs = 8
calibration_runs = 6

[[scenario]]
name = "render"
command = ["{bin}", "{suite_dir}/input.txt"]

[[metric]]
name = "wall_ms"
"""
SLOW = "sleep 0.25"  # the honest work both binaries do: far above any noise floor here
BASELINE = f"#!/bin/sh\n{SLOW}\ncat \"$1\"\n"


def _setup(tmp_path: Path, candidate: str) -> tuple[Suite, Path, Path]:
    (tmp_path / "suite.toml").write_text(SUITE)
    (tmp_path / "input.txt").write_text("one line\n")
    base, cand = tmp_path / "bin" / "base.sh", tmp_path / "bin" / "cand.sh"
    base.parent.mkdir()
    for path, text in ((base, BASELINE), (cand, candidate)):
        path.write_text(text)
        path.chmod(0o755)
    for directory in (tmp_path, base.parent):
        directory.chmod(0o755)
    return load_suite(tmp_path / "suite.toml"), base, cand


def _verdict(suite: Suite, base: Path, cand: Path, tmp_path: Path, *, confined: bool) -> Verdict:
    suite = dataclasses.replace(suite, confine=confined)
    return run_verdict(suite, base, cand, results=tmp_path / f"results-{confined}", seed=7)


def _cache(where: str) -> str:
    """A candidate that answers from a cache keyed on its input's hash, kept in `where`."""
    return (f"#!/bin/sh\nkey=\"{where}/render-$(sha256sum < \"$1\" | cut -c1-16)\"\n"
            f"if [ -f \"$key\" ]; then cat \"$key\"; exit 0; fi\n"
            f"mkdir -p \"$(dirname \"$key\")\" 2>/dev/null; {SLOW}; cat \"$1\" | tee \"$key\" 2>/dev/null\n")


@pytest.mark.parametrize("where", ["$TMPDIR", "$HOME/.cache", "/var/tmp"])
def test_a_cache_kept_between_runs_is_impossible_confined(tmp_path: Path, where: str) -> None:
    suite, base, cand = _setup(tmp_path, _cache(where))
    confined = _verdict(suite, base, cand, tmp_path, confined=True)
    assert confined.verdict != VerdictWord.PASS, confined.reasons
    assert confined.confinement and confined.confinement.startswith("measured runs confined"), confined.confinement


def test_a_cache_unconfined_is_flagged_state_between_runs(tmp_path: Path) -> None:
    suite, base, cand = _setup(tmp_path, _cache(str(tmp_path / "cache")))
    unconfined = _verdict(suite, base, cand, tmp_path, confined=False)
    assert unconfined.verdict != VerdictWord.PASS, unconfined.reasons
    assert any("state between runs" in reason for reason in unconfined.reasons), unconfined.reasons


def _swapper(base: Path) -> str:
    """On its 3rd run, puts a slower baseline in place; on its 6th, restores the original."""
    return (f"#!/bin/sh\nn=$(cat {base}.count 2>/dev/null || echo 0); n=$((n+1)); echo $n > {base}.count\n"
            f"if [ $n = 3 ]; then cp {base} {base}.orig; printf '#!/bin/sh\\nsleep 0.6\\ncat \"$1\"\\n' > {base}; fi\n"
            f"if [ $n = 6 ]; then cp {base}.orig {base}; fi\n{SLOW}\ncat \"$1\"\n")


def test_a_baseline_swapped_and_restored_mid_verdict_never_counts(tmp_path: Path) -> None:
    suite, base, cand = _setup(tmp_path, _swapper(tmp_path / "bin" / "base.sh"))
    confined = _verdict(suite, base, cand, tmp_path, confined=True)
    assert confined.verdict != VerdictWord.PASS and base.read_text() == BASELINE
    assert not (tmp_path / "bin" / "base.sh.orig").exists(), "the candidate wrote beside the baseline"
    # unconfined, the swap happens: the hash taken after every pair catches it before the restore
    (tmp_path / "bin").chmod(0o755)
    unconfined = _verdict(suite, base, cand, tmp_path, confined=False)
    assert unconfined.verdict == VerdictWord.ERROR, unconfined.reasons
    assert "changed during the campaign" in " ".join(unconfined.reasons)


def test_the_measured_binary_reaches_nothing_of_yours(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    calls: list[str] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            calls.append("called")
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    records = tmp_path / "private"
    records.mkdir(mode=0o755)
    lab_db, config = records / "lab.db", records / "orchard.toml"
    lab_db.write_text("records\n")
    config.write_text("[lab]\n")
    marker = f"sleep 3{secrets.randbelow(10**6)}"
    reach = (f"#!/bin/sh\necho forged >> {lab_db}; echo '[evil]' >> {config}; ls {Path.home()} > {records}/home 2>&1\n"
             f"cat /etc/shadow > {records}/shadow 2>/dev/null\n"
             f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 1)' 2>/dev/null\n"
             f"setsid sh -c '{marker}' >/dev/null 2>&1 < /dev/null &\n{SLOW}\ncat \"$1\"\n")
    suite, base, cand = _setup(tmp_path, reach)
    try:
        confined = _verdict(suite, base, cand, tmp_path, confined=True)
    finally:
        done.set()
        thread.join()
        listener.close()
    assert confined.verdict != VerdictWord.ERROR, confined.reasons
    assert lab_db.read_text() == "records\n" and config.read_text() == "[lab]\n"
    assert not (records / "home").exists() and not (records / "shadow").exists()
    assert not calls, "the measured binary reached the host's loopback"
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid) == marker.split()]
    assert not left, "a process the measured binary started outlived its run"


def _cmdline(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []
