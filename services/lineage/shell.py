"""``tock lineage``: build the emitter the TOCK_LINEAGE_* settings ask for.

What each transport guarantees, across restarts and ``kill -9`` of the emitter or of any other service:

* kafka (services/lineage/kafka_sink.py): exactly once for read_committed readers; any number of emitters;
* file (services/lineage/local_sinks.py): exactly once; one emitter per file;
* http (idem): at least once (a repeat is the same bytes; dedupe on runId + eventType + eventTime), never
  lost; one emitter per name.

Whatever the transport, what is emitted is a pure function of the committed log (services/lineage/core), so
every emitter, every restart and every replay derives the same events, byte for byte.
"""

from __future__ import annotations

import threading
from typing import Protocol

from infra.settings import Settings
from services.lineage.config import LineageSettings
from services.lineage.kafka_sink import KafkaLineage
from services.lineage.local import LocalLineage
from services.lineage.local_sinks import FileSink, HttpSink, LocalSink


class LineageService(Protocol):
    def run(self) -> None: ...

    def stop(self) -> None: ...


def lineage_service(settings: Settings, name: str) -> LineageService:
    """The emitter for TOCK_LINEAGE_TRANSPORT. Raises LineageSettingsError or SinkBusy, saying why."""
    lineage = LineageSettings.of(settings)
    if lineage.transport == "kafka":
        return KafkaLineage(settings, lineage, name)
    stop = threading.Event()
    sink: LocalSink
    if lineage.transport == "file":
        sink = FileSink(lineage.file)
    else:
        assert lineage.url is not None  # LineageSettings.of checked it
        sink = HttpSink(lineage.url, lineage.http_endpoint, lineage.http_timeout,
                        lineage.home / "lineage" / f"http-{name}.json", stop)
    return LocalLineage(settings, lineage, sink, name, stop)
