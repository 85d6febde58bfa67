"""A process and everything below it killed, whatever sessions or process groups its members made.

Below the executors: the dask task and the git daemon's server kill their trees too.
"""

from __future__ import annotations

import signal

import psutil


def kill_tree(root_pid: int, *, include_root: bool) -> list[int]:
    """SIGKILL every descendant of `root_pid` (and the root if asked); return the pids killed.

    Descendants are listed again until none is left, so a process forked
    while the tree was being killed is caught on the next pass.
    """
    killed: list[int] = []
    try:
        root = psutil.Process(root_pid)
    except psutil.NoSuchProcess:
        return killed
    for _ in range(50):
        try:
            victims = root.children(recursive=True)
        except psutil.NoSuchProcess:
            victims = []
        if not victims:
            break
        for victim in victims:
            try:
                victim.send_signal(signal.SIGKILL)
                killed.append(victim.pid)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(victims, timeout=0.5)
    if include_root:
        try:
            root.send_signal(signal.SIGKILL)
            killed.append(root_pid)
        except psutil.NoSuchProcess:
            pass
    return killed
