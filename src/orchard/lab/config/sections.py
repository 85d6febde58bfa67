"""The sections of orchard.toml, one dataclass each: their fields (type, default, help text, allowed values) are the
schema, the validator and the commented default file at once. `orchard_toml.py` reads the file into them."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from orchard.lab.records.network import Network
from orchard.limits import Limits

CONFIG_NAME = "orchard.toml"


VCS_KINDS = ("git", "oak")


# What common builds write into a checkout: never part of a worker's change.
DEFAULT_IGNORES = (".venv/", "venv/", "*.egg-info/", "__pycache__/", "*.pyc", "build/", "dist/", "target/",
                   "node_modules/")


LAUNCHERS = ("claude", "codex", "cursor", "aider", "patch", "command")


SERVE_MODES = ("git-daemon", "path")


SANDBOXES = ("bwrap", "none")


# Launchers that need no model service: their workers get no network unless `network` says otherwise.
OFFLINE_LAUNCHERS = ("patch", "command")


# Launchers whose model endpoint orchard knows without a `base_url` (agent_launchers.py): `api` by default.
KNOWN_ENDPOINTS = ("claude", "codex")


class ExecutorKind(StrEnum):
    """Where workers run (`[workers] executor`, each executor's `kind`)."""

    AUTO = "auto"  # configured only: tmux when installed, else subprocess
    TMUX = "tmux"
    SUBPROCESS = "subprocess"
    DASK = "dask"


# Upper bounds: a value past them is a typo (or an attack on memory), never a plan.
MAX_WORKERS = 256  # a fleet on a dask cluster: benchmarks/fleet.py runs 128


MAX_COUNT = 100_000


MAX_MINUTES = 60 * 24 * 366  # a year


MAX_PATCH_KB = 16 * 1024  # lab.db stores the patch: it stays a database, not a disk image


MAX_PATCH_FILES = 100_000  # its file list is stored too


MAX_CHECKOUT_MB = 1024 * 1024  # a terabyte


def _key(default: Any, help: str, *, choices: tuple[str, ...] = (), minimum: float | None = None,
         maximum: float | None = None, command: bool = False, required: bool = False,
         variables: bool = False) -> Any:
    """A key's schema; a number must be finite and lie in [minimum, maximum] (None: no bound that side)."""
    meta = {"help": help, "choices": choices, "minimum": minimum, "maximum": maximum, "command": command,
            "required": required, "variables": variables}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TargetConfig:
    """The repository being optimized."""

    repo: str = _key("", "the target repository: a local path or a URL its VCS can clone", required=True)
    vcs: str = _key("git", "version control of the target", choices=VCS_KINDS)
    base: str = _key("", "branch or commit the lab starts from; empty: the repository's default branch")
    build: str = _key("", "build command, run in the worker's target checkout; empty: nothing to build",
                      command=True)
    test: str = _key("", "the target's own tests; they must pass before anything lands", command=True)
    binary: str = _key("", "the built binary, relative to the target checkout")
    ignore: list[str] = _key(list(DEFAULT_IGNORES), "gitignore-style globs of build outputs that are never "
                                                    "part of a change, besides the target's own .gitignore "
                                                    "(this list replaces the defaults; [] ignores nothing more)")
    max_patch_kb: int = _key(1024, "a change whose patch is larger than this is refused (build outputs "
                                   "belong in the ignore list)", minimum=1, maximum=MAX_PATCH_KB)
    max_patch_files: int = _key(1000, "a change that adds, edits or deletes more files than this is refused "
                                      "(a worker's thousands of generated files never reach lab.db or a build)",
                                minimum=1, maximum=MAX_PATCH_FILES)
    test_count: str = _key("", "prints how many tests the target has (the first number on its last line counts, "
                               "e.g. `python -m pytest --collect-only -q | tail -1`); run in the base's and the "
                               "candidate's checkouts, fewer in the candidate is a KILL; empty: not counted",
                           command=True)
    build_network: bool = _key(False, "the judge's build and test steps reach the network (a build that fetches "
                                      "its dependencies; the journal says so); default: loopback only")


@dataclass(frozen=True)
class BenchConfig:
    """The harness that measures the target's binary."""

    repo: str = _key("", "harness repository (path or URL); empty: the lab keeps the suite file below "
                         "in its own small bench repository")
    vcs: str = _key("git", "version control of the harness", choices=VCS_KINDS)
    base: str = _key("", "branch or commit of the harness; empty: its default branch")
    suite: str = _key("", "suite file, relative to the bench checkout (without a bench repo: a file "
                          "that `orchard init` copies into bench/)")
    test: str = _key("", "the harness's own test suite, run in the bench checkout; it must pass",
                     command=True)
    measure: str = _key("", "how a worker measures its binary, run in its bench checkout; "
                            "empty: the worker does not measure", command=True)
    verdict: str = _key("", "the bench's own verdict script, run in the lab's bench clone under the measurement "
                            "lock instead of orchard's verdict (e.g. `python3 scripts/devloop.py --skip-build "
                            "--oak-local-bin {binary}`); its PASS / REGRESSED / other result is recorded and "
                            "mapped to a decision; empty: orchard's own verdict on the suite", command=True)
    sweep: str = _key("", "the full sweep run every few landed wins to catch cross-metric regressions, "
                          "in the lab's bench clone (e.g. `orchard bench contention --workers 2,8,32 ...`); "
                          "empty: the sweep is the suite's verdict of main against the lab's first baseline",
                      command=True)
    sweep_every: int = _key(3, "landed wins between full sweeps", minimum=1, maximum=1000)
    corpus: list[str] = _key([], "more inputs for the differential check before a win lands: globs relative to "
                                 "the target (`bench:` before one: relative to the bench); the baseline and the "
                                 "candidate must print the same on each (docs/security.md)")
    corpus_inputs: int = _key(60, "most inputs the differential check runs (0: no differential check)",
                              minimum=0, maximum=10_000)
    corpus_kb: int = _key(16 * 1024, "most kilobytes of inputs the differential check runs", minimum=1,
                          maximum=1024 * 1024)
    corpus_seconds: float = _key(180.0, "the differential check stops after this many seconds (what it ran "
                                        "counts, the journal says where it stopped)", minimum=1.0, maximum=86_400.0)
    guidance: str = _key("prompts/benchmark-changeset.md",
                         "the harness's own guidance for workers, relative to the bench checkout; "
                         "copied into every prompt when the file exists")


@dataclass(frozen=True)
class WorkersConfig:
    """How many workers run, in which lanes, and for how long."""

    count: int = _key(3, "workers running at once", minimum=1, maximum=MAX_WORKERS)
    exploit: int = _key(2, "lanes taking the top of the backlog; left out: `count` minus `explore`",
                        minimum=0, maximum=MAX_WORKERS)
    explore: int = _key(1, "lanes trying speculative hypotheses; left out with `exploit`: a third of `count`, rounded "
                           "down (`count` alone is enough)", minimum=0, maximum=MAX_WORKERS)
    executor: ExecutorKind = _key(ExecutorKind.AUTO, "where workers run: tmux windows, plain subprocesses, tmux "
                                  "when installed, or tasks on a dask.distributed cluster")
    scheduler: str = _key("local", "dask executor only: `local` (a LocalCluster orchard starts and stops) or "
                                   "an existing scheduler's address, tcp://HOST:8786")
    dask_workers: int = _key(2, "dask executor with a local cluster: worker processes it starts",
                             minimum=1, maximum=MAX_WORKERS)
    cpus_per_experiment: int = _key(1, "dask executor: the `cpu` resource one experiment claims on a dask "
                                       "worker (with `agent=1`)", minimum=1, maximum=1024)
    serve: str = _key("git-daemon", "dask executor: how workers reach the lab's repositories: a read-only "
                                    "`git daemon` on the lab host, or `path` on a shared filesystem",
                      choices=SERVE_MODES)
    serve_host: str = _key("127.0.0.1", "dask executor: the address the git daemon listens on (loopback "
                                        "unless the cluster's workers are on other machines)")
    refill: bool = _key(False, "during `orchard run`, ask the planner (the [launcher] below, as `orchard plan` "
                               "does) for hypotheses whenever open ones fall below the free workers")
    revisit: bool = _key(True, "after a win, offer a KILLed hypothesis again, once, when the win changed files it "
                               "was about or moved main beyond its effect (docs/loop.md, \"Revisiting a kill\"); "
                               "false: kills stay killed")
    judges: int = _key(2, "candidates judged at once while workers run: their builds and tests overlap, "
                          "their measurements take turns under the machine-wide lock", minimum=1, maximum=MAX_WORKERS)
    judge_hosts: int = _key(0, "dask executor: judge hosts (dask workers declaring the `judge` resource) the lab "
                               "waits for at its start; each verdict then runs whole on one of them, and a win's "
                               "confirmation and main check on the one that judged it (candidates judged at once: "
                               "`judges` per judge host, the next waiting while one measures); 0: every verdict "
                               "on the lab's machine",
                        minimum=0, maximum=MAX_WORKERS)
    shared_baseline: int = _key(4, "built candidates waiting on the same base are measured together, this many "
                                   "at most: each round runs the baseline once and each of them once, with one "
                                   "verdict each, at its own alpha as alone: fewer runs (docs/verdict.md); "
                                   "1: each its own campaign (as always on judge hosts)",
                                minimum=1, maximum=MAX_WORKERS)
    timeout_minutes: float = _key(60.0, "a worker still running after this is killed with its whole "
                                        "process tree", minimum=0.01, maximum=MAX_MINUTES)
    retry_minutes: float = _key(1.0, "an agent that was rate limited or overloaded gets no new work for this "
                                     "long, doubled for each such failure in a row ([stop] launcher_failures "
                                     "of them pause the lab)", minimum=0, maximum=MAX_MINUTES)
    sandbox: str = _key("bwrap", "how workers are confined: `bwrap` (bubblewrap: a worker sees only its own "
                                 "checkouts and a private home, in its own PID namespace; `orchard run` refuses "
                                 "to start without a working bwrap) or `none` (workers run as you, unconfined: "
                                 "reported as UNSANDBOXED in status and in every journal entry)",
                        choices=SANDBOXES)
    max_checkout_mb: int = _key(4096, "a worker whose directory (its checkouts, HOME and TMPDIR, git objects "
                                      "included) holds more than this is stopped and its experiment KILLed",
                                minimum=1, maximum=MAX_CHECKOUT_MB)
    sandbox_read: list[str] = _key([], "more paths workers may read inside the bwrap sandbox (besides PATH, "
                                       "their CLI's installation and orchard's Python), e.g. a toolchain under "
                                       "your home that is not on PATH")
    memory_mb: int = _key(16384, "memory (address space) each process of a worker, a judge step or a measured run "
                                 "may map, as an rlimit; 0: no limit", minimum=0, maximum=1 << 24)
    processes: int = _key(4096, "processes each sandbox may run at once (as root, a pids cgroup of its own where "
                                "one can be made; else an rlimit of the sandbox uid, shared by every sandbox); "
                                "0: no limit", minimum=0, maximum=1 << 22)
    cpu_seconds: int = _key(14400, "CPU seconds each process of a worker, a judge step or a measured run may use "
                                   "(then it is killed); 0: no limit", minimum=0, maximum=1 << 30)
    file_mb: int = _key(4096, "the largest file a process of a worker, a judge step or a measured run may write "
                              "(past it the write fails and the process gets SIGXFSZ), as an rlimit; 0: no limit",
                        minimum=0, maximum=MAX_CHECKOUT_MB)

    def limits(self) -> Limits:
        """The rlimits of every worker, judge step and measured run."""
        return Limits(self.memory_mb or None, self.processes or None, self.cpu_seconds or None, self.file_mb or None)


@dataclass(frozen=True)
class LauncherConfig:
    """Which agent CLI a worker runs, and with what options."""

    name: str = _key("claude", "agent CLI, or `patch` (applies a hypothesis's ready patch, no model) "
                               "or `command` (the template below)", choices=LAUNCHERS)
    executable: str = _key("", "the CLI to run; empty: the launcher's usual name (claude, codex, agent, "
                               "aider)")
    model: str = _key("", "model passed to the CLI; empty: the CLI's own default")
    args: list[str] = _key([], "extra arguments appended to the launch line")
    allowed_tools: list[str] = _key([], "claude only: tools the worker may use; empty: read, edit and "
                                        "the shell commands named in the build, test and measure commands")
    template: str = _key("", "command launcher only: the shell command to run; placeholders "
                             "{prompt_file} {target_dir} {bench_dir} {binary} {report}", command=True)
    base_url: str = _key("", "the model endpoint's base URL, given to the CLI (claude: ANTHROPIC_BASE_URL; codex: "
                             "a model provider of its own; aider: --openai-api-base); empty: the CLI's own service")
    network: str = _key("", "what the worker may reach: `none` (its own loopback only), `api` (its "
                                           "model endpoint only, through orchard's allowlisting proxy) or `all` "
                                           "(the host's network); default `none` for patch and command, `api` for "
                                           "claude, codex and any launcher with a base_url, else `all`; the older "
                                           "true/false mean all/none", choices=tuple(Network))

    def __post_init__(self) -> None:
        if not self.network:  # not given: the launcher's own default
            object.__setattr__(self, "network", default_network(self.name, self.base_url).value)
    pass_env: list[str] = _key([], "environment variables the worker gets besides the allowlist and its "
                                   "launcher's own credentials (a trailing `*` matches a prefix)", variables=True)


@dataclass(frozen=True)
class StopConfig:
    """When the research loop stops and writes its final report."""

    top_attempted: int = _key(5, "stop once the top N backlog items have all been attempted",
                              minimum=1, maximum=MAX_COUNT)
    idle_loops: int = _key(2, "stop after this many consecutive loops that land nothing", minimum=1, maximum=MAX_COUNT)
    max_experiments: int = _key(0, "stop after this many experiments; 0: no limit", minimum=0, maximum=MAX_COUNT)
    lock_wait_minutes: float = _key(30.0, "stop when measurements wait this long for the machine-wide "
                                          "lock: verdicts would not be reliable", minimum=0.1, maximum=MAX_MINUTES)
    max_wall_minutes: float = _key(0.0, "pause once the lab has run this long, across its runs (time stopped, or "
                                        "paused with nothing at work, is not counted): no new workers, the running "
                                        "ones finish; 0: no limit", minimum=0, maximum=MAX_MINUTES)
    max_cost_usd: float = _key(0.0, "pause once the agents' cost (reported, or estimated from tokens) reaches this: no "
                                    "new workers, the running ones finish; 0: no limit", minimum=0, maximum=1e9)
    hard_cap_factor: float = _key(1.5, "a budget used past this many times its limit (max_cost_usd, "
                                       "max_wall_minutes) stops the running workers too: their hypotheses go back "
                                       "to the backlog, no attempt counted", minimum=1, maximum=100)
    launcher_failures: int = _key(2, "stop after this many workers in a row whose agent could not work at all "
                                     "(no CLI, not logged in, no network); their hypotheses go back to the backlog",
                                  minimum=1, maximum=MAX_COUNT)


@dataclass(frozen=True)
class ReviewConfig:
    """An optional reviewer that reads every win's diff, hypothesis and verdict before it lands."""

    launcher: str = _key("", "a [launchers.NAME] that reviews; empty: no review unless `template` is set")
    template: str = _key("", "inline instead: a shell command that reviews (placeholders {prompt_file} the "
                             "review prompt, {report} the answer file, {target_dir} the candidate checkout)",
                         command=True)
    timeout_minutes: float = _key(15.0, "a reviewer still running after this is killed: the win is rejected",
                                  minimum=0.01, maximum=MAX_MINUTES)


@dataclass(frozen=True)
class LabConfig:
    """The lab's own identity in the commits it writes, and the environment of its own steps."""

    author_name: str = _key("orchard lab", "author of the lab's commits (set per command; your git "
                                           "configuration is never touched)")
    author_email: str = _key("lab@orchard.invalid", "email of the lab's commits")
    pass_env: list[str] = _key([], "environment variables the judge's build, test and harness-test steps and "
                                   "the bench's verdict command get besides the allowlist (a trailing `*` matches "
                                   "a prefix); no other variable of yours reaches candidate code", variables=True)


def default_network(name: str, base_url: str = "") -> Network:
    """The network a launcher gets unless orchard.toml says: none offline, api where the endpoint is known."""
    if name in OFFLINE_LAUNCHERS:
        return Network.NONE
    return Network.API if base_url or name in KNOWN_ENDPOINTS else Network.ALL
