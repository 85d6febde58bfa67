"""What a model's tokens cost, for an agent CLI that prints its tokens and no cost (Codex).

The default table is the providers' list prices per million tokens as orchard knows them; orchard.toml's
`[prices."MODEL"]` tables replace or add entries (every key required, unknown keys refused), since prices
change and a gateway or a local model has its own. A cost worked out from it is an estimate, and every place
that shows it says so (`AgentUsage.estimated`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from orchard.lab.config.sections import _key
from orchard.lab.records.agent_usage import AgentUsage

PRICES_SECTION = "prices"  # [prices."MODEL"] tables
# A launcher with no `model` runs its CLI's own default model, which orchard cannot see: it is priced as this entry.
UNNAMED = "default"
MAX_PRICE = 1e6  # USD per million tokens: a value past it is a typo
PER = 1e6


@dataclass(frozen=True)
class ModelPrice:
    """One model's price in US dollars per million tokens (input tokens include those read from the cache)."""

    input: float = _key(0.0, "USD per million input tokens not read from the cache", minimum=0, maximum=MAX_PRICE,
                        required=True)
    cached_input: float = _key(0.0, "USD per million input tokens read from the cache", minimum=0,
                               maximum=MAX_PRICE, required=True)
    output: float = _key(0.0, "USD per million output tokens (reasoning included)", minimum=0, maximum=MAX_PRICE,
                         required=True)


# OpenAI's list prices (USD per million tokens: input, cached input, output), late 2025.
DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    UNNAMED: ModelPrice(1.25, 0.125, 10.0),  # as gpt-5-codex, the family Codex defaults to
    "gpt-5": ModelPrice(1.25, 0.125, 10.0),
    "gpt-5-codex": ModelPrice(1.25, 0.125, 10.0),
    "gpt-5-mini": ModelPrice(0.25, 0.025, 2.0),
    "gpt-5-nano": ModelPrice(0.05, 0.005, 0.4),
    "gpt-4.1": ModelPrice(2.0, 0.5, 8.0),
    "gpt-4.1-mini": ModelPrice(0.4, 0.1, 1.6),
    "o3": ModelPrice(2.0, 0.5, 8.0),
    "o4-mini": ModelPrice(1.1, 0.275, 4.4),
}


def price_of(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """orchard.toml's price of `model` (empty: the CLI's default), else the default table's; None: unknown."""
    name = model or UNNAMED
    return prices.get(name, DEFAULT_PRICES.get(name))


def estimate(usage: AgentUsage, price: ModelPrice | None) -> AgentUsage:
    """`usage` with its cost worked out from its tokens, marked estimated; as it was when the CLI printed a cost,
    no price is known, or it reported no tokens."""
    if usage.cost_usd is not None or price is None or usage.input_tokens is None or usage.output_tokens is None:
        return usage
    cached = min(usage.cache_read_tokens or 0, usage.input_tokens)
    cost = ((usage.input_tokens - cached) * price.input + cached * price.cached_input
            + usage.output_tokens * price.output) / PER
    return replace(usage, cost_usd=round(cost, 6), estimated=True)
