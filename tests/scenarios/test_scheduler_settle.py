"""Scenario: a takeover waits out a transaction left open in the partition, and a takeover that
cannot complete is retried with backoff instead of stopping the scheduler.

A transactional producer (standing for a previous owner frozen inside its transaction)
holds a transaction open on the DAG's partition of tock.events. A new scheduler must not
decide anything for that partition while the transaction may still commit; once it is
resolved, the scheduler takes the partition over and the run completes.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from infra.log import partition_for
from infra.topics import topic_name
from schemas import EVENTS, PauseDag, encode
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, publish_dags, trigger

pytestmark = pytest.mark.scenario

DAG_FILE = '''
from tock import DAG, BashTask

with DAG("held", retries=0) as dag:
    BashTask("only", "echo ran")
'''


def open_transaction(settings, dag_id: str) -> Producer:
    """A transaction left open on the DAG's partition of tock.events (what a frozen owner leaves)."""
    producer = Producer({"bootstrap.servers": settings.bootstrap, "transactional.id": f"frozen-{time.time_ns()}",
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    record = encode(PauseDag(dag_id=dag_id, paused=False, requested_by="frozen owner", at=time.time()))
    producer.produce(topic_name(settings.topic_prefix, EVENTS), record, dag_id,
                     partition_for(dag_id, settings.partitions))
    producer.flush(30)
    return producer


@pytest.mark.timeout(240)
def test_takeover_waits_for_an_open_transaction_and_retries_until_it_settles(make_settings, tmp_path):
    settings = make_settings(scheduler_session_timeout=6, task_heartbeat_seconds=0.5, task_heartbeat_timeout=5)
    create_topics(settings)
    path = tmp_path / "held.py"
    path.write_text(DAG_FILE)
    publish_dags(settings, path)
    frozen = open_transaction(settings, "held")
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        scheduler = processes.scheduler("patient")
        run_id = trigger(settings, "held")
        # The takeover's wait (2 x session timeout + 10 s) runs out while the transaction stays open:
        deadline = time.monotonic() + 90
        while "retrying in" not in processes.log_of("scheduler-patient"):
            assert time.monotonic() < deadline, "the takeover never gave up waiting: " + processes.log_of(
                "scheduler-patient")[-2000:]
            assert scheduler.poll() is None, "the scheduler died instead of retrying its takeover"
            time.sleep(0.2)
        assert "assigned partitions" not in processes.log_of("scheduler-patient"), \
            "took the partitions over while a transaction in them could still commit"
        frozen.commit_transaction(30)
        finished = tail.run_finished(run_id, 120)
    finally:
        processes.close()
        tail.close()
    assert finished.state == "success", " ".join(type(event).__name__ for event in tail.events)
    log = processes.log_of("scheduler-patient")
    assert "taking over partitions" in log and "assigned partitions" in log
