"""What the lab spent: agent cost and tokens, worker, build and measurement time, lock waits, per kept win.

The money is what each agent CLI reported, or for a CLI that prints tokens
and no cost (Codex) what orchard worked out from them and a price table
(config/prices.py), said "estimated" wherever it is shown; a launcher whose
CLI printed neither shows "not reported"; `patch` and `command` workers run
no model, so their agent cost is zero and said to be so. The
times are the lab's own records: each worker's run, the judge's build and
tests and its verdict, and the measurement lock's waits of every verdict
an experiment took (judgment, re-judging, confirmation). FINAL_REPORT, the
dashboard's state and `orchard status` (with the budgets left) read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchard.lab.records.agent_usage import AgentUsage
from orchard.units import duration_ms, usd

TOTAL = "all launchers"
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass(frozen=True)
class Spent:
    """What one experiment spent."""

    launcher: str  # as orchard.toml names it
    agent: bool  # False: a `patch` or `command` launcher, no model involved
    usage: AgentUsage | None  # as its CLI reported it; None: collected nothing
    worker_s: float
    build_s: float
    measure_s: float
    lock_wait_s: float
    won: bool  # landed


@dataclass(frozen=True)
class Spending:
    """One launcher's total, or the lab's (`launcher` is TOTAL)."""

    launcher: str
    experiments: int
    wins: int
    agents: int  # experiments whose launcher runs a model
    cost_usd: float | None  # None: no agent reported a cost (zero when no agent ran at all)
    estimated: bool  # some of that cost was worked out from tokens, not reported by the CLI
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    worker_s: float
    build_s: float
    measure_s: float
    lock_wait_s: float

    @property
    def busy_s(self) -> float:
        """Worker, build and measurement time added up (lock waits are inside the measurement)."""
        return self.worker_s + self.build_s + self.measure_s

    def cost_per_win(self) -> float | None:
        return None if self.cost_usd is None or not self.wins else self.cost_usd / self.wins

    def time_per_win_s(self) -> float | None:
        return self.busy_s / self.wins if self.wins else None


def _sum(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _total(launcher: str, spent: Sequence[Spent]) -> Spending:
    usages = [s.usage for s in spent if s.agent and s.usage is not None]
    agents = sum(1 for s in spent if s.agent)
    cost = _sum([u.cost_usd for u in usages])
    tokens = {key: _sum([getattr(u, key) for u in usages]) for key in TOKENS}
    return Spending(
        launcher=launcher, experiments=len(spent), wins=sum(1 for s in spent if s.won), agents=agents,
        cost_usd=0.0 if not agents else cost, estimated=any(u.estimated and u.cost_usd for u in usages),
        **{key: None if value is None else int(value) for key, value in tokens.items()},
        worker_s=sum(s.worker_s for s in spent), build_s=sum(s.build_s for s in spent),
        measure_s=sum(s.measure_s for s in spent), lock_wait_s=sum(s.lock_wait_s for s in spent))


def spending(spent: Sequence[Spent]) -> tuple[Spending, ...]:
    """Each launcher's total, in the order they first ran, then the lab's (TOTAL) when there are several."""
    launchers = list(dict.fromkeys(s.launcher for s in spent))
    rows = [_total(name, [s for s in spent if s.launcher == name]) for name in launchers]
    return (*rows, _total(TOTAL, spent)) if len(rows) != 1 else (*rows,)


def cost_text(cost_usd: float | None, estimated: bool) -> str:
    """A cost, or a sum of costs, as every page shows it: "$0" for nothing, "$0.0123 (estimated)" when any part of
    it was worked out from tokens, "not reported" when no CLI printed one."""
    if cost_usd is None:
        return "not reported"
    return usd(cost_usd) + (" (estimated)" if estimated and cost_usd else "")


def money(cost: float | None, agents: int, estimated: bool = False) -> str:
    if not agents:
        return "$0 (no agent: no model involved)"
    return cost_text(cost, estimated)


def _seconds(s: float | None) -> str:
    """Seconds below a minute and a half, then minutes, then hours."""
    if s is None:
        return "-"
    if s == 0:
        return "0 s"
    return duration_ms(s * 1000) if s < 90 else f"{s / 60:.1f} min" if s < 5400 else f"{s / 3600:.1f} h"


def _tokens(row: Spending) -> str:
    counts = [f"{value:,} {key.removesuffix('_tokens').replace('_', '-')}"
              for key in TOKENS if (value := getattr(row, key)) is not None]
    return ", ".join(counts) or ("-" if not row.agents else "not reported")


def spending_lines(rows: Sequence[Spending], wall_s: float | None) -> list[str]:
    """FINAL_REPORT's section: a table per launcher and in total, then the cost and time of each kept win."""
    if not rows:
        return []
    lines = ["## What it cost", "",
             "Agent cost and tokens as each agent CLI reported them (a cost marked estimated was worked out from "
             "the tokens and a price table: the CLI printed none); the times are the lab's own records: the "
             "workers' runs, the judge's builds and tests, its verdicts (lock waits included, and also shown "
             "alone). Landing's confirmation verdicts count in the lock waits only.", "",
             "| launcher | experiments | wins | agent cost | tokens | worker time | build time | measurement time "
             "| lock waits | cost per win | time per win |", "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        per_win = row.cost_per_win()
        lines.append("| " + " | ".join([
            f"`{row.launcher}`" if row.launcher != TOTAL else TOTAL, str(row.experiments), str(row.wins),
            money(row.cost_usd, row.agents, row.estimated), _tokens(row), _seconds(row.worker_s),
            _seconds(row.build_s), _seconds(row.measure_s), _seconds(row.lock_wait_s),
            "-" if not row.wins else money(per_win, row.agents, row.estimated),
            _seconds(row.time_per_win_s())]) + " |")
    total = rows[-1]
    if wall_s is not None:
        per = f"{_seconds(wall_s / total.wins)} of wall time per kept win" if total.wins else "no win was kept"
        lines += ["", f"The lab ran {_seconds(wall_s)}, across its runs (the time it was paused or stopped "
                  f"not counted): {per}."]
    return lines


@dataclass(frozen=True)
class Budget:
    """One `[stop]` budget: its limit, how much of it is used, how much is left."""

    name: str  # the orchard.toml key
    limit: float
    used: float
    unit: str  # "USD" or "minutes"
    estimated: bool = False  # some of the cost used was worked out from tokens

    @property
    def left(self) -> float:
        return max(0.0, self.limit - self.used)

    def describe(self) -> str:
        if self.unit == "USD":
            return (f"{self.name}: ${self.left:.2f} of ${self.limit:g} left "
                    f"({cost_text(self.used, self.estimated)} spent)")
        return f"{self.name}: {self.left:.1f} of {self.limit:g} minutes left ({self.used:.1f} used)"


def budgets(max_cost_usd: float, max_wall_minutes: float, total: Spending | None,
            ran_s: float | None) -> tuple[Budget, ...]:
    """The budgets orchard.toml sets (0: no limit, not shown), as the stop conditions count them."""
    found = []
    if max_cost_usd:
        cost = (total.cost_usd if total else None) or 0.0
        found.append(Budget("max_cost_usd", max_cost_usd, cost, "USD", bool(total and total.estimated)))
    if max_wall_minutes:
        found.append(Budget("max_wall_minutes", max_wall_minutes, (ran_s or 0.0) / 60, "minutes"))
    return tuple(found)
