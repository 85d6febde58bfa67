"""A recording stand-in for the agent CLIs (claude, codex, agent, aider).

No model service is reachable here, so tests put this first on PATH under
each CLI's name. It logs its argv, reads the prompt the way the real CLI
would receive it, takes its paths and scope from the prompt's text (as an
agent would), makes a real edit, writes the report, and prints usage in the
CLI's own output format. `STANDIN_MODE` picks a misbehaviour:

edit (default) | hang | tamper | leave-scope | no-report | bad-report | commit
| auth-error (the CLI's own "not logged in" / network error, nothing changed)
A prompt that is not a worker's (pre-flight's test request) is answered
with usage, whatever the mode.
`--version` answers as the real CLIs do (the lab's pre-flight asks), unless
`STANDIN_VERSION_FAILS` is set. The login status commands (`claude auth
status`, `codex login status`) replay what the real CLIs printed
(tests/lab/data/cli-help/status-commands.json, copied beside the stand-in):
logged in, unless the CLI is named in `STANDIN_LOGGED_OUT` (e.g.
"claude,codex"): then what it printed with no credential, or with the
credential variable that is set (Claude Code counts its key, Codex not);
a CLI named in `STANDIN_OLDER` answers as the older version recorded
without that command (Claude Code 1.0.100).

Its first line of output records the call (`standin-call {json}`: argv, cwd
and the names of the variables it was given, with the values of those that
are test canaries), which the tests read back from the worker's log: a
sandboxed worker can write nowhere else the tests look.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CALL = "standin-call "  # the line recording a call
CANARY = "canary-"  # a test's fake secret: its value is recorded, every other value is not


def prompt_text(cli: str, argv: list[str]) -> str:
    if cli == "aider":
        return Path(argv[argv.index("--message-file") + 1]).read_text()
    if cli == "claude":
        return argv[argv.index("-p") + 1]
    return argv[-1]  # codex exec and cursor's agent take the prompt last


def field(prompt: str, label: str) -> str:
    match = re.search(re.escape(label) + r"[^`]*`([^`]+)`", prompt)
    if not match:
        raise SystemExit(f"standin: the prompt has no {label!r}")
    return match.group(1)


def scope(prompt: str) -> list[str]:
    section = prompt.split("## What you may change", 1)[1].split("##", 1)[0]
    return re.findall(r"^- `([^`]+)`", section, re.MULTILINE)


def print_usage(cli: str) -> None:
    if cli == "claude":
        print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": 3,
                          "result": "done", "total_cost_usd": 0.0123,
                          "usage": {"input_tokens": 1200, "output_tokens": 340,
                                    "cache_read_input_tokens": 5000, "cache_creation_input_tokens": 800}}))
    elif cli == "codex":
        print(json.dumps({"type": "thread.started", "thread_id": "standin"}))
        for tokens in (700, 500):
            print(json.dumps({"type": "turn.started"}))
            print(json.dumps({"type": "turn.completed",
                              "usage": {"input_tokens": tokens, "cached_input_tokens": 100, "output_tokens": 50}}))
    elif cli == "aider":
        print("Tokens: 1.2k sent, 340 received. Cost: $0.01 message, $0.01 session.")
        print("Tokens: 2.5k sent, 120 received. Cost: $0.02 message, $0.03 session.")
    else:
        print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "duration_ms": 5,
                          "result": "done", "session_id": "standin"}))


def print_auth_error(cli: str) -> int:
    """What the real CLIs print without credentials or network (Claude Code 2.1, Codex 0.171)."""
    if cli == "codex":
        print(json.dumps({"type": "thread.started", "thread_id": "standin"}))
        print(json.dumps({"type": "error", "message": "stream error: 401 Unauthorized; retrying 1/5"}))
        print(json.dumps({"type": "turn.failed", "error": {"message": "401 Unauthorized: missing bearer token"}}))
    else:
        print(json.dumps({"type": "result", "subtype": "success", "is_error": True, "duration_ms": 12,
                          "num_turns": 1, "result": "Not logged in · Please run /login", "total_cost_usd": 0}))
    return 1


STATUS = {"claude": ["auth", "status"], "codex": ["login", "status"]}


def replay_status(cli: str, argv: list[str]) -> int:
    """The recorded answer of the real CLI's status command, in the login state the test asks for."""
    recorded = json.loads((Path(__file__).parent / "cli-help" / "status-commands.json").read_text())
    answers = [e for e in recorded["calls"] if e["cli"] == cli and e["argv"] == argv]
    if cli in os.environ.get("STANDIN_OLDER", "").split(","):
        entry = next(e for e in answers if e["state"] == "unknown")
    elif cli in os.environ.get("STANDIN_LOGGED_OUT", "").split(","):  # what it said with a key set, if recorded
        entry = next((e for e in answers if e.get("credential") and os.environ.get(e["credential"])), None) or next(
            e for e in answers if e["state"] == "logged-out" and not e.get("credential"))
    else:
        entry = next(e for e in answers if e["state"] == "logged-in")
    text = (Path(__file__).parent / "cli-help" / entry["output"]).read_text()
    print(text, end="", file=sys.stderr if entry.get("stream") == "stderr" else sys.stdout)
    return int(entry["exit_code"])


def calls(log_text: str) -> list[dict[str, Any]]:
    """Every call the stand-in recorded in a worker's log."""
    return [json.loads(line[len(CALL):]) for line in log_text.splitlines() if line.startswith(CALL)]


def main() -> int:
    cli, argv = sys.argv[1], sys.argv[2:]
    if argv == ["--version"]:
        if os.environ.get("STANDIN_VERSION_FAILS"):
            print(f"{cli}: cannot start (broken install)", file=sys.stderr)
            return 3
        print(f"1.0.0 ({cli} stand-in)")
        return 0
    if argv[:len(STATUS.get(cli, ["-"]))] == STATUS.get(cli):
        return replay_status(cli, argv)
    canaries = {name: value for name, value in os.environ.items() if value.startswith(CANARY)}
    print(CALL + json.dumps({"cli": cli, "argv": argv, "cwd": os.getcwd(), "env": sorted(os.environ),
                             "canaries": canaries}), flush=True)
    mode = os.environ.get("STANDIN_MODE", "edit")
    prompt = prompt_text(cli, argv)
    heading = re.search(r"^# Experiment: (\S+)", prompt, re.MULTILINE)
    if heading is None:  # pre-flight's test request: answered, whatever the mode (the modes are the workers')
        print_usage(cli)
        return 0
    if mode == "auth-error":
        return print_auth_error(cli)
    experiment = heading.group(1)
    checkout = Path(field(prompt, "Your checkout of the code"))
    bench = Path(field(prompt, "Your copy of the benchmark"))
    report = Path(field(prompt, "Your report file"))
    print(f"standin {cli}: experiment {experiment} in {checkout} (mode {mode})", flush=True)
    if mode == "hang":
        # A grandchild in its own session: only a tree kill reaches it.
        subprocess.Popen(["setsid", "sleep", "3600"])
        time.sleep(3600)
        return 0
    target = checkout / scope(prompt)[0]
    if target.is_dir() or scope(prompt)[0].endswith("/"):
        target = target / "standin.txt"
    with target.open("a") as handle:
        handle.write(f"edited by {cli} for {experiment}\n")
    if mode == "tamper":
        tracked = sorted(p for p in bench.iterdir() if p.is_file() and not p.name.startswith("."))
        try:
            with (tracked[0] if tracked else bench / "flatter.txt").open("a") as handle:
                handle.write("a friendlier number\n")
        except OSError as error:
            print(f"standin: cannot change the bench: {error}", flush=True)
    if mode == "leave-scope":
        with (checkout / "README").open("a") as handle:
            handle.write("outside the scope\n")
    if mode == "commit":
        subprocess.run(["git", "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-qam", "no"],
                       cwd=checkout, check=True)
    if mode == "bad-report":
        report.write_text("this is not json")
    elif mode != "no-report":
        report.write_text(json.dumps({
            "schema": "orchard.worker-report/1", "experiment": experiment, "status": "done",
            "summary": f"{cli} stand-in appended a line to {target.name}",
            "changed_files": [str(target.relative_to(checkout))],
            "measurements": [{"metric": "m", "before": 10, "after": 9, "n": 5,
                              "noise_floor": 0.05, "cleared_noise_floor": True}],
        }))
    print_usage(cli)
    return 0


if __name__ == "__main__":
    sys.exit(main())
