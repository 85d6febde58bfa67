"""What an ended worker left, as collection reads it: the same records whichever executor ran it.

A worker's checkouts are read on the host they are on (the lab's, or a dask
worker's) by the same judge-owned reader into a `CheckoutReading`; a run on
a dask worker sends that reading back in a `RemoteRun`, with its host, its
report's text, its log's tail and its prompt. Collection turns either into
one `WorkerOutput` and computes the candidate from it alone
(`candidate.candidate_from`), so the two paths cannot decide differently.
Records only: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchard.lab.records.report_reading import ReportReading


@dataclass(frozen=True)
class CheckoutReading:
    """A worker's target and bench checkouts read through fresh judge-owned repositories.

    Facts, not conclusions: the patch is filtered again, its files listed and
    every flag worked out by the lab (`candidate.candidate_from`).
    """

    target_head: str = ""  # the target checkout's head ("" unreadable): moved when the worker committed
    patch: str = ""  # everything the target checkout holds beyond its base
    special_files: tuple[str, ...] = ()  # what only the tree shows (FIFOs, sockets, devices, a checkout symlinked)
    bench_files: tuple[str, ...] = ()  # files changed in the bench checkout: any is tampering
    bench_head: str = ""
    bench_base: str = ""  # the commit the bench checkout must still be at (its copy without held-out inputs)

    @property
    def bench_tampered(self) -> bool:
        return bool(self.bench_files) or self.bench_head not in ("", self.bench_base)


@dataclass(frozen=True)
class Timings:
    """Where a remote experiment's time went, in seconds, on its dask worker."""

    setup_s: float = 0.0
    run_s: float = 0.0
    collect_s: float = 0.0


@dataclass(frozen=True)
class RemoteRun:
    """What a run on a dask worker adds to how it ended: where it ran and what it left there."""

    host: str
    address: str  # the dask worker's address
    reading: CheckoutReading = field(default_factory=CheckoutReading)  # empty when nothing could be read
    report_text: str | None = None
    report_unreadable: str | None = None  # why the host could not read the report (a link, a FIFO, too big)
    log_tail: str = ""
    prompt: str = ""
    timings: Timings = field(default_factory=Timings)
    fetched_from: str = ""  # where the host's reference clone of the target was fetched from
    host_failed: bool = False  # the host's failure, not the hypothesis's: its setup failed, or dask lost it
    over_cap: str | None = None  # why the host stopped it: its directory over [workers] max_checkout_mb (KILL)

    @property
    def where(self) -> str:
        """The host and the dask worker's address, as the lab's logs and messages name them."""
        return f"{self.host} ({self.address})" if self.address else self.host or "an unknown host"


@dataclass(frozen=True)
class WorkerOutput:
    """The one input candidate collection computes from, local or remote: the reading and the lab's own files."""

    reading: CheckoutReading
    report: ReportReading  # the worker's report as read here, or the lab's copy of a remote one
    log_path: Path  # the worker's log, or the lab's copy of a remote one's tail
    host: str | None = None  # where it ran; None: this machine
