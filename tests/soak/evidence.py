"""The evidence behind the violations: the history in the log of every run a violation names,
written to ``evidence.txt`` under the soak's root, each record with its partition and offset, and
marked ABORTED when only a read_uncommitted reader sees it (it belongs to a transaction that did
not commit: a scheduler acting on it acted on a decision the log does not hold)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from infra.log import EventReader, LogRecord
from infra.settings import Settings
from schemas import EVENTS
from tests.soak.checks import Violation

RUN_ID = re.compile(r"\b((?:manual|scheduled|backfill)__[\w.:+-]+)")
IDLE_POLLS = 4  # empty polls in a row that end the read (the services are stopped: nothing new comes)


def write_evidence(settings: Settings, root: Path, violations: list[Violation]) -> Path | None:
    """Write the history of the runs the violations name; returns the file (None if none named)."""
    run_ids = sorted({found for violation in violations for found in RUN_ID.findall(violation.detail)})
    if not run_ids:
        return None
    committed = {(record.partition, record.offset) for record in _read(settings, "read_committed")}
    records = [record for record in _read(settings, "read_uncommitted")
               if record.event is not None and getattr(record.event, "run_id", None) in run_ids]
    lines = [f"{violation}" for violation in violations] + [""]
    for run_id in run_ids:
        lines.append(f"== {run_id}")
        lines += [_line(record, (record.partition, record.offset) in committed)
                  for record in sorted(records, key=lambda record: (record.partition, record.offset))
                  if record.event.run_id == run_id]
    path = root / "evidence.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _read(settings: Settings, isolation: str) -> list[LogRecord]:
    reader = EventReader(settings, [], client_id=f"soak-evidence-{isolation}", config={"isolation.level": isolation})
    try:
        reader.assign([(EVENTS, partition, 0) for partition in range(settings.partitions)])
        found: list[LogRecord] = []
        idle = 0
        while idle < IDLE_POLLS:
            records = reader.poll(1.0)
            idle = 0 if records else idle + 1
            found += records
        return found
    finally:
        reader.close()


def _line(record: LogRecord, committed: bool) -> str:
    event = record.event
    when = time.strftime("%H:%M:%S", time.localtime(event.at)) + f"{event.at % 1:.3f}"[1:]
    who = getattr(event, "scheduler_id", "") or getattr(event, "runner_id", "")
    task = f" {event.task_id}#{event.try_number}" if hasattr(event, "try_number") else ""
    return (f"p{record.partition} o{record.offset} {'' if committed else 'ABORTED '}{when} "
            f"{type(event).__name__}{task} {who}".rstrip())
