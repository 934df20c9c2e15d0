"""Which clock a runner's report is judged on: the broker's, never the runner's own.

A runner's ``at`` is its host's clock. A host 60 s behind would have its healthy tries declared
dead while they heartbeat; one ahead would hold a dead try for as long as it is ahead, and put a
retry off by as much. So a runner's events (TaskStarted, TaskHeartbeat, its outcomes) are folded
with their time as the broker appended them: tock.events and tock.heartbeats are LogAppendTime
topics (infra/topics.py), and a record's timestamp is then the broker's, stored with the record,
so a replay folds exactly what the live scheduler folded. Silence is the scheduler's clock (its
``now``, the moment it fetched the heartbeat log's end) against the broker's: what is left to
keep in step is the brokers' and the schedulers' clocks, never the runners' (README, "Clocks").

Records written before a topic was brought to LogAppendTime carry their producer's clock
(CreateTime): they keep the runner's ``at``, as they were judged when they were live.
"""

from __future__ import annotations

from dataclasses import replace

from services.scheduler.core.model import RunnerEvent, SchedulerEvent


def as_heard(event: SchedulerEvent, appended_at: float | None) -> SchedulerEvent:
    """``event`` as the scheduler folds it: a runner's event timed by the broker's ``appended_at``
    (None: the record carries no broker time, so the event stays as written)."""
    if appended_at is None or not isinstance(event, RunnerEvent) or event.at == appended_at:
        return event
    return replace(event, at=appended_at)
