"""Workers in tmux windows, on one private tmux server per workspace.

The server runs on its own socket (`tmux -L orchard-<hash>`), started with
no configuration file, so neither the user's own tmux server nor their
~/.tmux.conf is ever involved, and stopping the lab kills exactly this
server. Each worker gets a window named after its experiment, started in its
target checkout; a user watches any of them live with `attach_command()`.

`remain-on-exit` is set for the whole server before the first window
exists, so a finished worker's pane stays, dead, until orchard has read its
exit status from tmux (`#{pane_dead_status}`, `#{pane_dead_signal}`); only
then is the window closed.
"""

from __future__ import annotations

import shutil

import libtmux

from orchard.errors import UsageError
from orchard.lab.executors.base import Executor, Job, _Running

SESSION = "orchard"
_PANE_FORMAT = "#{window_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}"


def attach_command(socket_name: str) -> str:
    """What a user runs to watch a workspace's workers live (`orchard status` prints it)."""
    return f"tmux -L {socket_name} attach -t {SESSION}"


class TmuxError(RuntimeError):
    """tmux refused a command."""


class TmuxExecutor(Executor):
    kind = "tmux"

    def __init__(self, socket_name: str) -> None:
        if shutil.which("tmux") is None:
            raise UsageError("tmux is not installed: set workers.executor = \"subprocess\"")
        super().__init__()
        self.socket_name = socket_name
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
        return self.server.is_alive() and self.server.cmd("has-session", "-t", SESSION).returncode == 0

    def _launch(self, job: Job, script: str) -> tuple[int, object]:
        window = ["-n", job.name, "-c", str(job.cwd), "-P", "-F", "#{window_id} #{pane_pid}"]
        for key, value in job.env.items():
            window += ["-e", f"{key}={value}"]
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
        return int(pane_pid), window_id

    def _statuses(self) -> dict[str, tuple[int | None, int | None] | None]:
        panes: dict[str, tuple[bool, str, str]] = {}
        if self.server.is_alive():
            result = self.server.cmd("list-panes", "-a", "-F", _PANE_FORMAT)
            for line in result.stdout:
                window_id, _pid, dead, status, sig = (line.split("\t") + ["", "", "", ""])[:5]
                panes[window_id] = (dead == "1", status, sig)
        statuses: dict[str, tuple[int | None, int | None] | None] = {}
        for name, entry in self._running.items():
            pane = panes.get(str(entry.handle))
            if pane is None:
                statuses[name] = (None, None)  # the window was closed outside orchard
            elif not pane[0]:
                statuses[name] = None
            else:
                _, status, sig = pane
                statuses[name] = (int(status) if status else None, int(sig) if sig else None)
        return statuses

    def _release(self, running: _Running) -> None:
        if self.server.is_alive():
            self.server.cmd("kill-window", "-t", str(running.handle))

    def _shutdown(self, killed: list[_Running]) -> None:
        if self.server.is_alive():
            self.server.cmd("kill-server")
