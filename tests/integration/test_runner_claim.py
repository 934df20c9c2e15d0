"""The claim reader against the real broker: first TaskStarted of a try in log order wins, read
from where the try was queued, for a batch spanning partitions. (Two real runners racing for
one try: tests/scenarios/test_runner_two_hosts.py.)"""

from __future__ import annotations

import threading
import time

import pytest

from infra.log import KafkaEventLog, partition_for
from infra.topics import topic_name
from schemas import EVENTS, TaskQueued, TaskStarted, encode
from services.runner.claim import Claims
from services.runner.claim_reader import ClaimReader

pytestmark = pytest.mark.integration


def other_partition_dag(settings, dag_id: str) -> str:
    home = partition_for(dag_id, settings.partitions)
    return next(name for index in range(100)
                if partition_for(name := f"dag{index}", settings.partitions) != home)


def started(key, runner_id: str) -> TaskStarted:
    dag_id, run_id, task_id, try_number = key
    return TaskStarted(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, runner_id=runner_id,
                       hostname="h", pid=1, at=time.time())


def append_at(event_log: KafkaEventLog, settings, event, timestamp: float) -> None:
    """Append with a given record timestamp (a clock far behind, or long ago)."""
    event_log.producer.produce(topic_name(settings.topic_prefix, EVENTS), encode(event), event.dag_id,
                               partition_for(event.dag_id, settings.partitions), timestamp=int(timestamp * 1000))


def claim(settings, own, queued_at) -> Claims:
    with ClaimReader(settings) as reader:
        reader.warm()
        return reader.claim(own, queued_at)


def test_a_batch_across_partitions_wins_and_loses_each_try_by_its_first_task_started(kafka_settings):
    alpha = ("alpha", "r1", "t", 1)
    beta = (other_partition_dag(kafka_settings, "alpha"), "r1", "t", 1)
    with KafkaEventLog(kafka_settings) as event_log:
        for event in (started(beta, "rival"), started(alpha, "me-a"), started(beta, "me-b"),
                      started(alpha, "late")):
            event_log.append(event)
    claims = claim(kafka_settings, {alpha: "me-a", beta: "me-b"}, {alpha: 0.0, beta: 0.0})
    assert (claims.won, dict(claims.lost)) == ({alpha}, {beta: "rival"})


def test_the_claim_reads_from_where_the_try_was_queued(kafka_settings):
    key = ("alpha", "r1", "t", 1)
    queued_at = time.time()
    with KafkaEventLog(kafka_settings) as event_log:
        append_at(event_log, kafka_settings, started(key, "before-the-queue"), queued_at - 60)
        event_log.append(TaskQueued(dag_id="alpha", run_id="r1", task_id="t", try_number=1, executor="local",
                                    queue="default", scheduler_id="s", at=queued_at))
        # a runner whose clock is far behind still comes after the TaskQueued in the log
        append_at(event_log, kafka_settings, started(key, "me"), queued_at - 3600)
    assert claim(kafka_settings, {key: "me"}, {key: queued_at}).won == {key}
    assert dict(claim(kafka_settings, {key: "me"}, {key: 0.0}).lost) == {key: "before-the-queue"}


def test_the_claim_waits_until_a_task_started_of_the_try_is_readable(kafka_settings):
    key = ("alpha", "r1", "t", 1)
    result: list[Claims] = []
    waiting = threading.Thread(target=lambda: result.append(claim(kafka_settings, {key: "me"}, {key: 0.0})))
    waiting.start()
    waiting.join(1.0)
    assert waiting.is_alive()  # nothing to decide from yet
    with KafkaEventLog(kafka_settings) as event_log:
        event_log.append(started(key, "me"))
    waiting.join(30)
    assert not waiting.is_alive() and result[0].won == {key}
