"""A dask event topic read as it arrives: subscribed once, never re-read.

Dask workers say where each attempt started by logging an event on a topic
(`remote.EVENT_TOPIC`, `host_job.JUDGE_TOPIC`). Reading the scheduler's log
of a topic (`Client.get_events`) and skipping what was already seen breaks
past the log's length: the scheduler keeps only the last
`distributed.admin.low-level-log-length` events of a topic (1,000 by
default), so from then on the log's length stays put and every new event
was taken for an old one. It also costs a round trip carrying the whole log
on every read. A subscription receives each event once, on the client's
own event loop; `take` hands the lab's thread what arrived since.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class Topic:
    """The messages logged on one dask event topic since it was opened (events logged before are not seen)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client, self.name = client, name
        self._arrived: deque[tuple[float, Any]] = deque()  # appended on the client's event loop, taken here
        # the subscription goes to the scheduler on the client's ordered stream: before any task submitted later
        client.subscribe_topic(name, self._arrived.append)

    def take(self) -> list[dict[str, Any]]:
        """The messages that arrived since the last call, oldest first."""
        taken = []
        while self._arrived:
            taken.append(self._arrived.popleft()[1])
        return taken

    def close(self) -> None:
        self.client.unsubscribe_topic(self.name)
