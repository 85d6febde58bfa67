"""orchard.toml: the lab's configuration, loaded whole and validated whole.

A user edits this file by hand, so a mistake must come back as one message
that names every bad key or value, not as the first KeyError deep inside a
run. Unknown sections and keys are errors too: a misspelt `timout_minutes`
silently ignored would be worse than no setting at all.

Each section is a dataclass of `sections.py`; its fields (type, default, help
text, allowed values) are the schema, the validator and the commented default
file at once. This module holds the whole file's record and reads it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchard.errors import UsageError
from orchard.lab.config.prices import PRICES_SECTION, ModelPrice
from orchard.lab.config.sections import (
    CONFIG_NAME,
    KNOWN_ENDPOINTS,
    BenchConfig,
    ExecutorKind,
    LabConfig,
    LauncherConfig,
    ReviewConfig,
    StopConfig,
    TargetConfig,
    WorkersConfig,
    default_network,
)
from orchard.lab.config.values import check_section
from orchard.lab.records.network import LEGACY, Network, endpoint
from orchard.tomlfile import read_toml


@dataclass(frozen=True)
class Config:
    """The whole file. `path` is where it was read from (None when built in code)."""

    target: TargetConfig = field(default_factory=TargetConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    stop: StopConfig = field(default_factory=StopConfig)
    lab: LabConfig = field(default_factory=LabConfig)
    review: ReviewConfig = field(default_factory=ReviewConfig)
    launchers: dict[str, LauncherConfig] = field(default_factory=dict)  # [launchers.NAME]: a hypothesis names one
    prices: dict[str, ModelPrice] = field(default_factory=dict)  # [prices."MODEL"]: over config/prices.py's table
    path: Path | None = None

    def replace(self, section: str, **values: Any) -> Config:
        """A copy with some keys of one section changed (validated like the file)."""
        data = to_dict(self)
        data[section].update(values)
        return from_dict(data, source=str(self.path or CONFIG_NAME), path=self.path)

    def on_whole_network(self) -> list[str]:
        """Where a launcher has the host's whole network (`launcher`, `launchers.NAME`)."""
        return on_whole_network(self.launcher, self.launchers)


LAUNCHERS_SECTION = "launchers"  # [launchers.NAME] tables, each keyed like [launcher]


SECTIONS: dict[str, type] = {
    "target": TargetConfig,
    "bench": BenchConfig,
    "workers": WorkersConfig,
    "launcher": LauncherConfig,
    "stop": StopConfig,
    "lab": LabConfig,
    "review": ReviewConfig,
}


class ConfigError(UsageError):
    """orchard.toml is malformed; the message lists every problem."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.problems = problems
        if len(problems) == 1:  # one line, like every other bad input
            super().__init__(f"{source}: {problems[0]}")
            return
        lines = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"{source}: {len(problems)} problems:\n{lines}")



def _legacy_network(table: Any) -> Any:
    """A launcher table with the older boolean `network` read as the mode it meant (true: all, false: none)."""
    if isinstance(table, dict) and isinstance(table.get("network"), bool):
        return {**table, "network": LEGACY[table["network"]].value}
    return table


def _launcher_defaults(values: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    """A launcher table's defaults that depend on its name, and the checks across its keys."""
    name, base_url = values.get("name", LauncherConfig.name), values.get("base_url", "")
    network = values.get("network") or default_network(name, base_url)
    if base_url:
        try:
            endpoint(base_url)
        except ValueError as error:
            problems.append(f"{where}.base_url: {error}")
    if network == Network.API and not base_url and name not in KNOWN_ENDPOINTS:
        problems.append(f"{where}.network: \"api\" needs a base_url: orchard does not know the model endpoint of "
                        f"the {name} launcher (or set network = \"all\" or \"none\")")
    if name == "command" and not values.get("template"):
        problems.append(f"{where}.template: the command launcher needs a template")
    return values


def _named_tables(section: str, tables: Any, problems: list[str]) -> dict[str, dict[str, Any]]:
    """A section of named tables ([launchers.NAME], [prices."MODEL"]) by name; each problem of shape is added to
    `problems`."""
    if not isinstance(tables, dict):
        problems.append(f"{section}: expected [{section}.NAME] tables, got {tables!r}")
        return {}
    found = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            problems.append(f"{section}.{name}: expected a [{section}.{name}] table, got {table!r}")
            continue
        found[name] = table
    return found


def _launchers(tables: Any, problems: list[str]) -> dict[str, LauncherConfig]:
    """The [launchers.NAME] tables, checked; each problem is added to `problems`."""
    launchers: dict[str, LauncherConfig] = {}
    for launcher_name, table in _named_tables(LAUNCHERS_SECTION, tables, problems).items():
        where = f"{LAUNCHERS_SECTION}.{launcher_name}"
        values = _launcher_defaults(check_section(where, LauncherConfig, _legacy_network(table), problems), where,
                                    problems)
        launchers[launcher_name] = LauncherConfig(**values)
    return launchers


def _prices(tables: Any, problems: list[str]) -> dict[str, ModelPrice]:
    """The [prices."MODEL"] tables, each checked whole (every key required, none unknown)."""
    return {model: ModelPrice(**check_section(f"{PRICES_SECTION}.{model}", ModelPrice, table, problems))
            for model, table in _named_tables(PRICES_SECTION, tables, problems).items()}


def _paths_and_identity(sections: dict[str, Any]) -> list[str]:
    """The binary the judge measures comes from the checkout it built, and the lab's commit identity is one line
    of printable text (a line break would forge a header of every commit the lab writes)."""
    problems = []
    binary = sections["target"].get("binary", "")
    if binary and (Path(binary).is_absolute() or ".." in Path(binary).parts):
        problems.append(f"target.binary: {binary!r} is outside the target checkout (a path relative to it, "
                        "without `..`)")
    for key in ("author_name", "author_email"):
        value = sections["lab"].get(key, "")
        if not value.isprintable():
            problems.append(f"lab.{key}: {value!r} holds a line break or control character")
    return problems


def _lanes(workers: dict[str, Any]) -> list[str]:
    """`[workers]`'s count and lanes, those it leaves out derived from those it gives (`count` alone: a third of
    the lanes explore, rounded down, the rest exploit; `count` and one lane: the other lane the rest; lanes
    without `count`: their sum, a lane left out at its default); a mismatch is a problem that says what to
    write."""
    default = WorkersConfig()
    if "exploit" not in workers and "explore" not in workers:
        count = workers.get("count", default.count)
        workers.update(count=count, exploit=count - count // 3, explore=count // 3)
    elif "count" not in workers:
        workers.setdefault("exploit", default.exploit)
        workers.setdefault("explore", default.explore)
        workers["count"] = workers["exploit"] + workers["explore"]
    elif "explore" not in workers:
        workers["explore"] = workers["count"] - workers["exploit"]
    elif "exploit" not in workers:
        workers["exploit"] = workers["count"] - workers["explore"]
    exploit, explore, count = workers["exploit"], workers["explore"], workers["count"]
    if min(exploit, explore) >= 0 and exploit + explore == count and count >= 1:
        return []
    count = max(count, 1)
    return [f"workers: exploit + explore lanes ({exploit} + {explore}) must equal count ({workers['count']}): "
            f"set them so, or leave exploit and explore out to derive them from count (count = {count}: "
            f"exploit = {count - count // 3}, explore = {count // 3})"]


def from_dict(data: dict[str, Any], *, source: str = CONFIG_NAME, path: Path | None = None) -> Config:
    """Validate parsed TOML and build a Config; every problem is reported at once."""
    problems: list[str] = []
    sections: dict[str, Any] = {}
    for section_name in data:
        if section_name not in (*SECTIONS, LAUNCHERS_SECTION, PRICES_SECTION):
            problems.append(f"[{section_name}]: unknown section; known: "
                            f"{', '.join([*SECTIONS, LAUNCHERS_SECTION, PRICES_SECTION])}")
    for section_name, cls in SECTIONS.items():
        raw = data.get(section_name, {})
        raw = _legacy_network(raw) if cls is LauncherConfig else raw
        sections[section_name] = check_section(section_name, cls, raw, problems)
    sections["launcher"] = _launcher_defaults(sections["launcher"], "launcher", problems)
    launchers = _launchers(data.get(LAUNCHERS_SECTION, {}), problems)
    prices = _prices(data.get(PRICES_SECTION, {}), problems)
    if not any(p.startswith(("workers.count:", "workers.exploit:", "workers.explore:")) for p in problems):
        problems += _lanes(sections["workers"])
    workers = WorkersConfig(**sections["workers"])
    problems += _paths_and_identity(sections)
    review = sections["review"]
    problems += _judge_hosts(workers, bool(review.get("launcher") or review.get("template")))
    problems += _open_scheduler(workers, on_whole_network(LauncherConfig(**sections["launcher"]), launchers))
    if review.get("launcher") and review.get("template"):
        problems.append("review: set `launcher` or `template`, not both")
    if review.get("launcher") and review["launcher"] not in launchers:
        problems.append(f"review.launcher: {review['launcher']!r} is not a [launchers.NAME] table "
                        f"(defined: {', '.join(launchers) or 'none'})")
    if problems:
        raise ConfigError(source, problems)
    built = {name: SECTIONS[name](**values) for name, values in sections.items()}
    return Config(**built, launchers=launchers, prices=prices, path=path)


def _judge_hosts(workers: WorkersConfig, reviewed: bool) -> list[str]:
    """What judge hosts cannot go with (yet): they are dask workers, and the reviewer runs on the lab's machine.
    (A judge host measures one candidate at a time, so `shared_baseline` does not apply there.)"""
    if not workers.judge_hosts:
        return []
    found = [] if workers.executor == ExecutorKind.DASK else ["workers.judge_hosts: needs executor = \"dask\""]
    if reviewed:
        found.append("workers.judge_hosts: not with a [review] reviewer (it runs on the lab's machine only)")
    return found


def on_whole_network(launcher: LauncherConfig, launchers: dict[str, LauncherConfig]) -> list[str]:
    """Where orchard.toml gives a launcher the host's whole network (`launcher`, `launchers.NAME`)."""
    named = {"launcher": launcher, **{f"{LAUNCHERS_SECTION}.{name}": table for name, table in launchers.items()}}
    return [where for where, table in named.items() if table.network == Network.ALL]


def _open_scheduler(workers: WorkersConfig, open_to: list[str]) -> list[str]:
    """A worker with the host's whole network can reach a `tcp://` dask scheduler, which takes any client: it could
    submit its own tasks and run them, unsandboxed, on every dask worker and judge host (a forged verdict, a
    tampered judge copy). Refused: the lab's own local cluster speaks TLS with a certificate of its own
    (`workers/dask/cluster.py`); a cluster of the user's must be `tls://` with certificates for that."""
    if workers.executor != ExecutorKind.DASK or not workers.scheduler.startswith("tcp://") or not open_to:
        return []
    return [f"workers.scheduler: {workers.scheduler} takes connections from anyone, and {', '.join(open_to)} has "
            "network = \"all\": its workers could reach the scheduler and run code on every dask worker and judge "
            "host, outside their sandboxes; use a tls:// scheduler with certificates (docs/cluster.md), or "
            "network = \"api\" or \"none\""]


def to_dict(config: Config) -> dict[str, dict[str, Any]]:
    """The configuration as the tables of its TOML."""
    data = {name: dataclasses.asdict(getattr(config, name)) for name in SECTIONS}
    if config.launchers:
        data[LAUNCHERS_SECTION] = {name: dataclasses.asdict(launcher) for name, launcher in config.launchers.items()}
    if config.prices:
        data[PRICES_SECTION] = {model: dataclasses.asdict(price) for model, price in config.prices.items()}
    return data


def parse(path: Path) -> dict[str, Any]:
    """The TOML of a configuration file, not yet validated (the bench's one reader: file and line named)."""
    return read_toml(path, "configuration")


def load(path: Path) -> Config:
    """Read and validate orchard.toml (UsageError naming every problem)."""
    return from_dict(parse(path), source=str(path), path=Path(path).resolve())


