"""Asking for a manual run (TriggerDagRun) and following it to its end in the log."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError

from infra.log import EventReader, KafkaEventLog, partition_for, replay
from infra.settings import Settings
from infra.topics import topic_name
from schemas import DAGS, EVENTS, DagDefinition, DagParsed, DagRunFinished, TriggerDagRun
from services.scheduler.core import manual_run_id

# How long a topic the broker says does not exist is waited for (one just created may not be in
# every broker's metadata yet) before it is named as missing. Reading an unknown topic would
# otherwise wait out the whole read timeout (30 s) before failing.
MISSING_TOPIC_GRACE = 5.0


def trigger_run(settings: Settings, dag_id: str, request_id: str, conf_json: str = "{}",
                requested_by: str = "cli", *, logical_date: float | None = None) -> tuple[str, int]:
    """Append TriggerDagRun (``logical_date``: the run's; None: when the scheduler takes it); returns
    (the run id, the offset of tock.events to follow the run from)."""
    # The producer first: a new idempotent producer waits ~0.5 s for its producer id, and
    # that wait overlaps with reading the end offset (taken before appending, to follow from).
    with KafkaEventLog(settings, client_id="tock-trigger") as event_log:
        start = _end_offset(settings, dag_id)
        event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, conf_json=conf_json,
                                       logical_date=logical_date, requested_by=requested_by, at=time.time()))
    return manual_run_id(request_id), start


def follow_run(settings: Settings, dag_id: str, run_id: str, start: int, timeout: float | None = None) -> str | None:
    """Read the DAG's partition of tock.events from ``start`` until the run finishes; its state, or
    None if ``timeout`` seconds passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with EventReader(settings, [], client_id="tock-trigger-wait") as reader:
        reader.assign([(EVENTS, partition_for(dag_id, settings.partitions), start)])
        while deadline is None or time.monotonic() < deadline:
            for record in reader.poll(0.5):
                event = record.event
                if isinstance(event, DagRunFinished) and event.run_id == run_id and event.dag_id == dag_id:
                    return event.state
    return None


def _end_offset(settings: Settings, dag_id: str) -> int:
    topic = topic_name(settings.topic_prefix, EVENTS)
    with EventReader(settings, [], client_id="tock-trigger-offsets") as reader:
        _low, high = reader.watermarks(topic, partition_for(dag_id, settings.partitions), timeout=10)
    return high


def dag_is_published(settings: Settings, dag_id: str) -> bool:
    """Whether tock.dags holds a live definition of ``dag_id`` (only its partition is read)."""
    return published_definition(settings, dag_id) is not None


def published_definition(settings: Settings, dag_id: str) -> DagDefinition | None:
    """The live definition of ``dag_id`` in tock.dags (only its partition is read), or None."""
    _require_topic(settings, DAGS)
    partition = partition_for(dag_id, settings.partitions)
    latest = None
    for record in replay(settings, DAGS, [partition], client_id="tock-trigger-check"):
        if record.key == dag_id:
            latest = record.event  # None for a tombstone: the DAG was removed
    return latest.definition if isinstance(latest, DagParsed) else None


def _require_topic(settings: Settings, logical_topic: str) -> None:
    """Raise RuntimeError naming the topic when the broker still says it does not exist after
    MISSING_TOPIC_GRACE. A broker that does not answer is left to the read that follows (and its
    own timeout), as before."""
    topic = topic_name(settings.topic_prefix, logical_topic)
    deadline = time.monotonic() + MISSING_TOPIC_GRACE
    with EventReader(settings, [], client_id="tock-trigger-check") as reader:
        while True:
            error = reader.consumer.list_topics(topic, timeout=30).topics[topic].error
            if error is None or error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} does not exist (the broker has said so for "
                                   f"{MISSING_TOPIC_GRACE:g} s)")
            time.sleep(0.1)
