"""Workers in tmux windows, on one private tmux server per workspace.

The server runs on its own socket (`tmux -L orchard-<hash>`), started with
no configuration file, so neither the user's own tmux server nor their
~/.tmux.conf is ever involved, and stopping the lab kills exactly this
server. Each worker gets a window named after its experiment, started in its
target checkout; a user watches any of them live with `attach_command()`.

`remain-on-exit` is set for the whole server before the first window
exists, so a finished worker's pane stays, dead, until orchard has read its
exit status from tmux (`#{pane_dead_status}`, `#{pane_dead_signal}`); only
then is the window closed. tmux 3.3a sometimes misses a pane process's
SIGCHLD (seen here with several panes ending at once, about one run in ten):
the pane shows dead with no status while its process stays a zombie, until
some other child of the server exits and tmux reaps them all. orchard then
gives it one (`run-shell -b true`), which recovers a status and a signal alike.
tmux may also close a pane before it has read the status; for that case the
wrapper writes its exit code to a private status file, which is read only
when tmux has no status for a dead pane.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import cast

import libtmux

from orchard.errors import UsageError
from orchard.lab.config.sections import ExecutorKind
from orchard.lab.workers.executors.local import ProcessExecutor, _Running, exit_line, wrap
from orchard.lab.workers.jobs.job import Job

SESSION = "orchard"
# How long a dead pane may show no exit status before it is recorded as unknown.
STATUS_GRACE_S = 5.0
# How often tmux is asked about panes when no job shows a sign of having ended (`_worth_asking`).
RECHECK_S = 2.0
_PANE_FORMAT = "#{window_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}"


def attach_command(socket_name: str) -> str:
    """What a user runs to watch a workspace's workers live (`orchard status` prints it)."""
    return f"tmux -L {socket_name} attach -t {SESSION}"


class TmuxError(RuntimeError):
    """tmux refused a command."""



def _handle(running: _Running) -> tuple[str, str]:
    """A tmux job's handle: its window id and the key of its status file."""
    window_id, key = cast(tuple[str, str], running.handle)
    return window_id, key

class TmuxExecutor(ProcessExecutor):
    kind = ExecutorKind.TMUX

    def __init__(self, socket_name: str, runtime_dir: Path | None = None) -> None:
        """`runtime_dir` holds the wrappers' exit-status files (default: a private temp dir).

        A workspace passes a directory of its own, so that even an orchard
        killed with SIGKILL leaves nothing in /tmp; files a killed run left
        there are cleared here, before any new job could be confused with them.
        """
        if shutil.which("tmux") is None:
            raise UsageError("tmux is not installed: set workers.executor = \"subprocess\"")
        super().__init__()
        self.socket_name = socket_name
        self._dead_since: dict[str, float] = {}
        self._asked_at = float("-inf")  # when tmux was last asked how the panes stand
        self._owns_runtime = runtime_dir is None
        self._runtime = Path(tempfile.mkdtemp(prefix=f"{socket_name}-")) if runtime_dir is None else runtime_dir
        self._runtime.mkdir(parents=True, exist_ok=True)
        for stale in self._runtime.glob("*.exit"):
            stale.unlink(missing_ok=True)
        self._launched = 0
        # -f /dev/null: the user's ~/.tmux.conf must not change how workers run.
        self.server = libtmux.Server(socket_name=socket_name, config_file="/dev/null")

    def attach_command(self) -> str:
        return attach_command(self.socket_name)

    def _tmux(self, *args: str) -> list[str]:
        result = self.server.cmd(*args)
        if result.stderr:
            raise TmuxError(f"tmux -L {self.socket_name} {args[0]}: {' '.join(result.stderr)}")
        return list(result.stdout)

    def _has_session(self) -> bool:
        """One tmux call: `has-session` fails alike when there is no server or no session."""
        try:
            return self.server.cmd("has-session", "-t", SESSION).returncode == 0
        except Exception:  # noqa: BLE001 - as libtmux's own is_alive: no answer is no session
            return False

    def _status_file(self, window_key: str) -> Path:
        return self._runtime / f"{window_key}.exit"

    def _launch(self, job: Job) -> tuple[int, object]:
        self._launched += 1
        key = f"job{self._launched}"
        script = wrap(job, self._status_file(key))
        window = ["-n", job.name, "-c", str(job.cwd), "-P", "-F", "#{window_id} #{pane_pid}"]
        # Several arguments after the options: tmux runs them directly, no shell.
        command = ["bash", "-c", script]
        if self._has_session():
            out = self._tmux("new-window", "-d", "-t", f"{SESSION}:", *window, *command)
        else:
            out = self._tmux(
                "start-server", ";",
                "set-option", "-g", "remain-on-exit", "on", ";",
                "set-option", "-g", "allow-rename", "off", ";",
                "set-option", "-g", "automatic-rename", "off", ";",
                "new-session", "-d", "-s", SESSION, "-x", "200", "-y", "50", *window, *command,
            )
        window_id, pane_pid = out[-1].split()
        return int(pane_pid), (window_id, key)

    def _find(self, job: Job) -> tuple[int, object] | None:
        if not self._has_session():
            return None
        result = self.server.cmd("list-windows", "-t", SESSION, "-F", "#{window_id}\t#{window_name}\t#{pane_pid}")
        for line in result.stdout:
            window_id, name, pane_pid = (line.split("\t") + ["", "", ""])[:3]
            if name == job.name and pane_pid.isdigit():
                self._launched += 1
                return int(pane_pid), (window_id, f"job{self._launched}")
        return None

    def _worth_asking(self) -> bool:
        """Whether a job may have ended since tmux was last asked: each ask is a process on the loop's time.

        A wrapper writes its status file as it exits, and orchard knows the jobs it ended itself; only a
        wrapper killed from outside leaves neither, and tmux is asked every `RECHECK_S` for that.
        """
        if not self._running:
            return False  # an idle poll starts no process
        return (time.monotonic() - self._asked_at >= RECHECK_S
                or any(entry.ended_by is not None or self._status_file(_handle(entry)[1]).exists()
                       for entry in self._running.values()))

    def _panes(self) -> dict[str, tuple[bool, str, str]]:
        """Each window's pane as tmux sees it: (dead, exit status, signal), the last two "" when unknown."""
        panes: dict[str, tuple[bool, str, str]] = {}
        result = self.server.cmd("list-panes", "-a", "-F", _PANE_FORMAT)  # no server: no panes, no output
        if result.returncode == 0:
            for line in result.stdout:
                pane_id, _pid, pane_dead, pane_status, pane_sig = (line.split("\t") + ["", "", "", ""])[:5]
                panes[pane_id] = (pane_dead == "1", pane_status, pane_sig)
        return panes

    def _statuses(self) -> dict[str, tuple[int | None, int | None] | None]:
        if not self._worth_asking():
            return {name: None for name in self._running}
        self._asked_at = time.monotonic()
        panes = self._panes()
        ours = [panes.get(_handle(entry)[0]) for entry in self._running.values()]
        if any(pane is not None and pane[0] and not pane[1] and not pane[2] for pane in ours):
            # Dead with no status: tmux may have missed the SIGCHLD. Any child of the server
            # exiting makes it reap every one, this pane's process too. -b: never wait on tmux's
            # own SIGCHLD handling; a status that is not there yet is read at the next ask.
            self.server.cmd("run-shell", "-b", "true")
            panes = self._panes()
        statuses: dict[str, tuple[int | None, int | None] | None] = {}
        now = time.monotonic()
        for name, entry in self._running.items():
            window_id, key = _handle(entry)
            pane = panes.get(window_id)
            if pane is None:
                statuses[name] = (None, None)  # the window was closed outside orchard
                continue
            dead, status, sig = pane
            if dead and not status and not sig:
                # tmux marks a pane dead when its terminal closes and reads
                # the exit status when it reaps the process, which may come later.
                # The wrapper's status file, else its exit line in the log (a job adopted after a
                # restart has a new key, so the file the first orchard named is not found).
                recorded = self._status_file(key)
                logged = exit_line(entry.job.log_path)
                if recorded.is_file() and recorded.read_text().strip().isdigit():
                    status = recorded.read_text().strip()
                elif logged is not None:
                    status = str(logged)
                elif now - self._dead_since.setdefault(window_id, now) < STATUS_GRACE_S:
                    dead = False
            statuses[name] = (int(status) if status else None, int(sig) if sig else None) if dead else None
        return statuses

    def _release(self, running: _Running) -> None:
        window_id, key = _handle(running)
        self._dead_since.pop(window_id, None)
        self._status_file(key).unlink(missing_ok=True)
        self.server.cmd("kill-window", "-t", window_id)  # a server that is gone took the window with it

    def socket_path(self) -> Path:
        """Where tmux puts this server's socket (tmux's own rule: $TMUX_TMPDIR or /tmp)."""
        return Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / self.socket_name

    def _shutdown(self, killed: list[_Running]) -> None:
        if self.server.is_alive():
            self.server.cmd("kill-server")
        if not self.server.is_alive():
            self.socket_path().unlink(missing_ok=True)  # tmux leaves the socket file behind
        if self._owns_runtime:
            shutil.rmtree(self._runtime, ignore_errors=True)
        else:
            for leftover in self._runtime.glob("*.exit"):
                leftover.unlink(missing_ok=True)
