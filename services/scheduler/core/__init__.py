"""The scheduler's pure core: fold the log (``evolve``), then ``decide`` what to do.

Imports only the standard library and ``schemas`` (and croniter, isolated in ``cron``).
"""

from services.scheduler.core.decide import Policy, decide, decide_run
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
from services.scheduler.core.evolve import UnknownEvent, evolve, fold
from services.scheduler.core.model import (
    DagTombstone,
    SchedulerState,
    TaskInstance,
    TryKey,
    manual_run_id,
)
from services.scheduler.core.runs import decide_runs, due_logical_dates

__all__ = [name for name in dir() if not name.startswith("_")]
