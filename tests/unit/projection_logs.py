"""Example and random logs of Tock events for projection tests (values, no I/O)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import strategies as st

from infra.log import LogRecord
from infra.log.partitioner import partition_for
from infra.log.records import routing_key
from infra.topics import topic_name
from schemas import (
    DAGS,
    BackfillFinished,
    BackfillPlanned,
    CancelBackfill,
    ClearTask,
    CommandRejected,
    DagDefinition,
    DagFileProcessed,
    DagFileRemoved,
    DagParsed,
    DagParseFailed,
    DagRemoved,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    KillTask,
    MarkTask,
    PauseDag,
    RequestBackfill,
    SchedulerHeartbeat,
    SchedulerStopped,
    TaskAdopted,
    TaskCleared,
    TaskDeclaredDead,
    TaskDefinition,
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
    TriggerDagRun,
    WorkerHeartbeat,
    WorkerStopped,
)

PARTITIONS = 3
PREFIX = "t0."


class LogBuilder:
    """Gives events their log positions as KafkaEventLog would: topic, partition, next offset."""

    def __init__(self, partitions: int = PARTITIONS, prefix: str = PREFIX) -> None:
        self.partitions, self.prefix = partitions, prefix
        self.next_offset: dict[tuple[str, int], int] = defaultdict(int)
        self.records: list[LogRecord] = []

    def add(self, event, at: float | None = None) -> LogRecord:
        key, partition_key = routing_key(event)
        return self._record(event.TOPIC, key, partition_key, event, at if at is not None else event.at)

    def tombstone(self, dag_id: str, at: float) -> LogRecord:
        return self._record(DAGS, dag_id, dag_id, None, at)

    def _record(self, logical: str, key: str, partition_key: str, event, at: float) -> LogRecord:
        position = (topic_name(self.prefix, logical), partition_for(partition_key, self.partitions))
        record = LogRecord(position[0], position[1], self.next_offset[position], key, event, at)
        self.next_offset[position] += 1
        self.records.append(record)
        return record


def dag_parsed(dag_id: str, at: float, tasks=("extract", "load"), path: str = "/dags/etl.py") -> DagParsed:
    definition = DagDefinition(dag_id=dag_id, file_path=path, schedule="@hourly", tags=["x"],
                               tasks=[TaskDefinition(task_id=task, kind="bash", command="true")
                                      for task in tasks])
    return DagParsed(dag_id=dag_id, file_path=path, fingerprint=f"fp-{at}", definition=definition, at=at)


def lifecycle(dag_id: str, run_id: str, task_id: str, try_number: int, at: float, outcome: str = "success"):
    """The events of one try from queued to its outcome."""
    ids = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "try_number": try_number}
    runner = {"runner_id": f"runner-{try_number}"}
    events = [TaskQueued(**ids, executor="local", queue="default", scheduler_id="s1", at=at),
              TaskLaunched(**ids, executor="local", handle=f"123@host:{at}", scheduler_id="s1", at=at + 0.1),
              TaskStarted(**ids, **runner, hostname="host", pid=123, at=at + 0.2),
              TaskHeartbeat(**ids, **runner, at=at + 0.3)]
    if outcome == "success":
        events.append(TaskSucceeded(**ids, **runner, at=at + 1))
    else:
        events.append(TaskFailed(**ids, **runner, error="boom", at=at + 1))
    return events


# --- random logs -------------------------------------------------------------------

_DAGS = ("etl", "report")
_RUNS = ("r1", "r2")
_TASKS = ("extract", "load")
_times = st.floats(min_value=1_700_000_000, max_value=1_700_100_000, allow_nan=False).map(lambda t: round(t, 3))
_tries = st.integers(min_value=1, max_value=3)
_ti = st.fixed_dictionaries({"dag_id": st.sampled_from(_DAGS), "run_id": st.sampled_from(_RUNS),
                             "task_id": st.sampled_from(_TASKS)})
_file = st.sampled_from(("/dags/a.py", "/dags/b.py"))
_request = st.sampled_from(("q1", "q2", "q3"))
_dag = st.sampled_from(_DAGS)


def _try_event(cls, **fields):
    return st.builds(lambda ti, n, at: cls(**ti, try_number=n, at=at, **fields), _ti, _tries, _times)


EVENT_STRATEGY = st.one_of(
    st.builds(lambda ti, n, at, e, q: TaskQueued(**ti, try_number=n, executor=e, queue=q, scheduler_id="s1", at=at),
              _ti, _tries, _times, st.sampled_from(("local", "celery")), st.sampled_from(("default", "gpu"))),
    _try_event(TaskLaunched, executor="local", handle="h", scheduler_id="s1"),
    _try_event(TaskStarted, runner_id="w", hostname="host", pid=1),
    _try_event(TaskHeartbeat, runner_id="w"),
    _try_event(TaskSucceeded, runner_id="w"),
    _try_event(TaskFailed, runner_id="w", error="e"),
    _try_event(TaskDeclaredDead, reason="silent", scheduler_id="s1"),
    _try_event(TaskAdopted, handle="h2", by_scheduler="s2", from_scheduler="s1"),
    st.builds(lambda ti, n, at: TaskRetryScheduled(**ti, try_number=n, next_try_number=n + 1,
                                                   not_before=at + 5, at=at), _ti, _tries, _times),
    st.builds(lambda ti, at: TaskUpstreamFailed(**ti, at=at), _ti, _times),
    st.builds(lambda ti, at: ClearTask(**ti, at=at), _ti, _times),
    st.builds(lambda ti, at: MarkTask(**ti, state="success", at=at), _ti, _times),
    st.builds(lambda ti, q, s, at: MarkTask(**ti, state=s, request_id=q, at=at), _ti, _request,
              st.sampled_from(("success", "failed", "skipped", "great")), _times),
    st.builds(lambda ti, q, at: ClearTask(**ti, request_id=q, downstream=True, at=at), _ti, _request, _times),
    st.builds(lambda ti, q, at: KillTask(**ti, request_id=q, at=at), _ti, _request, _times),
    st.builds(lambda d, q, at: TriggerDagRun(dag_id=d, request_id=q, at=at), _dag, _request, _times),
    st.builds(lambda d, q, at: CommandRejected(dag_id=d, request_id=q, command="KillTask", reason="no",
                                               scheduler_id="s1", at=at), _dag, _request, _times),
    st.builds(lambda d, q, at: RequestBackfill(dag_id=d, request_id=q, start_date=at, end_date=at + 3600, at=at),
              _dag, _request, _times),
    st.builds(lambda d, q, at: BackfillPlanned(dag_id=d, backfill_id=q, logical_dates=[at, at + 60],
                                               scheduler_id="s1", at=at), _dag, _request, _times),
    st.builds(lambda d, q, at: CancelBackfill(dag_id=d, backfill_id=q, at=at), _dag, _request, _times),
    st.builds(lambda d, q, s, at: BackfillFinished(dag_id=d, backfill_id=q, state=s, at=at), _dag, _request,
              st.sampled_from(("success", "failed", "cancelled")), _times),
    _try_event(TaskCleared, request_id="q1"),
    _try_event(TaskKillRequested, reason="cleared", scheduler_id="s1"),
    _try_event(TaskKilled, runner_id="w", reason="killed"),
    st.builds(lambda ti, at: TaskSkipped(**ti, reason="upstream skipped", at=at), _ti, _times),
    st.builds(lambda ti, at: TaskRemoved(**ti, reason="gone", at=at), _ti, _times),
    st.builds(lambda d, r, at: DagRunReopened(dag_id=d, run_id=r, request_id="q1", at=at),
              st.sampled_from(_DAGS), st.sampled_from(_RUNS), _times),
    st.builds(lambda d, r, at: DagRunCreated(dag_id=d, run_id=r, logical_date=at, run_type="manual",
                                             dag_fingerprint="f", scheduler_id="s1", at=at),
              st.sampled_from(_DAGS), st.sampled_from(_RUNS), _times),
    st.builds(lambda d, r, s, at: DagRunFinished(dag_id=d, run_id=r, state=s, at=at),
              st.sampled_from(_DAGS), st.sampled_from(_RUNS), st.sampled_from(("success", "failed")), _times),
    st.builds(lambda d, p, at: PauseDag(dag_id=d, paused=p, at=at), st.sampled_from(_DAGS), st.booleans(), _times),
    st.builds(lambda d, at: dag_parsed(d, at), st.sampled_from(_DAGS), _times),
    st.builds(lambda d, at: DagRemoved(dag_id=d, file_path="/dags/etl.py", at=at), st.sampled_from(_DAGS), _times),
    st.builds(lambda f, at: DagFileProcessed(file_path=f, processor_id="p", file_hash="h", dag_ids=["etl"],
                                             duration=0.1, at=at), _file, _times),
    st.builds(lambda f, at: DagParseFailed(file_path=f, processor_id="p", file_hash="h", error="SyntaxError",
                                           at=at), _file, _times),
    st.builds(lambda f, at: DagFileRemoved(file_path=f, at=at), _file, _times),
    st.builds(lambda s, at: SchedulerHeartbeat(scheduler_id=s, hostname="h", pid=1, partitions=[0, 2], at=at),
              st.sampled_from(("s1", "s2")), _times),
    st.builds(lambda s, at: SchedulerStopped(scheduler_id=s, at=at), st.sampled_from(("s1", "s2")), _times),
    st.builds(lambda w, e, q, at: WorkerHeartbeat(worker=w, executor=e, hostname="h", pid=1, queues=q,
                                                  concurrency=4, at=at),
              st.sampled_from(("w1", "w2")), st.sampled_from(("celery", "kubernetes")),
              st.lists(st.sampled_from(("default", "gpu")), max_size=2), _times),
    st.builds(lambda w, at: WorkerStopped(worker=w, executor="celery", at=at), st.sampled_from(("w1", "w2")), _times),
    st.builds(lambda d, at: ("tombstone", d, at), st.sampled_from(_DAGS), _times),
)


@st.composite
def logs(draw, max_size: int = 60) -> list[LogRecord]:
    """A random log: events positioned in their topic partitions, in append order."""
    builder = LogBuilder()
    for item in draw(st.lists(EVENT_STRATEGY, max_size=max_size)):
        if isinstance(item, tuple):
            builder.tombstone(item[1], item[2])
        else:
            builder.add(item)
    return builder.records


def interleavings(records: list[LogRecord], data) -> list[LogRecord]:
    """Another order a reader could see: each partition's order kept, partitions merged at random."""
    queues: dict[tuple[str, int], list[LogRecord]] = defaultdict(list)
    for record in records:
        queues[(record.topic, record.partition)].append(record)
    merged: list[LogRecord] = []
    while queues:
        position = data.draw(st.sampled_from(sorted(queues)))
        merged.append(queues[position].pop(0))
        if not queues[position]:
            del queues[position]
    return merged


def example_run(dag_id: str = "etl", run_id: str = "manual__1", at: float = 1_700_000_000.0) -> list:
    """What a scheduler, runners and the DAG processor write for one run of a 3-task DAG.

    extract succeeds, transform fails once and succeeds on its second try (a late
    heartbeat of try 1 arrives after), load succeeds; the run succeeds. Also a scheduler
    heartbeat, a clean parse of the DAG's file and a broken file.
    """
    events = [dag_parsed(dag_id, at, tasks=("extract", "transform", "load")),
              DagFileProcessed(file_path="/dags/etl.py", processor_id="p1", file_hash="h1", dag_ids=[dag_id],
                               duration=0.2, at=at),
              DagParseFailed(file_path="/dags/broken.py", processor_id="p1", file_hash="h2",
                             error="SyntaxError: invalid syntax", traceback="Traceback ...", at=at),
              SchedulerHeartbeat(scheduler_id="s1", hostname="host", pid=42, partitions=[0, 1, 2], at=at),
              DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=at, run_type="manual", conf_json='{"x":1}',
                            dag_fingerprint="fp", scheduler_id="s1", at=at + 1)]
    events += lifecycle(dag_id, run_id, "extract", 1, at + 2)
    events += lifecycle(dag_id, run_id, "transform", 1, at + 4, outcome="failed")
    events.append(TaskRetryScheduled(dag_id=dag_id, run_id=run_id, task_id="transform", try_number=1,
                                     next_try_number=2, not_before=at + 6, at=at + 5.1))
    events += lifecycle(dag_id, run_id, "transform", 2, at + 6)
    events.append(TaskHeartbeat(dag_id=dag_id, run_id=run_id, task_id="transform", try_number=1,
                                runner_id="runner-1", at=at + 7.5))
    events += lifecycle(dag_id, run_id, "load", 1, at + 8)
    events.append(DagRunFinished(dag_id=dag_id, run_id=run_id, state="success", at=at + 10))
    return events


def operated_run(dag_id: str = "etl", run_id: str = "manual__1", at: float = 1_700_000_050.0) -> list:
    """Operators at work on ``example_run``'s run once it has finished, as the scheduler answers them:
    load is cleared (the run reopens) and its new try is marked success while it runs (stopped
    first); a kill of it is rejected; transform is killed in a third run; a backfill of two dates
    is planned, creates one run and is cancelled; a task removed from the DAG ends as removed."""
    ids = {"dag_id": dag_id, "run_id": run_id}
    load = {**ids, "task_id": "load"}
    reject = {"dag_id": dag_id, "scheduler_id": "s1"}
    third = {"dag_id": dag_id, "run_id": "manual__3", "task_id": "transform", "try_number": 1}
    return [
        ClearTask(**load, request_id="c1", downstream=True, requested_by="cli", at=at),
        DagRunReopened(**ids, request_id="c1", at=at + 0.1),
        TaskCleared(**load, try_number=1, request_id="c1", at=at + 0.1),
        TaskQueued(**load, try_number=2, executor="local", queue="default", scheduler_id="s1", at=at + 0.1),
        TaskStarted(**load, try_number=2, runner_id="w2", hostname="host", pid=9, at=at + 0.5),
        MarkTask(**load, state="success", request_id="m1", requested_by="api", at=at + 1),
        TaskKillRequested(**load, try_number=2, reason="marked success", scheduler_id="s1", at=at + 1.1),
        TaskKilled(**load, try_number=2, runner_id="w2", reason="killed as asked", at=at + 1.5),
        DagRunFinished(**ids, state="success", at=at + 1.6),
        KillTask(**load, request_id="k1", at=at + 2),
        CommandRejected(**reject, request_id="k1", command="KillTask", reason="no running or queued try", at=at + 2),
        TriggerDagRun(dag_id=dag_id, request_id="3", requested_by="api", at=at + 3),
        DagRunCreated(dag_id=dag_id, run_id="manual__3", logical_date=at, run_type="manual", dag_fingerprint="fp",
                      scheduler_id="s1", at=at + 3.1),
        TaskQueued(**third, executor="local", queue="default", scheduler_id="s1", at=at + 3.2),
        TaskStarted(**third, runner_id="w3", hostname="host", pid=10, at=at + 3.3),
        KillTask(**{k: v for k, v in third.items() if k != "try_number"}, request_id="k2", at=at + 4),
        TaskKillRequested(**third, reason="killed by cli", scheduler_id="s1", at=at + 4.1),
        TaskKilled(**third, runner_id="w3", at=at + 4.2),
        TaskRemoved(dag_id=dag_id, run_id="manual__3", task_id="gone", reason="no longer in the DAG", at=at + 4.3),
        TaskUpstreamFailed(dag_id=dag_id, run_id="manual__3", task_id="load", at=at + 4.4),
        DagRunFinished(dag_id=dag_id, run_id="manual__3", state="failed", at=at + 4.5),
        RequestBackfill(dag_id=dag_id, request_id="b1", start_date=0.0, end_date=3600.0, at=at + 5),
        BackfillPlanned(dag_id=dag_id, backfill_id="b1", logical_dates=[0.0, 3600.0], scheduler_id="s1",
                        at=at + 5.1),
        DagRunCreated(dag_id=dag_id, run_id="backfill__1970-01-01T00:00:00+00:00", logical_date=0.0,
                      run_type="backfill", dag_fingerprint="fp", scheduler_id="s1", at=at + 5.2),
        CancelBackfill(dag_id=dag_id, backfill_id="b1", at=at + 6),
        BackfillFinished(dag_id=dag_id, backfill_id="b1", state="cancelled", at=at + 6.1),
    ]
