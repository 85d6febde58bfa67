"""The sandbox's command line, run for real: what the unprivileged sandbox uid reaches when orchard is root."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchard import confine, host_sockets, sandbox_pids
from orchard.bench.sandbox.confinement import ClosedTree, confine_runs, open_to_sandbox
from orchard.limits import Limits
from orchard.within import below, inside
from tests.helpers import SYSTEM_TMP, unhidden_dir
from tests.lab.lab_helpers import stop_process_groups


@pytest.fixture
def closed_dir() -> Iterator[Path]:
    """A 0700 directory of root's outside every place a sandbox hides (/tmp, home): only root may enter it."""
    if not confine.dropping() or confine.unavailable() is not None:
        pytest.skip("needs root and a working bubblewrap (sandboxes drop to another uid only when orchard is root)")
    with unhidden_dir() as directory:
        yield directory


def test_a_checkout_under_a_directory_the_sandbox_uid_cannot_enter_is_reached_and_nothing_else_there(
        closed_dir: Path) -> None:
    """A lab in /srv/x (x 0700, as mkdtemp makes it): its sandboxed build writes its checkout (it could not
    even change into it before), and sees nothing else of x."""
    (closed_dir / "secret").write_text("root's\n")
    lab = closed_dir / "lab"
    checkout = lab / "judge" / "target"
    checkout.mkdir(parents=True)
    confine.hand_over([checkout])
    mounts = confine.Mounts(cwd=checkout, hidden=(lab, *SYSTEM_TMP), writable=(checkout,))
    script = f"echo built > built.txt && id -u && ls -A {closed_dir} && cat {closed_dir}/secret"
    ran = subprocess.run(confine.argv(mounts, ["sh", "-c", script]), capture_output=True, text=True, timeout=60,
                         check=False)
    assert (checkout / "built.txt").read_text() == "built\n", ran.stderr
    assert ran.stdout.split() == [str(confine.sandbox_id()), "lab"], ran.stdout  # its checkout's way, no more
    assert ran.returncode != 0 and "root's" not in ran.stdout


def test_a_program_in_a_directory_closed_to_the_sandbox_uid_is_named_with_that_directory(closed_dir: Path) -> None:
    tool = closed_dir / "bin" / "tool"
    tool.parent.mkdir(mode=0o755)
    tool.write_text("#!/bin/sh\necho ran\n")
    tool.chmod(0o755)
    mounts = confine.Mounts(cwd=Path("/"))
    assert mounts.cannot_read(tool) == closed_dir
    closed_dir.chmod(0o711)  # passable: the program itself counts now
    assert mounts.cannot_read(tool) is None
    tool.chmod(0o700)
    assert mounts.cannot_read(tool) == tool


def test_a_lab_never_measures_as_orchards_uid_a_users_own_verdict_says_it_does(closed_dir: Path) -> None:
    """On main a tree closed to other users made every measured run keep orchard's uid (root), in a lab too."""
    tree = closed_dir / "tree"
    tree.mkdir(mode=0o711)
    tree.chmod(0o711)
    with pytest.raises(ClosedTree, match="closed its tree to the sandbox"):
        confine_runs(True, trees=[tree], owner=False)
    own = confine_runs(True, trees=[tree])
    assert not own.unprivileged and "as orchard's own uid" in own.note and str(tree) in own.note


def test_a_closed_tree_is_opened_to_the_sandbox_uid_and_measured_as_it(closed_dir: Path, tmp_path: Path) -> None:
    tree = closed_dir / "tree"
    (tree / "bin").mkdir(parents=True)
    program = tree / "bin" / "tool"
    program.write_text("#!/bin/sh\nid -u\n")
    program.chmod(0o700)
    (tree / "bin").chmod(0o700)
    tree.chmod(0o711)
    open_to_sandbox([tree])
    confined = confine_runs(True, trees=[tree], owner=False)
    argv = confined.wrap([str(program)], binary=program, suite_dir=tree, root=tmp_path, results_file=None,
                         loopback=False)
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert ran.stdout.strip() == str(confine.sandbox_id()) != "0", ran.stderr
    assert program.stat().st_mode & 0o777 == 0o705  # its owner's bits as they were, others may read and run it


@pytest.mark.parametrize(("path", "root"), [("/a/b", "/a"), ("/a", "/a"), ("/ab", "/a"), ("/a", "/"), ("/", "/"),
                                            ("a/b", "."), ("/a", "."), ("a", "a/b"), ("/a/b/c", "/a/b")])
def test_inside_and_below_mean_what_parents_say(path: str, root: str) -> None:
    """Computed from parts (a confined run's argv asks thousands of times), the same as pathlib's parents."""
    p, r = Path(path), Path(root)
    assert inside(p, r) == (p == r or r in p.parents)
    assert below(p, r) == (r in p.parents)


def test_a_sandbox_holding_nearly_all_its_processes_starves_no_other(closed_dir: Path) -> None:
    """On main the budget was the sandbox uid's rlimit, shared by every sandbox: one holding 17 of 20 processes
    made the next fail to fork ("Resource temporarily unavailable"), in another lab as much as in its own."""
    if sandbox_pids.own_directory() is None:
        pytest.skip("no writable pids cgroup hierarchy here")
    limits = Limits(processes=20)
    hold = "i=0; while [ $i -lt 16 ]; do sleep 300 & i=$((i+1)); done; echo held; wait"
    mounts = confine.Mounts(cwd=closed_dir, hidden=SYSTEM_TMP)
    holder = subprocess.Popen(confine.argv(mounts, ["sh", "-c", hold], limits),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        work = "i=0; while [ $i -lt 10 ]; do sleep 2 & i=$((i+1)); done; wait; echo done"
        other = subprocess.run(confine.argv(mounts, ["sh", "-c", work], limits),
                               capture_output=True, text=True, timeout=60, check=False)
        assert other.returncode == 0 and other.stdout == "done\n" and "fork" not in other.stderr, other.stderr
    finally:
        stop_process_groups([holder])


def test_a_host_socket_gone_before_the_probe_mounted_over_it_does_not_say_no_sandbox_can_be_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe covers every host socket it lists; one removed meanwhile (a browser's SingletonSocket in its
    own /tmp directory, as a clean-clone CI met it) makes bwrap fail on that path. Orchard then ran unconfined
    (`bench run`) or refused to start (a lab), though a sandbox could be made."""
    if confine.bwrap() is None:
        pytest.skip("needs bubblewrap")
    real = host_sockets.bound
    listed: list[int] = []

    def vanishing(table: Path = host_sockets.PROC_NET_UNIX) -> list[Path]:
        listed.append(1)
        gone = [tmp_path / "org.chromium.Chromium.gone" / "SingletonSocket"] if len(listed) == 1 else []
        return [*gone, *real(table)]

    monkeypatch.setattr(host_sockets, "bound", vanishing)
    confine._probe.cache_clear()
    try:
        assert confine.unavailable() is None
    finally:
        confine._probe.cache_clear()
    assert len(listed) == 2  # listed again for the second try


def test_a_socket_removed_before_the_sandbox_starts_fails_only_a_sandbox_that_sees_its_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the tests' own sandboxes hide /tmp (`tests.helpers.SYSTEM_TMP`), as orchard's do: a socket listed, then
    removed with its directory before bwrap covers it, fails a sandbox that sees /tmp, and no other."""
    if confine.unavailable() is not None:
        pytest.skip("needs a working bubblewrap")
    gone = Path(tempfile.mkdtemp(dir="/tmp")) / "s0"
    gone.parent.rmdir()
    monkeypatch.setattr(host_sockets, "bound", lambda: [gone])
    seeing = subprocess.run(confine.argv(confine.Mounts(cwd=Path("/")), ["true"]), capture_output=True, text=True,
                            timeout=60, check=False)
    assert seeing.returncode != 0 and str(gone.parent) in seeing.stderr, seeing.stderr
    hiding = subprocess.run(confine.argv(confine.Mounts(cwd=Path("/"), hidden=SYSTEM_TMP), ["true"]),
                            capture_output=True, text=True, timeout=60, check=False)
    assert hiding.returncode == 0, hiding.stderr
