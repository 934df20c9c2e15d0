"""The monitor's pure core: fold tock.events and tock.dags (``evolve``), ``decide`` deadline misses,
and keep windowed statistics. Imports only the standard library and ``schemas``."""

from services.monitor.core.decide import decide, decide_task_misses, next_deadline, open_task_deadlines
from services.monitor.core.notify import (DEADLINE_MISSED, FAILURE, Notification, NotificationBook,
                                          due_notifications)
from services.monitor.core.state import (ADOPTIONS, DEADLINE_MISSES, QUEUE_LATENCY, RUN_DURATION, RUN_FAILED,
                                         TASK_DEADLINE_MISSES, TASK_DURATION, TASK_FAILED, TASK_RETRIES,
                                         DagDefinitionRemoved, MonitorState, RunClock, UnknownEvent, evolve, fold,
                                         run_deadline)
from services.monitor.core.windows import (DEFAULT_SPECS, HOPPING_5M_1M, TUMBLING_5M, Aggregate, WindowedStats,
                                           WindowSpec, merged, table)

__all__ = [name for name in dir() if not name.startswith("_")]
