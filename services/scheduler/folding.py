"""Folding what the loop read into the owned partitions' memories, noting the runs it touched and
which of our own decisions came back (their side effects wait for that: launching.py)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from infra.log import LogRecord
from schemas import Event, TaskHeartbeat
from services.scheduler.clock_watch import ClockWatch
from services.scheduler.core.model import instance_key
from services.scheduler.holdings import Holdings, Touched
from services.scheduler.memory import PartitionMemory
from services.scheduler.metrics import SchedulerMetrics, heartbeat_delay
from services.scheduler.runs_touched import Folded, concerns_every_run, run_of


class RecordFolding:
    """Folds records of owned partitions (records of others are skipped: not ours, any more)."""

    def __init__(self, holdings: Holdings, topics: dict[str, str], metrics: SchedulerMetrics,
                 heartbeat_seconds: float) -> None:
        self._holdings, self._topics = holdings, topics  # topics: real name -> logical name
        self._metrics, self._heartbeat_seconds = metrics, heartbeat_seconds
        self.read_back: list[tuple[PartitionMemory, Event]] = []  # our decisions folded by the last fold
        self._clocks = ClockWatch()

    def fold(self, records: Iterable[LogRecord]) -> Touched:
        """Fold the records; returns the runs touched per partition (None: walk all)."""
        touched: Touched = {}
        self.read_back = []
        for record in records:
            memory = self._holdings.memories.get(record.partition)
            if memory is None:
                continue  # not ours (any more)
            if isinstance(record.event, TaskHeartbeat):
                self._fold_heartbeat(memory, record, record.event)
                continue
            awaited = len(memory.awaiting)
            event = memory.fold_record(self._topics[record.topic], record)
            if len(memory.awaiting) < awaited:
                self.read_back.append((memory, record.event))
            if event is not None:
                _note(touched, record.partition, event)
        return touched

    def _fold_heartbeat(self, memory: PartitionMemory, record: LogRecord, beat: TaskHeartbeat) -> None:
        """Fold a heartbeat, measuring how late it came after the try's previous one (or its start),
        both as the broker appended them (core/heard.py), and watching the clocks it is judged on."""
        self._clocks.observe(record.topic, record.appended_at, time.time())
        instance = memory.state.instance((beat.dag_id, beat.run_id, instance_key(beat.task_id, beat.map_index)))
        previous = None if instance is None else instance.last_heartbeat_at or instance.started_at
        heard = memory.fold_record(self._topics[record.topic], record)
        if instance is not None and heard is not None and instance.last_heartbeat_at == heard.at:  # the try's runner
            delay = heartbeat_delay(previous, heard.at, self._heartbeat_seconds)
            if delay is not None:
                self._metrics.heartbeat_delay.observe(delay)


def _note(touched: Touched, partition: int, event: Folded) -> None:
    runs = touched.setdefault(partition, set())
    if concerns_every_run(event) or runs is None:  # may concern every run
        touched[partition] = None
        return
    run = run_of(event)
    if run is not None:
        runs.add(run)
