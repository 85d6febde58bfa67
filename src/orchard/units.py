"""Numbers as people read them, formatted in one place for the terminal, Markdown and the lab's pages.

A metric's value is printed in the unit that suits its size (`62.4 µs`, not
`0.06 ms`; `2.45 s`; `290.6 KB`), counts carry thousands separators
everywhere (`232,087`, never `232087` in one table and `232,087` in the
next), and instruction and cycle counts read as `245.2 M` instead of
`2.45242e+08`. A deterministic metric keeps every digit (`exact_quantity`):
it has no noise to round away. Bench and lab both print through here.
"""

from __future__ import annotations

import math

# (below this, unit, per unit, decimals): a value takes the first step it is below; `below` leaves room for rounding
# (999.96 µs reads 1.00 ms, not 1000 µs)
Steps = tuple[tuple[float, str, float, int | None], ...]
_DURATIONS: Steps = ((0.9995e-3, "ns", 1e-6, None), (0.9995, "µs", 1e-3, None), (999.5, "ms", 1.0, None),
                     (math.inf, "s", 1e3, None))  # in milliseconds; None: three significant digits
_SIZES: Steps = ((999.5, "B", 1.0, 0), (999.95e3, "KB", 1e3, 1), (999.95e6, "MB", 1e6, 1), (math.inf, "GB", 1e9, 2))
_BIG: Steps = ((999.95e3, "K", 1e3, 1), (999.95e6, "M", 1e6, 1), (999.95e9, "G", 1e9, 1), (math.inf, "T", 1e12, 1))
_BIG_FROM = 10_000  # counts below this are short enough in full
_COUNTED_EVENTS = ("instructions", "cycles")


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _three_digits(value: float) -> str:
    """Three significant digits without an exponent: 2.45, 24.5, 245, 2,450."""
    size = abs(value)
    decimals = 0 if size >= 99.95 else 1 if size >= 9.995 else 2
    return f"{value:,.{decimals}f}"


def _scaled(value: float | None, steps: Steps) -> str:
    if value is None or not _finite(value):
        return "-"
    below, unit, per, decimals = next(step for step in steps if abs(value) < step[0])
    number = _three_digits(value / per) if decimals is None else f"{value / per:,.{decimals}f}"
    if number.startswith("-") and not number.strip("-0.,"):
        number = number[1:]  # a rounding of almost nothing is no negative amount
    return f"{number} {unit}"


def duration_ms(value: float | None) -> str:
    """A duration given in milliseconds: `812 ns`, `62.4 µs`, `1.23 ms`, `2.45 s`."""
    return _scaled(value, _DURATIONS)


def size_bytes(value: float | None) -> str:
    """A size in bytes, decimal units: `512 B`, `290.6 KB`, `12.3 MB`, `1.50 GB`."""
    return _scaled(value, _SIZES)


def count(value: float | None) -> str:
    """A count or any plain number: `232,087`; a fraction keeps four significant digits (`0.3333`)."""
    if value is None or not _finite(value):
        return "-"
    if float(value).is_integer() or abs(value) >= 1_000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def usd(value: float) -> str:
    """An amount of US dollars: "$0" for nothing spent (however it was reported), else to a hundredth of a cent."""
    return "$0" if value == 0 else f"${value:.4f}"


def big_count(value: float | None) -> str:
    """An instruction or cycle count: `245.2 M`, `1.3 G`; below 10,000 in full."""
    if value is not None and abs(value) < _BIG_FROM:
        return count(value)
    return _scaled(value, _BIG)


def quantity(value: float | None, metric: str) -> str:
    """A metric's value in its unit, picked by the metric's name (`wall_ms`, `peak_rss_bytes`, `instructions`)."""
    name = metric.rsplit("/", 1)[-1]
    if name.endswith("_ms"):
        return duration_ms(value)
    if name.endswith("_bytes"):
        return size_bytes(value)
    if name.endswith(_COUNTED_EVENTS):
        return big_count(value)
    return count(value)


def times(ratio: float | None, metric: str) -> str:
    """A ratio (candidate over baseline) as hyperfine prints it: `1.87x faster`, `1.12x slower` for a duration,
    `13.4x smaller` or `1.20x larger` for anything else; `1.00x` when it rounds to no change."""
    if ratio is None or not _finite(ratio) or ratio <= 0.0:
        return "-"
    factor = max(ratio, 1.0 / ratio)
    shown = f"{factor:.2f}" if factor < 10 else f"{factor:,.1f}"
    if shown == "1.00":
        return "1.00x"
    duration = metric.rsplit("/", 1)[-1].endswith("_ms")
    words = ("faster", "slower") if duration else ("smaller", "larger")
    return f"{shown}x {words[0] if ratio < 1.0 else words[1]}"


def exact_quantity(value: float | None, metric: str) -> str:
    """A deterministic metric's value with every digit and its unit: `11,502 B`, `245,242,011`."""
    if value is None or not _finite(value):
        return "-"
    stored = unit(metric)
    return f"{value:,.12g}" + ("" if stored == "count" else f" {stored}")


def unit(metric: str) -> str:
    """The unit a metric's values are stored in, by its name: `ms`, `B`, else `count`."""
    name = metric.rsplit("/", 1)[-1]
    return "ms" if name.endswith("_ms") else "B" if name.endswith("_bytes") else "count"
