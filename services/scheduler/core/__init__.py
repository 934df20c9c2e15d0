"""The scheduler's pure core: fold the log (``evolve``), then ``decide`` what to do.

Imports only the standard library and ``schemas`` (cron arithmetic is ``schemas.schedule``).
"""

from schemas.runs import manual_run_id
from services.scheduler.core.decide import Policy, decide, decide_run
from services.scheduler.core.evolve import UnknownEvent, evolve, fold
from services.scheduler.core.liveness import (
    Evidence,
    Orphan,
    dead_tries,
    decide_adoption,
    next_wakeup,
    orphans,
    overdue_tries,
    reindex_timers,
    silence_deadline,
)
from services.scheduler.core.model import (
    DagTombstone,
    SchedulerState,
    TaskInstance,
    TryKey,
)
from services.scheduler.core.runs import decide_runs, due_logical_dates

__all__ = [
    "DagTombstone",
    "Evidence",
    "Orphan",
    "Policy",
    "SchedulerState",
    "TaskInstance",
    "TryKey",
    "UnknownEvent",
    "dead_tries",
    "decide",
    "decide_adoption",
    "decide_run",
    "decide_runs",
    "due_logical_dates",
    "evolve",
    "fold",
    "manual_run_id",
    "next_wakeup",
    "orphans",
    "overdue_tries",
    "reindex_timers",
    "silence_deadline",
]
