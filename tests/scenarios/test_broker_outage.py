"""Broker outage: the broker stops for 20 s during a run and starts again.

The services log the outage and keep running; the run completes with no event lost and
no try run twice. Runs against a private broker (own home and ports) so the session's
shared broker is never stopped under other tests.
"""

from __future__ import annotations

import textwrap
import time

import pytest

from infra.broker import LocalKafkaBroker
from infra.settings import load_settings
from schemas import TaskDeclaredDead, TaskQueued, TaskStarted, TaskSucceeded
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, trigger, wait_until_published

PORT, CONTROLLER_PORT = 19392, 19393
OUTAGE_SECONDS = 20

DAG_FILE = textwrap.dedent("""
    import time
    from tock import DAG, task

    with DAG("outage") as dag:
        @task
        def first():
            pass

        @task
        def long():
            time.sleep(30)  # runs through the whole outage

        @task
        def short():
            time.sleep(4)  # finishes while the broker is down: its outcome must wait, not vanish

        @task
        def last():
            pass

        first() >> [long(), short()] >> last()
""")


@pytest.fixture
def private_broker(tmp_path):
    broker = LocalKafkaBroker(load_settings({
        "TOCK_HOME": str(tmp_path / "broker-home"), "TOCK_BROKER_PORT": str(PORT),
        "TOCK_CONTROLLER_PORT": str(CONTROLLER_PORT), "TOCK_BROKER_HEAP": "256M"}))
    broker.start()
    yield broker
    broker.stop()


@pytest.mark.timeout(300)
def test_a_run_survives_a_broker_outage(tmp_path, make_settings, private_broker):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "outage.py").write_text(DAG_FILE)
    settings = make_settings(kafka_bootstrap=private_broker.address, dags_folder=dags,
                             task_heartbeat_seconds=1, task_heartbeat_timeout=60)
    create_topics(settings)
    services = Processes(settings, tmp_path / "logs")
    tail = LogTail(settings)
    try:
        processor = services.start("dag-processor", name="dag-processor")
        scheduler = services.scheduler("outage-test")
        wait_until_published(settings, "outage")
        run_id = trigger(settings, "outage")
        tail.wait_for(lambda _: len(tail.of_type(TaskStarted, run_id=run_id)) >= 3, 60, "long and short to start")

        private_broker.stop()
        time.sleep(OUTAGE_SECONDS)
        assert processor.poll() is None and scheduler.poll() is None, "a service died during the outage"
        private_broker.start()

        finished = tail.run_finished(run_id, 150)
        assert finished.state == "success"
        assert processor.poll() is None and scheduler.poll() is None, "a service died after the outage"
        for kind in (TaskQueued, TaskStarted, TaskSucceeded):
            per_task = sorted((event.task_id, event.try_number) for event in tail.of_type(kind, run_id=run_id))
            assert per_task == [("first", 1), ("last", 1), ("long", 1), ("short", 1)], kind.__name__
        assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
        assert "broker unreachable" in services.log_of("scheduler-outage-test")
    finally:
        tail.close()
        services.close()

