"""The dask cluster a lab's workers run on: one orchard starts and stops itself, or an existing one.

`scheduler = "local"` starts a `LocalCluster` of worker processes on this
machine (loopback only, no dashboard, TLS with a certificate of its own:
a connection without it is refused) and closes it, its processes
included, when the lab stops. `scheduler = "tcp://HOST:8786"` connects to
a running `dask scheduler`; orchard then only disconnects, the cluster is
the user's. Either way every dask worker must offer the `agent` resource
(`dask worker tcp://HOST:8786 --resources "agent=1 cpu=4"`): one
experiment takes `agent=1` and `cpu=<cpus_per_experiment>`, so the
resources a worker declares cap how many experiments it runs at once.
How long orchard keeps trying to reach a scheduler is dask's own
`distributed.comm.timeouts.connect` (30 s unless set, e.g. by
`DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s`).
"""

from __future__ import annotations

import logging
import math
from types import TracebackType
from typing import Any

from orchard.errors import UsageError
from orchard.lab.config.sections import WorkersConfig

LOCAL = "local"


def experiment_resources(workers: WorkersConfig) -> dict[str, float]:
    """What one experiment claims on a dask worker."""
    return {"agent": 1, "cpu": workers.cpus_per_experiment}


class Cluster:
    """A dask client on the configured cluster (a context manager that cleans up what it started)."""

    def __init__(self, workers: WorkersConfig) -> None:
        self.workers = workers
        self.local: Any = None  # distributed.LocalCluster when orchard started it
        self.client: Any = None

    def open(self) -> Any:
        from distributed import Client, LocalCluster

        address = self.workers.scheduler
        if address == LOCAL:
            processes = self.workers.dask_workers
            agents = math.ceil(self.workers.count / processes)
            self.local = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=processes, threads_per_worker=agents, processes=True, host="127.0.0.1",
                dashboard_address=None, silence_logs=logging.ERROR,
                # TLS with a certificate made for this cluster and held only by its processes: its scheduler
                # listens on loopback, where a worker with network = "all" could otherwise submit tasks to it
                security=True,
                resources={"agent": agents, "cpu": agents * self.workers.cpus_per_experiment},
            )
            self.client = Client(self.local)  # type: ignore[no-untyped-call]
        else:
            if not address.startswith(("tcp://", "tls://")):
                raise UsageError(f"workers.scheduler: {address!r} is neither \"local\" nor an address like "
                                 "tcp://HOST:8786")
            try:
                # dask's own connect timeout (its config): a scheduler that refuses is retried until then
                self.client = Client(address)  # type: ignore[no-untyped-call]
            except OSError as error:
                raise UsageError(f"workers.scheduler: cannot reach the dask scheduler at {address}: {error}") from None
        return self.client

    def agent_slots(self) -> int:
        """Experiments the cluster's workers can run at once (their `agent` resources, summed)."""
        info = self.client.scheduler_info()
        return int(sum(w.get("resources", {}).get("agent", 0) for w in info.get("workers", {}).values()))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.local is not None:
            self.local.close()
            self.local = None

    def __enter__(self) -> Any:
        try:
            return self.open()
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
