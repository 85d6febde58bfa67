"""A/A calibration: how noisy is this machine for this suite?

The baseline is measured against itself in pairs. Each metric's A/A interval
must contain zero (otherwise something other than the binary moves the
numbers: order effects, warm-up, a neighbour; that is a failed calibration,
not a floor). The offset it shows (how far its interval at the verdict's
level lies from zero, 0 when it contains zero) is the metric's noise floor:
claims must clear it; the noise itself is left to the verdict's own interval.
Metrics that never varied are deterministic and are compared exactly.
Results are cached per machine fingerprint and suite.

A calibration can also live in a file the user names (`--calibration FILE`
or the suite's `calibration` key): committed to the repository or restored
from a CI cache, so an ephemeral runner does not calibrate again. A file is
checked against this machine's facts and the suite before it is used; one
that does not fit is refused, naming what differs.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from orchard.bench.deciding import stats
from orchard.bench.deciding.decide import paired_differences
from orchard.bench.deciding.verdict import MetricNoise, MetricSpec, Scale
from orchard.bench.machine import MachineFacts, machine_facts
from orchard.bench.sandbox.environment import ENV_ISOLATION_VERSION
from orchard.cache import cache_dir
from orchard.errors import OrchardError, UsageError

CHECK_ALPHA = 0.01  # two-sided level of the "A/A interval excludes zero" test
FORMAT_VERSION = 2  # 2: machine facts recorded, no hostname in the fingerprint


class CalibrationFailed(OrchardError):
    """The A/A interval of some metric excludes zero: no floor can be trusted."""


@dataclass
class MetricCalibration:
    floor: float
    deterministic: bool
    sd: float
    estimate: float
    interval: tuple[float, float]
    n: int
    median: float | None = None  # the baseline's median over every A/A run
    spread: float | None = None  # (max - min) / min over every A/A run: how far one binary's values stray

    def noise(self) -> MetricNoise:
        return MetricNoise(self.floor, self.deterministic, self.sd)


@dataclass
class Calibration:
    suite: str
    suite_digest: str
    machine_fingerprint: str
    created_at: float
    runs: int
    seed: int
    baseline: str
    metrics: dict[str, MetricCalibration]
    machine: MachineFacts | None = None
    file: Path | None = None  # the calibration file it was read from or written to, if any
    env_isolation: str = ENV_ISOLATION_VERSION  # how its runs were confined (older files: unconfined)
    baseline_sha256: str | None = None  # what its runs ran (older files: unknown): a verdict on this binary
    # may take its deterministic counts from here (binary_counts.py)

    def noise(self) -> dict[str, MetricNoise]:
        return {key: metric.noise() for key, metric in self.metrics.items()}

    def to_json(self) -> dict[str, Any]:
        """The calibration file's format (also `orchard calibrate --json`)."""
        data = asdict(self)
        data["format"] = FORMAT_VERSION
        data["file"] = None if self.file is None else str(self.file)
        data["machine"] = None if self.machine is None else self.machine.to_dict()
        return data

    def age_s(self) -> float:
        return max(0.0, time.time() - self.created_at)

    def age_text(self) -> str:
        return age_text(self.age_s())


def age_text(seconds: float) -> str:
    """An age for people: seconds, minutes, hours or days."""
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f} days"


def compute(
    specs: Sequence[MetricSpec],
    samples: Mapping[str, tuple[Sequence[float | None], Sequence[float | None]]],
    alpha: float,
) -> tuple[dict[str, MetricCalibration], list[str]]:
    """Noise per metric from A/A samples, and the metrics whose A/A interval excludes zero.

    The exclusion test runs at 99% with Bonferroni over the stochastic metrics,
    so a stable machine fails it about one campaign in a hundred at most (and
    `campaign.calibrate` measures a failed one again before refusing).
    """
    result: dict[str, MetricCalibration] = {}
    stochastic: list[tuple[str, Any]] = []
    for spec in specs:
        a_raw, b_raw = samples[spec.key]
        pairs = [(a, b) for a, b in zip(a_raw, b_raw, strict=True) if a is not None and b is not None]
        if not pairs:
            continue  # unmeasured here; the verdict reports it as such
        a = [p[0] for p in pairs]
        b = [p[1] for p in pairs]
        median = float(np.median(a + b))
        spread = (max(a + b) - min(a + b)) / min(a + b) if min(a + b) > 0 else None
        if len(set(a) | set(b)) == 1:
            result[spec.key] = MetricCalibration(0.0, True, 0.0, 0.0, (0.0, 0.0), len(a), median, spread)
            continue
        scale, d = paired_differences(a, b)
        stochastic.append((spec.key, (scale, d, median, spread)))
    failed: list[str] = []
    m = max(1, len(stochastic))
    for key, (scale, d, median, spread) in stochastic:
        resolution = stats.hl_interval(d, 1.0 - alpha)
        check = stats.hl_interval(d, 1.0 - CHECK_ALPHA / m)
        to_rel = math.expm1 if scale == Scale.LOG_RATIO else (lambda v: v)
        result[key] = MetricCalibration(
            floor=offset_floor(to_rel(resolution.low), to_rel(resolution.high)),
            deterministic=False,
            sd=stats.robust_sd(d),
            estimate=to_rel(stats.hodges_lehmann(d)),
            interval=(to_rel(check.low), to_rel(check.high)),
            n=len(d),
            median=median,
            spread=spread,
        )
        if check.excludes(0.0):
            failed.append(key)
    return result, failed


def offset_floor(low: float, high: float) -> float:
    """The floor a metric's claims must clear: the offset the A/A campaign showed between the baseline and
    itself, no wider: how far its interval (at the verdict's level, 1 - alpha) lies from zero, 0 when it
    contains zero.

    The noise is the verdict's own interval's job: it is exact at the verdict's n, and each pair's order is
    drawn at random, so the differences of one binary against itself are symmetric about zero whatever the
    machine does, and that interval alone holds false claims to alpha. The floor only has to absorb an offset
    beside the noise, one the A/A campaign shows. It used to be the A/A interval's half-width (about
    1.7 SD / sqrt(n), noise counted a second time), which left real shifts unclaimed on a loud machine. Too
    few pairs for an interval leave the floor unbounded.
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        return math.inf
    return max(0.0, low, -high)


def cache_path(fingerprint: str, suite_digest: str, isolation: str = ENV_ISOLATION_VERSION) -> Path:
    """One file per machine, suite and confinement: a calibration taken unconfined never serves confined runs."""
    suffix = "" if isolation == ENV_ISOLATION_VERSION else "-" + "".join(c if c.isalnum() else "_" for c in isolation)
    return cache_dir("calibration") / f"{fingerprint}-{suite_digest}{suffix}.json"


def cache_key(fingerprint: str, suite_digest: str, isolation: str) -> str:
    """What a calibration is made of, as one name: the machine, the suite (with its expect_file facts) and
    how its runs are confined. Two runs with one key can share a calibration; a CI cache keyed by it never
    hands a run a calibration `load_file` refuses."""
    return "-".join((fingerprint, suite_digest, "".join(c if c.isalnum() else "_" for c in isolation)))


def _parse(data: dict[str, Any]) -> Calibration:
    data = dict(data)
    data.pop("format")
    data.pop("file", None)
    metrics = {
        key: MetricCalibration(**{**value, "interval": tuple(value["interval"])})
        for key, value in data.pop("metrics").items()
    }
    machine = data.pop("machine", None)
    return Calibration(**data, metrics=metrics, machine=None if machine is None else MachineFacts.from_dict(machine))


def load(fingerprint: str, suite_digest: str, isolation: str = ENV_ISOLATION_VERSION) -> Calibration | None:
    """The cached calibration of this machine, suite and confinement, if any."""
    path = cache_path(fingerprint, suite_digest, isolation)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if data.get("format") != FORMAT_VERSION:
        return None
    cal = _parse(data)
    return cal if cal.env_isolation == isolation else None


def load_file(path: Path, suite_digest: str, suite_name: str,
              isolation: str = ENV_ISOLATION_VERSION) -> Calibration | None:
    """A user-named calibration file: None if absent; refused (exit 2) if it does not fit here."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise UsageError(f"calibration file {path}: unreadable ({error})") from None
    except RecursionError:  # the json module recurses once per nested array or object
        raise UsageError(f"calibration file {path}: unreadable (arrays or objects nested too deeply)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
        raise UsageError(
            f"calibration file {path}: not an orchard calibration (format {FORMAT_VERSION}); "
            "run `orchard calibrate --calibration FILE` or pass --recalibrate to replace it"
        )
    try:
        cal = _parse(data)
    except (KeyError, TypeError) as error:
        raise UsageError(f"calibration file {path}: malformed ({error})") from None
    here = machine_facts()
    if cal.machine is None or cal.machine != here:
        differs = "; ".join(here.differences(cal.machine)) if cal.machine else "no machine facts recorded"
        raise UsageError(
            f"calibration file {path} was made on other hardware or software ({differs}): its noise "
            "floors do not apply here; pass --recalibrate to calibrate this machine and replace the file"
        )
    if cal.suite_digest != suite_digest:
        raise UsageError(
            f"calibration file {path} belongs to suite {cal.suite!r} at digest {cal.suite_digest}, "
            f"not to {suite_name!r} at {suite_digest} (the suite changed); pass --recalibrate to replace it"
        )
    if cal.env_isolation != isolation:
        raise UsageError(
            f"calibration file {path} was measured with runs isolated as {cal.env_isolation!r}, not "
            f"{isolation!r} as now (confined and unconfined runs differ); pass --recalibrate to replace it"
        )
    return Calibration(**{**cal.__dict__, "file": path})


def _write(path: Path, calibration: Calibration) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps({**calibration.to_json(), "file": None}, indent=2, default=str))
    os.replace(tmp, path)


def save(calibration: Calibration) -> Path:
    """Into the cache, and into the calibration's own file when it has one."""
    path = cache_path(calibration.machine_fingerprint, calibration.suite_digest, calibration.env_isolation)
    _write(path, calibration)
    if calibration.file is not None:
        _write(calibration.file, calibration)
    return path

