"""Helpers shared by the log client's contract tests (real broker)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Consumer, TopicPartition

from infra.log import EventReader, LogRecord
from infra.settings import Settings
from schemas import TaskQueued

T = TypeVar("T")


def queued(dag_id: str, task_id: str = "t", try_number: int = 1) -> TaskQueued:
    return TaskQueued(dag_id=dag_id, run_id="r1", task_id=task_id, try_number=try_number,
                      executor="local", queue="default", scheduler_id="s1", at=1.0)


def wait_for(condition: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def read_until(reader: EventReader, count: int, timeout: float = 30.0) -> list[LogRecord]:
    """Poll ``reader`` until it returned ``count`` records."""
    records: list[LogRecord] = []

    def enough() -> bool:
        records.extend(reader.poll(0.2))
        return len(records) >= count

    wait_for(enough, f"{count} records (got {len(records)})", timeout)
    return records


def high_watermarks(settings: Settings, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "watermarks"})
    try:
        return {partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
                for partition in range(settings.partitions)}
    finally:
        consumer.close()
