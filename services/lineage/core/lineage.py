"""Tock's log as OpenLineage run events: ``decide_lineage`` (what one record of tock.events emits, given the
partition's fold so far) and ``evolve`` (fold it). Pure: the same records give the same events, byte for byte
once serialized, so a sink that resumes after a crash re-derives exactly what it had emitted.

Jobs and runs
-------------
* A DAG run is a run of the job ``<dag_id>``; a try of a task instance is a run of the job
  ``<dag_id>.<task_id>`` (every instance of a mapped task is the same job: its map index is in the ``tock``
  run facet, beside the try number). Both in the job namespace of the setting TOCK_LINEAGE_NAMESPACE.
* runIds are uuid5s of the names of what they are (model.py): ``<namespace>/<dag>/<run>/<incarnation>`` for
  a DAG run, ``<namespace>/<dag>/<run>/<task>/<map index>/<try>`` for a try; anyone holding the Tock ids can
  compute them, and a re-emission is identical. A DAG run reopened by a clear is a new OpenLineage run (its
  incarnation, 0 then 1, 2...): OpenLineage allows one START and one terminal event per run.
* A try's events carry the parent facet naming its DAG run's current incarnation (also as the root).
* eventTime is the Tock event's own ``at``, never the time of emission.

Which Tock change is which event
--------------------------------
DAG run (incarnation):
  DagRunCreated -> START (inputs: the assets whose events triggered it; nominal time: its logical date).
  DagRunReopened (a finished run cleared) -> START of the next incarnation.
  DagRunFinished success -> COMPLETE; failed because its tasks failed -> FAIL (errorMessage names the
  instances whose last try failed or was aborted); failed with a reason of its own (its dagrun_timeout
  passed, its DAG was deleted) -> ABORT (errorMessage: the reason). The terminal event lists the datasets
  its tries read and wrote in this incarnation.
Try (one OpenLineage run each; a retry is a new try, so a new run with its own START):
  TaskQueued -> nothing (its context is kept: data interval as nominal time, inlets as inputs).
  TaskStarted (the first of the try: the runner that claimed it) -> START.
  TaskAdopted of a started try (a new scheduler took over the running try after its owner died) -> RUNNING.
  TaskSucceeded -> COMPLETE (outputs: the assets it updated). TaskTrySkipped (the code raised the skip
  exception) and TaskPoked (a sensor's poke not met: the try ends, a later try pokes again) -> COMPLETE;
  a poke that ended because its sensor timed out -> FAIL.
  TaskFailed -> FAIL (errorMessage: the error and its Python traceback).
  Tock stopped the try -> ABORT: TaskKilled (a kill, a clear or a mark of a running try), TaskDeclaredDead
  (silent past the heartbeat timeout, or lost by its executor: whether or not a retry follows; the retry is
  its own run), and TaskKillRequested of a try no runner had claimed yet (by the claim rule none ever will).
  Whatever comes after a try's terminal event (a late outcome of a try declared dead, a second runner's
  TaskStarted) and any event of a try older than its instance's latest one emits nothing: one START at most
  and one terminal event at most per try.
No OpenLineage run: decisions about a task instance that start no try (TaskSkipped, TaskUpstreamFailed,
TaskEmptySucceeded, TaskRemoved, a mark or a clear of an instance that is not running), TaskRetryScheduled
(the retry's try starts its own run), and everything else of tock.events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Never, NoReturn, TypeAlias

from schemas import (
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    EventsTopicEvent,
    TaskAdopted,
    TaskDeclaredDead,
    TaskFailed,
    TaskKilled,
    TaskKillRequested,
    TaskPoked,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
)
from schemas.tasks import instance_name
from services.lineage.core.datasets import datasets_of_events, datasets_of_inlets
from services.lineage.core.model import (
    ABORT,
    COMPLETE,
    DAG_JOB,
    ENDED,
    FAIL,
    QUEUED,
    RUNNING,
    START,
    STARTED,
    TASK_JOB,
    DatasetRef,
    Failure,
    JobRef,
    LineageEvent,
    LineageState,
    Position,
    RunLineage,
    RunRef,
    TockFacts,
    TryLineage,
    add_unique,
    dag_run_uuid,
    try_uuid,
)

TryEnded: TypeAlias = TaskSucceeded | TaskTrySkipped | TaskPoked | TaskFailed | TaskKilled | TaskDeclaredDead
TryEvent: TypeAlias = TaskQueued | TaskStarted | TaskAdopted | TaskKillRequested | TryEnded
RunEvent: TypeAlias = DagRunCreated | DagRunReopened | DagRunFinished


class UnknownEvent(TypeError):
    """A value the lineage core cannot fold: not an event of tock.events."""


@dataclass(frozen=True, slots=True)
class LineageConfig:
    """The job namespace every job and runId is in (TOCK_LINEAGE_NAMESPACE)."""

    namespace: str = "tock"


@dataclass(frozen=True, slots=True)
class Ending:
    """How a try-ending event ends its try."""

    event_type: str
    state: str  # Tock's word, in the tock facet
    failure: Failure | None = None
    outputs: tuple[DatasetRef, ...] = ()


# -- deciding --------------------------------------------------------------------------------------

def decide_lineage(state: LineageState, event: EventsTopicEvent, position: Position,
                   config: LineageConfig) -> list[LineageEvent]:
    """The lineage events this record of tock.events emits, given the fold of the records before it."""
    match event:
        case DagRunCreated() | DagRunReopened() | DagRunFinished():
            found = _of_run(state, event, position, config)
        case TaskQueued() | TaskStarted() | TaskAdopted() | TaskKillRequested() | TaskSucceeded() \
                | TaskTrySkipped() | TaskPoked() | TaskFailed() | TaskKilled() | TaskDeclaredDead():
            found = _of_try(state, event, position, config)
        case _ if not isinstance(event, EventsTopicEvent):
            _unknown(event)
        case _:
            found = []
    return [replace(item, tock=replace(item.tock, index=index)) for index, item in enumerate(found)]


def _of_run(state: LineageState, event: RunEvent, position: Position, config: LineageConfig) -> list[LineageEvent]:
    run = state.runs.get((event.dag_id, event.run_id))
    match event:
        case DagRunCreated() if run is None:
            return [_run_event(START, "created", event, _created(event), position, config)]
        case DagRunReopened() if run is not None and not run.open:
            reopened = RunLineage(run.logical_date, run.incarnation + 1, triggers=run.triggers,
                                  inputs=list(run.triggers))
            return [_run_event(START, "reopened", event, reopened, position, config)]
        case DagRunFinished() if run is not None and run.open:
            return [_finished(event, run, position, config)]
    return []


def _created(event: DagRunCreated) -> RunLineage:
    triggers = datasets_of_events(event.asset_events_json)
    return RunLineage(event.logical_date, triggers=triggers, inputs=list(triggers))


def _finished(event: DagRunFinished, run: RunLineage, position: Position, config: LineageConfig) -> LineageEvent:
    if event.state == "success":
        return _run_event(COMPLETE, "success", event, run, position, config)
    if event.reason:
        return _run_event(ABORT, event.state, event, run, position, config, Failure(event.reason))
    failed = [name for name, current in run.tries.items() if current.outcome in (FAIL, ABORT)]
    message = f"failed task instances: {', '.join(failed)}" if failed else "the run failed"
    return _run_event(FAIL, event.state, event, run, position, config, Failure(message))


def _run_event(event_type: str, word: str, event: RunEvent, run: RunLineage, position: Position,
               config: LineageConfig, failure: Failure | None = None) -> LineageEvent:
    terminal = event_type != START
    return LineageEvent(
        event_type, event.at, _run_ref(config, event.dag_id, event.run_id, run.incarnation), DAG_JOB,
        TockFacts(event.dag_id, event.run_id, "", -1, 0, run.incarnation, word, position.partition,
                  position.offset, 0),
        nominal_start=run.logical_date, failure=failure, inputs=tuple(run.inputs),
        outputs=tuple(run.outputs) if terminal else ())


def _of_try(state: LineageState, event: TryEvent, position: Position, config: LineageConfig) -> list[LineageEvent]:
    run = state.runs.get((event.dag_id, event.run_id))
    current = None if run is None else _try_of(run, event)
    if run is None or current is None:
        return []
    match event:
        case TaskStarted() if current.phase == QUEUED:
            return [_try_event(START, "started", event, run, current, position, config)]
        case TaskAdopted() if current.phase == STARTED:
            return [_try_event(RUNNING, "adopted", event, run, current, position, config)]
        case TaskKillRequested() if current.phase == QUEUED:
            return [_try_event(ABORT, "kill_requested", event, run, current, position, config,
                               Ending(ABORT, "kill_requested", Failure(event.reason or "killed")))]
        case TaskQueued() | TaskStarted() | TaskAdopted() | TaskKillRequested():
            return []
        case _ if current.phase != ENDED:
            ending = try_ending(event)
            return [_try_event(ending.event_type, ending.state, event, run, current, position, config, ending)]
    return []


def try_ending(event: TryEnded) -> Ending:
    """How ``event`` ends its try (if the try has not ended already)."""
    match event:
        case TaskSucceeded():
            return Ending(COMPLETE, "succeeded", outputs=datasets_of_events(event.asset_events_json))
        case TaskTrySkipped():
            return Ending(COMPLETE, "skipped")
        case TaskPoked() if event.timed_out:
            return Ending(FAIL, "poke_timed_out", Failure("the sensor timed out"))
        case TaskPoked():
            return Ending(COMPLETE, "poked")
        case TaskFailed():
            return Ending(FAIL, "failed", Failure(event.error or "failed", event.traceback))
        case TaskKilled():
            return Ending(ABORT, "killed", Failure(event.reason or "killed"))
        case TaskDeclaredDead():
            return Ending(ABORT, "declared_dead", Failure(f"declared dead: {event.reason}"))


def _try_event(event_type: str, word: str, event: TryEvent, run: RunLineage, current: TryLineage,
               position: Position, config: LineageConfig, ending: Ending | None = None) -> LineageEvent:
    parent = _run_ref(config, event.dag_id, event.run_id, run.incarnation)
    job = JobRef(config.namespace, f"{event.dag_id}.{event.task_id}")
    run_id = try_uuid(config.namespace, event.dag_id, event.run_id, event.task_id, event.map_index,
                      current.try_number)
    return LineageEvent(
        event_type, event.at, RunRef(job, run_id), TASK_JOB,
        TockFacts(event.dag_id, event.run_id, event.task_id, event.map_index, current.try_number, run.incarnation,
                  word, position.partition, position.offset, 0),
        parent=parent, nominal_start=current.nominal_start, nominal_end=current.nominal_end,
        failure=None if ending is None else ending.failure, inputs=current.inputs,
        outputs=() if ending is None else ending.outputs)


def _run_ref(config: LineageConfig, dag_id: str, run_id: str, incarnation: int) -> RunRef:
    return RunRef(JobRef(config.namespace, dag_id), dag_run_uuid(config.namespace, dag_id, run_id, incarnation))


def _try_of(run: RunLineage, event: TryEvent) -> TryLineage | None:
    """The try ``event`` is about: its instance's latest, a new one (a higher try number), or None (older)."""
    current = run.tries.get(instance_name(event.task_id, event.map_index))
    if current is None or event.try_number > current.try_number:
        return TryLineage(event.try_number)
    return current if event.try_number == current.try_number else None


# -- folding ---------------------------------------------------------------------------------------

def evolve(state: LineageState, event: EventsTopicEvent) -> LineageState:
    """Fold one record of tock.events into ``state`` (in place; returned for chaining). Events that change
    no OpenLineage run change nothing; a value that is no event of tock.events raises UnknownEvent."""
    match event:
        case DagRunCreated() | DagRunReopened() | DagRunFinished():
            _evolve_run(state, event)
        case TaskQueued() | TaskStarted() | TaskAdopted() | TaskKillRequested() | TaskSucceeded() \
                | TaskTrySkipped() | TaskPoked() | TaskFailed() | TaskKilled() | TaskDeclaredDead():
            _evolve_try(state, event)
        case _ if not isinstance(event, EventsTopicEvent):
            _unknown(event)
    state.folded += 1
    return state


def _evolve_run(state: LineageState, event: RunEvent) -> None:
    key = (event.dag_id, event.run_id)
    run = state.runs.get(key)
    match event:
        case DagRunCreated() if run is None:
            state.runs[key] = _created(event)
        case DagRunReopened() if run is not None and not run.open:
            run.incarnation, run.open, run.inputs, run.outputs = run.incarnation + 1, True, list(run.triggers), []
        case DagRunFinished() if run is not None:
            run.open = False


def _evolve_try(state: LineageState, event: TryEvent) -> None:
    run = state.runs.get((event.dag_id, event.run_id))
    current = None if run is None else _try_of(run, event)
    if run is None or current is None:
        return
    run.tries[instance_name(event.task_id, event.map_index)] = current
    match event:
        case TaskQueued() if current.phase == QUEUED:
            _queued(run, current, event)
        case TaskStarted() if current.phase == QUEUED:
            current.phase = STARTED
        case TaskKillRequested() if current.phase == QUEUED:
            current.phase, current.outcome = ENDED, ABORT
        case TaskQueued() | TaskStarted() | TaskAdopted() | TaskKillRequested():
            pass
        case _ if current.phase != ENDED:
            ending = try_ending(event)
            current.phase, current.outcome = ENDED, ending.event_type
            add_unique(run.outputs, ending.outputs)


def _queued(run: RunLineage, current: TryLineage, event: TaskQueued) -> None:
    current.inputs = datasets_of_inlets(event.inlet_events_json)
    current.nominal_start, current.nominal_end = event.data_interval_start, event.data_interval_end
    if current.nominal_start is None:
        current.nominal_start = event.logical_date
    add_unique(run.inputs, current.inputs)


def _unknown(event: Never) -> NoReturn:
    """Reached only by a value outside EventsTopicEvent (mypy checks it)."""
    raise UnknownEvent(f"the lineage core cannot fold {type(event).__name__}")


def lineage_of_log(events: Iterable[EventsTopicEvent], config: LineageConfig | None = None, *,
                   partition: int = 0, state: LineageState | None = None) -> list[LineageEvent]:
    """Every lineage event of ``events`` read in order as records 0, 1, 2... of ``partition`` (from ``state``,
    folded on)."""
    config, state = config or LineageConfig(), LineageState() if state is None else state
    found: list[LineageEvent] = []
    for offset, event in enumerate(events):
        found += decide_lineage(state, event, Position(partition, offset), config)
        evolve(state, event)
    return found
