"""Tock's events: declared once here, Avro schemas frozen beside them, and the codec."""

from schemas.codec import DecodeError, UnknownEventType, UnknownSchemaVersion, decode, encode, peek_type
from schemas.commands import (CancelBackfill, ClearTask, CommandRejected, KillTask, MarkTask, PauseDag, RequestBackfill,
                              TriggerDagRun)
from schemas.dags import DagDefinition, DagParsed, TaskDefinition
from schemas.declare import (
    DAGS,
    DEAD_LETTER,
    EVENT_TYPES,
    EVENTS,
    HEARTBEATS,
    LOGS,
    PARSING,
    SCHEDULERS,
    SNAPSHOTS,
    USERS,
    Event,
    event_type,
)
from schemas.logs import TaskLogShipped, try_log_key
from schemas.parsing import (
    DagFileProcessed,
    DagFileRemoved,
    DagParseFailed,
    DagRemoved,
    ProcessorFinished,
    ProcessorKilled,
    ProcessorStarted,
)
from schemas.runs import BackfillFinished, BackfillPlanned, CallbackCalled, DagRunCreated, DagRunFinished, DagRunReopened, DeadlineMissed
from schemas.schedulers import SchedulerHeartbeat, SchedulerStopped
from schemas.users import TokenCreated, TokenRevoked, UserCreated, UserDeleted
from schemas.workers import WorkerHeartbeat, WorkerStopped
from schemas.tasks import (
    PodFinished,
    PodStarted,
    TaskAdopted,
    TaskCleared,
    TaskDeadlineMissed,
    TaskDeclaredDead,
    TaskFailed,
    TaskHeartbeat,
    TaskKilled,
    TaskKillRequested,
    TaskLaunched,
    TaskQueued,
    TaskRemoved,
    TaskRetryScheduled,
    TaskSkipped,
    TaskStarted,
    TaskSucceeded,
    TaskUpstreamFailed,
)

__all__ = [name for name in dir() if not name.startswith("_")]
