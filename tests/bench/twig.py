"""`twig`: a third version-control CLI for the lane tests, with its own grammar.

It is a thin Python wrapper over git whose commands look nothing like git's
(`twig fetch`, `twig save`, `twig send`, ...) and which refuses git's pinned
ISO dates, so a flow file must set its environment. It enters every lane by
its flow file (`FLOW` below) alone. The tests write both into a temp dir.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = r'''#!/usr/bin/env python3
import os, subprocess, sys

def git(*args):
    return subprocess.call(["git", *args])

def main(argv):
    if argv[:1] == ["--version"]:
        print("twig 0.3 (over git)")
        return 0
    for name in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        if "T" in os.environ.get(name, ""):
            print(f"twig: cannot parse {name}={os.environ[name]!r}; give seconds since the epoch", file=sys.stderr)
            return 2
    verb, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if verb == "serve":        # serve DIR HOST PORT: a git daemon in the foreground that accepts pushes
        os.execvp("git", ["git", "daemon", f"--base-path={rest[0]}", "--export-all", "--enable=receive-pack",
                          "--reuseaddr", f"--listen={rest[1]}", f"--port={rest[2]}", rest[0]])
    if verb == "plant":        # plant DIR: an empty served repository
        return git("init", "-q", "--bare", "-b", "main", rest[0])
    if verb == "begin":
        return git("init", "-q", "-b", "main")
    if verb == "where":
        return git("branch", "--show-current")
    if verb == "fetch":        # fetch URL DIR [--line BRANCH]
        extra = ["--branch", rest[3]] if rest[2:3] == ["--line"] else []
        return git("clone", "-q", *extra, rest[0], rest[1])
    if verb == "sprout":       # sprout LINE DIR   (from the current checkout)
        return git("worktree", "add", "-q", "-b", rest[0], rest[1], "origin/main")
    if verb == "line":         # line NAME
        return git("switch", "-q", "-c", rest[0])
    if verb == "look":
        return git("status", "--porcelain=v1")
    if verb == "stage":
        return git("add", "-A")
    if verb == "save":         # save MSG [--only FILE | --tracked]
        if rest[1:2] == ["--only"]:
            return git("commit", "-q", "-m", rest[0], "--", rest[2])
        if rest[1:2] == ["--if-changed"]:  # nothing to save is a no-op, not an error
            changed = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout
            return git("add", "-A") or git("commit", "-q", "-m", rest[0]) if changed.strip() else 0
        if rest[1:2] == ["--tracked"]:
            return git("commit", "-q", "-a", "-m", rest[0])
        return git("add", "-A") or git("commit", "-q", "-m", rest[0])
    if verb == "send":         # send LINE | send --onto REF | send --to URL REF
        if rest[:1] == ["--to"]:
            return git("push", "-q", rest[1], "HEAD:" + rest[2])
        if rest[:1] == ["--onto"]:
            return git("push", "-q", "origin", "HEAD:" + rest[1])
        return git("push", "-q", "-u", "origin", rest[0])
    if verb == "catchup":
        return git("pull", "-q", "--rebase", "origin", "main")
    if verb == "prune":        # prune DIR
        return git("worktree", "remove", "--force", rest[0])
    if verb == "id":
        return git("rev-parse", "HEAD")
    if verb == "pending":      # pending LINE
        return git("rev-list", "--count", f"origin/{rest[0]}..HEAD")
    if verb == "patch":
        return git("diff", "HEAD")
    if verb == "history":      # history N
        return git("log", "-n", rest[0])
    if verb == "last":
        return git("show", "HEAD")
    print(f"twig: unknown command {verb!r}", file=sys.stderr)
    return 2

sys.exit(main(sys.argv[1:]))
'''

FLOW = r"""
kind = "twig"
remote = "git"
publish_protocol = "git"
payload_file = "task-notes.md"
branch = "bench/{bench_id}/{phase}-{subject}-r{run}"
# twig reads dates as seconds since the epoch, not the pinned ISO form.
env = { GIT_AUTHOR_DATE = "1767225600 +0000", GIT_COMMITTER_DATE = "1767225600 +0000" }
prepare = [{ argv = ["{bin}", "fetch", "{remote}", "{base}"], cwd = "root" }]

[notes]
describe = "twig's task description is its save message"
snapshot = "twig save stages and commits in one call"

[steps]
acquire = [{ argv = ["{bin}", "sprout", "{branch}", "{workspace}"], cwd = "base" }]
inspect = [{ argv = ["{bin}", "look"] }]
edit = [{ argv = ["/bin/sh", "-c", "printf '%s\\n' \"$1\" >> task-notes.md", "edit", "{payload}"], kind = "edit" }]
snapshot = [{ argv = ["{bin}", "save", "{message}"] }]
publish = [{ argv = ["{bin}", "send", "{branch}"] }]
describe = []
end = [{ argv = ["{bin}", "prune", "{workspace}"], cwd = "base" }]

[probes]
head = { argv = ["{bin}", "id"] }
unpublished = { argv = ["{bin}", "pending", "{branch}"], pattern = "^[1-9]" }

[interrupted]
acquire = [{ argv = ["{bin}", "fetch", "{remote}", "{workspace}"], cwd = "root" }]
landed = { argv = ["{git}", "--git-dir", "{remote_dir}", "rev-parse", "refs/heads/main"], cwd = "root" }

[agent_task]
phases = ["cold", "warm"]
cold = [
  { name = "acquire", argv = ["{bin}", "fetch", "{remote}", "{workspace}"], cwd = "root" },
  { name = "branch", argv = ["{bin}", "line", "{branch}"] },
  { name = "edit", argv = ["/bin/sh", "-c", "printf '%s\\n' \"$1\" >> task-notes.md", "edit", "{payload}"], kind = "edit" },
  { name = "checkpoint", argv = ["{bin}", "save", "{message}"] },
  { name = "publish", argv = ["{bin}", "send", "{branch}"] },
]
warm = [
  { name = "acquire", argv = ["{bin}", "sprout", "{branch}", "{workspace}"], cwd = "base" },
  { name = "edit", argv = ["/bin/sh", "-c", "printf '%s\\n' \"$1\" >> task-notes.md", "edit", "{payload}"], kind = "edit" },
  { name = "checkpoint", argv = ["{bin}", "save", "{message}"] },
  { name = "publish", argv = ["{bin}", "send", "{branch}"] },
  { name = "cleanup", argv = ["{bin}", "prune", "{workspace}"], cwd = "base" },
]

[contention]
clone = [{ argv = ["{bin}", "fetch", "{remote}", "{workspace}"], cwd = "root" }]
commit_path = [{ argv = ["{bin}", "save", "{message}", "--only", "{path}"] }]
commit_all = [{ argv = ["{bin}", "save", "{message}", "--tracked"] }]
publish = [{ argv = ["{bin}", "send", "--onto", "{ref}"] }]
sync = [{ argv = ["{bin}", "catchup"] }]

[core]
acquire = [{ argv = ["{bin}", "fetch", "{fixture}", "{workspace}"], cwd = "root" }]
stage = [{ argv = ["{bin}", "stage"] }]
status = [{ argv = ["{bin}", "look"] }]
diff = [{ argv = ["{bin}", "patch"] }]
log = [{ argv = ["{bin}", "history", "10"] }]
show = [{ argv = ["{bin}", "last"] }]

[served]
serve = [{ argv = ["{bin}", "serve", "{server_dir}", "{host}", "{port}"], cwd = "root" }]
seed = [
  { name = "plant", argv = ["{bin}", "plant", "{server_dir}/{repo}.git"], cwd = "root" },
  { name = "begin", argv = ["{bin}", "begin"] },
  { name = "save", argv = ["{bin}", "save", "{message}"] },
  { name = "send", argv = ["{bin}", "send", "--to", "{remote}/{repo}.git", "main"] },
]
branch = { argv = ["{bin}", "where"], pattern = "(\\S+)" }
url = "{remote}/{repo}.git"   # the harness's own git clones the branch from here (the oracle is never twig)
phases = ["cold", "followup"]
cold = [
  { name = "acquire", argv = ["{bin}", "fetch", "{remote}/{repo}.git", "{workspace}"], cwd = "root" },
  { name = "inspect", argv = ["{bin}", "look"] },
  { name = "edit", argv = ["/bin/sh", "-c", "printf '%s\\n' \"$1\" >> task-notes.md", "edit", "{payload}"], kind = "edit" },
  { name = "checkpoint", argv = ["{bin}", "save", "{message}"] },
  { name = "publish", argv = ["{bin}", "send", "{branch}"] },
]
followup = [
  { name = "acquire", argv = ["{bin}", "fetch", "{remote}/{repo}.git", "{workspace}", "--line", "{branch}"], cwd = "root" },
  { name = "edit", argv = ["/bin/sh", "-c", "printf '%s\\n' \"$1\" >> task-notes.md", "edit", "{payload}"], kind = "edit" },
  { name = "checkpoint", argv = ["{bin}", "save", "{message}"] },
  { name = "publish", argv = ["{bin}", "send", "{branch}"] },
]

[materialization]
import = [
  { name = "fetch", argv = ["{bin}", "fetch", "{source}", "{workspace}"], cwd = "root" },
  { name = "line", argv = ["{bin}", "line", "{branch}"] },
  { name = "write", argv = ["/bin/sh", "-c", "printf 'selected branch\\n' > selected.txt"], kind = "edit" },
  { name = "save", argv = ["{bin}", "save", "{message}"] },
  { name = "plant", argv = ["{bin}", "plant", "{server_dir}/{repo}.git"], cwd = "root" },
  { name = "send", argv = ["{bin}", "send", "--to", "{remote}/{repo}.git", "{branch}"] },
]
acquire = [{ argv = ["{bin}", "fetch", "{remote}/{repo}.git", "{workspace}", "--line", "{branch}"], cwd = "root" }]
status = [{ argv = ["{bin}", "look"] }]
commit = [{ argv = ["{bin}", "save", "{message}", "--if-changed"] }]
"""


def install(folder: Path) -> tuple[Path, Path]:
    """Write the twig executable and its flow file into `folder`: (binary, flow)."""
    binary = folder / "twig"
    binary.write_text(SCRIPT.replace("#!/usr/bin/env python3", f"#!{sys.executable}", 1))
    binary.chmod(0o755)
    flow = folder / "twig.toml"
    flow.write_text(FLOW)
    return binary, flow
