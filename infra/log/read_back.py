"""Our own committed decisions of one partition, until they are read back from the log.

A service that folds its partitions and commits decisions about them (the scheduler, the monitor)
folds its decisions when it reads them back, in their place in the log, never at commit: records
of others may precede them (written while it decided), and its state must be what any replay folds,
in the log's order. Until its decisions are read back a partition is *unsettled*: nothing more is
decided for it, or the same decision would be made twice.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("tock.log")

SETTLE_LIMIT = 60.0  # decisions not read back after this long: decide again (and say so)


class AwaitedDecisions:
    """The decisions of one partition committed and not read back yet, in the order written."""

    def __init__(self, partition: int, topic: str, limit: float = SETTLE_LIMIT) -> None:
        self.partition, self._topic, self._limit = partition, topic, limit
        self._awaiting: deque[Any] = deque()
        self._since = 0.0  # when the oldest of them was committed

    def __len__(self) -> int:
        return len(self._awaiting)

    def committed(self, events: Iterable[Any], now: float) -> None:
        """These decisions were committed; those on the topic read back are awaited."""
        ours = [event for event in events if event.TOPIC == self._topic]
        if ours and not self._awaiting:
            self._since = now
        self._awaiting.extend(ours)

    def read_back(self, event: Any) -> bool:
        """Whether ``event``, just read from the topic, is the next of ours (then no longer awaited)."""
        if self._awaiting and self._awaiting[0] == event:
            self._awaiting.popleft()
            return True
        return False

    def settled(self, now: float) -> bool:
        """Whether every decision of ours is read back (so deciding again sees them). Past the limit
        (a commit reported done whose records never came) the partition is decided for again."""
        if self._awaiting and now - self._since > self._limit:
            log.error("partition %d: %d decision(s) of ours not read back after %.0f s (first: %s); deciding "
                      "again", self.partition, len(self._awaiting), self._limit, type(self._awaiting[0]).__name__)
            self._awaiting.clear()
        return not self._awaiting
