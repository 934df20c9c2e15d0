"""Scenario: poisoned DAG definitions in tock.dags (a schedule that never fires, a start on the calendar's
first moment, @yearly from 9999-12-31) and a backfill running past year 9999, in the partition of a
healthy DAG. The real scheduler keeps running, refuses the backfill naming why, runs the healthy DAG
to success, and so does the next scheduler that takes the partition over (the records stay)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest

from schemas import CommandRejected, DagDefinition, DagParsed, RequestBackfill, TaskDefinition
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, publish_dags, trigger
from tests.shared_log import shared_event_log

pytestmark = pytest.mark.scenario


def moment(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


POISONS = {"never_fires": {"schedule": "0 0 30 2 *"},
           "from_year_one": {"schedule": "@daily", "start_date": moment(1, 1, 1)},
           "yearly_from_9999": {"schedule": "@yearly", "start_date": moment(9999, 12, 31)},
           "yearly": {"schedule": "@yearly", "start_date": moment(2000, 1, 1)}}


def definition(dag_id: str, schedule: str | None = None, start_date: float | None = None) -> DagParsed:
    """A DAG as a DAG processor (an older one: today's SDK refuses the poisons) published it."""
    dag = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", schedule=schedule, start_date=start_date,
                        tasks=[TaskDefinition(task_id="a", kind="bash", command="true")])
    return DagParsed(dag_id=dag_id, file_path=dag.file_path, fingerprint=f"fp-{dag_id}", definition=dag,
                     at=time.time())


@pytest.fixture
def settings(make_settings):
    settings = make_settings(partitions=1, task_heartbeat_seconds=0.5, scheduler_session_timeout=6)
    create_topics(settings)
    return settings


def test_poisoned_definitions_and_backfill_stop_neither_the_scheduler_nor_its_successor(settings, tmp_path):
    event_log = shared_event_log(settings)
    for dag_id, fields in POISONS.items():
        event_log.append(definition(dag_id, **fields))
    healthy = tmp_path / "healthy.py"  # the runner reads its task from the file
    healthy.write_text("from tock import DAG, BashTask\nwith DAG('healthy'):\n    BashTask('a', 'true')\n")
    assert publish_dags(settings, healthy) == ["healthy"]
    backfill = uuid.uuid4().hex
    event_log.append(RequestBackfill(dag_id="yearly", request_id=backfill, start_date=moment(9999, 6, 1),
                                     end_date=moment(9999, 12, 29), requested_by="test", at=time.time()))
    event_log.flush()
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        first = processes.scheduler("s1")
        run_id = trigger(settings, "healthy")
        finished = tail.run_finished(run_id, 90)
        assert finished.state == "success", processes.log_of("scheduler-s1")
        rejected = tail.wait_for(lambda _events: tail.of_type(CommandRejected, request_id=backfill), 30,
                                 "the backfill past year 9999 to be refused")
        assert "past the calendar" in rejected[0].reason
        assert first.poll() is None, processes.log_of("scheduler-s1")

        processes.close()  # the successor replays the same poisoned records from the start
        successor = processes.scheduler("s2")
        again = trigger(settings, "healthy")
        assert tail.run_finished(again, 90).state == "success", processes.log_of("scheduler-s2")
        assert successor.poll() is None, processes.log_of("scheduler-s2")
    finally:
        processes.close()
        tail.close()
    assert len(tail.of_type(CommandRejected, request_id=backfill)) == 1
    assert "Traceback" not in processes.log_of("scheduler-s1") + processes.log_of("scheduler-s2")
