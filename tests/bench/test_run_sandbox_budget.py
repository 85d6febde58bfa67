"""A measured run has a process budget of its own whatever descriptors it inherits (issue 35, item 5).

The runner in a side's sandbox made each run's pids cgroup through a descriptor of the cgroups' directory,
after it had moved the run's own descriptors to the numbers the run expects. A run inheriting a descriptor whose
number was that directory's (the timer's report pipe, made just after the side started, takes the lowest free
numbers) lost its cgroup and fell back to the sandbox uid's RLIMIT_NPROC, shared by every sandbox: beside a worker
holding its processes, the baseline's first measured run failed "Resource temporarily unavailable" (a clean-clone
CI's `test_process_budget`, about one run in five under load). The runner now enters the side's cgroup once, before
any run (a migration per run cost 10-15 ms of each: docs/benchmarks.md section 11), and every run is born in it:
the budget is still each run's own, since runs come one at a time and none outlives its PID namespace.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchard import confine, sandbox_pids
from orchard.bench.sandbox.run_sandbox import Sandboxes
from orchard.limits import Limits
from tests.helpers import SYSTEM_TMP
from tests.lab.lab_helpers import stop_process_groups

LIMITS = Limits(processes=20)
MOUNTS = confine.Mounts(cwd=Path("/"), hidden=SYSTEM_TMP)
HOLD = "i=0; while [ $i -lt 16 ]; do sleep 300 & i=$((i+1)); done; echo held; wait"
WORK = "i=0; while [ $i -lt 10 ]; do sleep 0.1 & i=$((i+1)); done; wait; grep pids /proc/self/cgroup"


def test_a_run_inheriting_any_descriptor_number_keeps_its_own_budget_beside_a_sandbox_holding_its_own() -> None:
    own = sandbox_pids.own_directory()
    if own is None or confine.unavailable() is not None:
        pytest.skip("needs bubblewrap and a writable pids cgroup hierarchy (orchard as root)")
    mounts = MOUNTS
    holder = subprocess.Popen(confine.argv(mounts, ["sh", "-c", HOLD], LIMITS), stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    sandboxes = Sandboxes()
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        first = sandboxes.argv(mounts, ["true"], LIMITS, [])  # starts the side: its descriptors are free again
        assert first is not None and subprocess.run(first, timeout=60, check=False).returncode == 0
        pipes = [os.pipe() for _ in range(4)]  # the lowest free numbers, the cgroups' directory's among them
        groups = []
        for fd in [fd for pipe in pipes for fd in pipe]:
            argv = sandboxes.argv(mounts, ["sh", "-c", WORK], LIMITS, [fd])
            assert argv is not None
            done = subprocess.run(argv, capture_output=True, text=True, pass_fds=[fd], timeout=60, check=False)
            assert done.returncode == 0 and "no pids cgroup" not in done.stderr, (fd, done.stderr)
            groups.append(done.stdout.strip())
        assert len(set(groups)) == 1 and own.name in groups[0]  # the side's own, not the holder's
        holders = Path(f"/proc/{holder.pid}/cgroup").read_text()
        assert groups[0].split(":")[-1] not in holders
    finally:
        sandboxes.close()
        stop_process_groups([holder])


def test_each_run_in_a_sides_sandbox_has_the_whole_budget_and_no_more() -> None:
    """A run may hold all but its shell's share of `processes`, the next run finds them all free again, and a run
    starting more than its budget cannot fork past it."""
    if sandbox_pids.own_directory() is None or confine.unavailable() is not None:
        pytest.skip("needs bubblewrap and a writable pids cgroup hierarchy (orchard as root)")
    mounts, sandboxes = MOUNTS, Sandboxes()
    fill = "i=0; while [ $i -lt {n} ]; do sleep 0.3 & i=$((i+1)); done; wait; echo done"
    try:
        said = []
        for count in (19, 19, 30):  # the shell and 19 sleeps: its 20; then the same again; then past it
            argv = sandboxes.argv(mounts, ["sh", "-c", fill.format(n=count)], LIMITS, [])
            assert argv is not None
            said.append(subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False))
        assert [run.stdout for run in said[:2]] == ["done\n", "done\n"], [run.stderr for run in said[:2]]
        assert "fork" in said[2].stderr.lower() or "resource temporarily unavailable" in said[2].stderr.lower(), \
            said[2].stderr
    finally:
        sandboxes.close()
