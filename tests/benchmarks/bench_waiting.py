"""Waiting and data-aware scheduling (issue 24), through the real broker with the scheduler as a process.

Asset to consumer run: a producer DAG's task updates an asset 20 times (one run after the other); for
each, the time from the producer's TaskSucceeded (written by its runner) to the consumer DAG's
DagRunCreated (the third hop: producer's partition -> asset's -> consumer's, each a transaction).
Pool grant: 50 tasks of one DAG in a pool with room for all (20 slots at a time, so asks also wait):
the time from each try's TaskPoolRequested to its TaskPoolGranted, as written by the two owners, and
the same for the asks that found the pool full (they wait for a release, which is not the grant's cost).
External wait: a DAG whose ExternalTaskSensor waits on a task of another DAG (on another partition) at the
same logical date, 20 times: the time from the awaited task's TaskSucceeded to the ExternalTaskReported the
awaited DAG's owner writes back to the sensor's partition (one decision turn of that owner).
The DAG ids are chosen so that producer, asset, consumer and pool are on different partitions.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from infra.log import KafkaEventLog, partition_for
from schemas import (
    ASSET_TRIGGERED,
    DagRunCreated,
    ExternalTaskReported,
    ExternalWaitAccepted,
    SetPool,
    TaskPoolGranted,
    TaskPoolRequested,
    TaskSucceeded,
    TriggerDagRun,
    wait_id_of,
)
from schemas.routing import asset_partition_key, pool_partition_key
from services.scheduler.trigger import trigger_run
from tests.benchmarks.bench_scheduler import load, start_scheduler, stop, write_dag
from tests.benchmarks.common import bench_settings, figure, spread, timed_run
from tests.benchmarks.w3_takeover import drop_topics
from tests.scenarios.scheduler_support import LogTail, publish_dags

URI = "bench://orders"
EVENTS, POOLED, SLOTS = 20, 50, 20

DAGS = '''
from tock import DAG, Asset, BashTask, ExternalTaskSensor, task

orders = Asset({uri!r})

with DAG({producer!r}) as producer:
    BashTask("land", "true", outlets=[orders])

with DAG({consumer!r}, schedule=[orders]) as consumer:
    BashTask("read", "true")

def noop():
    pass

with DAG({pooled!r}, max_active_tasks=100) as pooled:
    for index in range({count}):
        task(noop, task_id=f"t{{index}}", pool="bench")()

with DAG({waiter!r}, max_active_runs=100) as waiter:
    ExternalTaskSensor(task_id="wait", external_dag_id={producer!r}, external_task_id="land")
'''


def _ids(partitions: int) -> tuple[str, str, str, str]:
    taken = {partition_for(key, partitions) for key in (asset_partition_key(URI), pool_partition_key("bench"))}
    chosen: list[str] = []
    for number in range(100_000):
        dag_id = f"{('producer', 'consumer', 'pooled', 'waiter')[len(chosen)]}_{number}"
        if partition_for(dag_id, partitions) not in taken:
            chosen.append(dag_id)
            taken.add(partition_for(dag_id, partitions))
            if len(chosen) == 4:
                return chosen[0], chosen[1], chosen[2], chosen[3]
    raise RuntimeError("no DAG ids on distinct partitions")


def bench(tmp: Path) -> None:
    settings = bench_settings(tmp / "home", partitions=6, parallelism=64, warm_runners=16)
    producer, consumer, pooled, waiter = _ids(settings.partitions)
    publish_dags(settings, write_dag(tmp, "waiting", DAGS.format(uri=URI, producer=producer, consumer=consumer,
                                                                  pooled=pooled, waiter=waiter, count=POOLED)))
    with KafkaEventLog(settings, client_id="bench-pool") as event_log:
        event_log.append(SetPool(pool="bench", slots=SLOTS, requested_by="bench", at=0.0))
        event_log.flush()
    scheduler, tail = start_scheduler(settings, tmp, "bench"), LogTail(settings)
    try:
        timed_run(settings, tail, producer)  # warm-up: assigned, registered, launcher forked
        tail.wait_for(lambda _events: _asset_runs(tail, consumer), 120, "the warm-up's consumer run")
        print(f"     ({load()} before the asset runs)")
        latencies = []
        for _ in range(EVENTS):
            _seconds, run_id = timed_run(settings, tail, producer)
            (succeeded,) = tail.of_type(TaskSucceeded, run_id=run_id)
            created = tail.wait_for(lambda _events, at=succeeded.at: _consumed_after(tail, consumer, at), 120,
                                    "the consumer's run")
            latencies.append(created.at - succeeded.at)
        figure(f"asset event -> consumer run: TaskSucceeded -> DagRunCreated (median of {EVENTS})",
               statistics.median(latencies) * 1000, "ms")
        print(f"     ({spread([value * 1000 for value in latencies])} ms; 3 hops across 3 partitions; {load()})")
        timed_run(settings, tail, pooled)
        requested = {_key(event): event.at for event in tail.of_type(TaskPoolRequested, dag_id=pooled)}
        granted = {_key(event): event.at for event in tail.of_type(TaskPoolGranted, dag_id=pooled)}
        waits = sorted(granted[key] - at for key, at in requested.items())
        figure(f"pool grant with room: TaskPoolRequested -> TaskPoolGranted (median of first {SLOTS})",
               statistics.median(waits[:SLOTS]) * 1000, "ms")
        print(f"     ({spread([value * 1000 for value in waits[:SLOTS]])} ms; the {POOLED - SLOTS} that found the "
              f"pool full waited median {statistics.median(waits[SLOTS:]) * 1000:.0f} ms for a release; {load()})")
        answers = [_answered_after(settings, tail, producer, waiter, number) for number in range(EVENTS)]
        figure(f"external wait answered: awaited TaskSucceeded -> ExternalTaskReported (median of {EVENTS})",
               statistics.median(answers) * 1000, "ms")
        print(f"     ({spread([value * 1000 for value in answers])} ms; the awaited DAG's partition to the "
              f"sensor's; {load()})")
    finally:
        stop(scheduler)
        tail.close()
        drop_topics(settings)


def _answered_after(settings, tail: LogTail, producer: str, waiter: str, number: int) -> float:
    """The sensor deferred first, then the awaited DAG run at the same logical date: its task's success
    to the answer on the sensor's partition."""
    logical_date = 1_000_000.0 + number * 60
    waiting = trigger_run(settings, waiter, uuid.uuid4().hex, requested_by="bench", logical_date=logical_date)[0]
    wait_id = wait_id_of(waiter, waiting, "wait", -1, 1)
    tail.wait_for(lambda _events: tail.of_type(ExternalWaitAccepted, dag_id=producer, wait_id=wait_id), 120,
                  "the wait to be read")
    awaited = trigger_run(settings, producer, uuid.uuid4().hex, requested_by="bench",
                          logical_date=logical_date)[0]
    (succeeded,) = tail.wait_for(lambda _events: tail.of_type(TaskSucceeded, run_id=awaited), 120, "the awaited task")
    (report,) = tail.wait_for(lambda _events: tail.of_type(ExternalTaskReported, run_id=waiting), 120, "the answer")
    return report.at - succeeded.at


def _key(event) -> tuple[str, str, int]:
    return event.run_id, event.task_id, event.try_number


def _asset_runs(tail: LogTail, consumer: str) -> list[DagRunCreated]:
    return [event for event in tail.of_type(DagRunCreated, dag_id=consumer) if event.run_type == ASSET_TRIGGERED]


def _consumed_after(tail: LogTail, consumer: str, at: float) -> DagRunCreated | None:
    return next((event for event in _asset_runs(tail, consumer) if event.at >= at), None)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        bench(Path(folder))


if __name__ == "__main__":
    main()
    sys.exit(0)
