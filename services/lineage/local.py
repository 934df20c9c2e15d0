"""``tock lineage`` with the file or the HTTP transport: one emitter reads every partition of tock.events
read_committed from the start, folds it, and hands the sink each lineage event past what the sink says it
has delivered (services/lineage/local_sinks.py says what each sink guarantees). Records whose events were
delivered before are folded again without emitting: a restart rebuilds the fold from the log, which is
the truth, and resumes exactly after the last event delivered."""

from __future__ import annotations

import logging
import threading

from infra.log import EventReader
from infra.log.replay import REPLAY_FETCH, topic_partitions
from infra.settings import Settings
from infra.topics import topic_name
from schemas import EVENTS
from services.lineage.config import LineageSettings
from services.lineage.folding import PartitionLineage
from services.lineage.local_sinks import Delivered, LocalSink, Stopped

log = logging.getLogger("tock.lineage")

POLL_WAIT = 0.5
BATCH = 5000


class LocalLineage:
    """The one emitter of a sink. ``run()`` until ``stop()``."""

    def __init__(self, settings: Settings, lineage: LineageSettings, sink: LocalSink, name: str,
                 stop: threading.Event | None = None) -> None:
        self.settings, self.lineage, self.sink, self.name = settings, lineage, sink, name
        self.folds: dict[int, PartitionLineage] = {}
        self.delivered: Delivered = {}
        self.emitted = 0  # lineage events delivered by this instance
        self._stop = stop or threading.Event()

    def run(self) -> None:
        try:
            self.delivered = self.sink.delivered()
            self.reader = EventReader(self.settings, [], client_id=f"tock-lineage-{self.name}", config=REPLAY_FETCH)
            topic = topic_name(self.settings.topic_prefix, EVENTS)
            partitions = topic_partitions(self.reader, topic)
            self.folds = {partition: PartitionLineage(partition, self.lineage.config) for partition in partitions}
            self.reader.assign([(EVENTS, partition, 0) for partition in partitions])
            log.info("lineage emitter %s: %s -> %s, resuming after %s", self.name, topic, self.lineage.transport,
                     self.delivered or "nothing")
            while not self._stop.is_set():
                self.step()
        except Stopped:
            pass
        finally:
            self._close()

    def stop(self) -> None:
        self._stop.set()

    def step(self) -> None:
        """Fold a batch of records; deliver their events not delivered yet; make the batch durable."""
        sent = 0
        for record in self.reader.poll(POLL_WAIT, BATCH):
            fold = self.folds.get(record.partition)
            if fold is None or record.offset < fold.next_offset:
                continue
            last = self.delivered.get(record.partition, (-1, -1))
            for item in fold.apply(record):
                if item.tock.position > last:
                    self.sink.deliver(item)
                    self.delivered[record.partition] = item.tock.position
                    sent += 1
        if sent:
            self.sink.sync()
            self.emitted += sent

    def _close(self) -> None:
        reader = getattr(self, "reader", None)
        for closing in ([reader.close] if reader is not None else []) + [self.sink.close]:
            try:
                closing()
            except Exception as error:  # noqa: BLE001 - closing what we can, saying what failed
                log.warning("closing: %s", error)
        log.info("lineage emitter %s stopped (%d lineage events delivered)", self.name, self.emitted)
