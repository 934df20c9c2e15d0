"""A try's outcome is never dropped: a runner waits for the broker however long, heartbeating the try
meanwhile; a runner killed before the acknowledgement leaves its outcome in the spool, and the next
runner on the host resends it exactly as written.

Real `tock run-task` processes against a private broker (own home and ports) that the tests stop
and start, so the session's shared broker is never stopped under other tests.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from infra.broker import LocalKafkaBroker
from infra.log import EventReader, partition_for, replay
from infra.settings import load_settings
from infra.topics import topic_name
from schemas import EVENTS, HEARTBEATS, TaskHeartbeat, TaskSucceeded, decode
from tests.scenarios.scheduler_support import REPO, create_topics, environment, free_port, wait_until

pytestmark = pytest.mark.scenario

OUTAGE_SECONDS = 3  # the fault's length, not a wait for something to happen

DAG_FILE = '''
from tock import DAG, BashTask

with DAG("spooled") as dag:
    BashTask("waits", 'echo started; while [ ! -e {go} ]; do sleep 0.05; done')
    BashTask("noop", "true")
'''


@pytest.fixture(scope="module")
def private_broker(tmp_path_factory):
    port = free_port()
    broker = LocalKafkaBroker(load_settings({
        "TOCK_HOME": str(tmp_path_factory.mktemp("broker-home")), "TOCK_BROKER_PORT": str(port),
        "TOCK_CONTROLLER_PORT": str(free_port(port)), "TOCK_BROKER_HEAP": "256M"}))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def setup(make_settings, private_broker, tmp_path):
    settings = make_settings(kafka_bootstrap=private_broker.address, task_heartbeat_seconds=0.2)
    create_topics(settings)
    (tmp_path / "spooled.py").write_text(DAG_FILE.format(go=tmp_path / "go"))
    return settings, tmp_path


def run_task(settings, tmp_path, task_id: str, run_id: str) -> subprocess.Popen:
    with open(tmp_path / f"{run_id}-{task_id}.log", "ab") as output:
        return subprocess.Popen([sys.executable, "-m", "tock_cli", "run-task", "spooled", run_id, task_id, "1",
                                 "--dag-file", str(tmp_path / "spooled.py")],
                                env=environment(settings), cwd=REPO, stdout=output, stderr=subprocess.STDOUT)



def user_code_started(settings, run_id: str) -> bool:
    log = settings.home / "tries" / "spooled" / run_id / "waits" / "1.log"
    return log.exists() and "started" in log.read_text()


def spooled(settings) -> list:
    folder = settings.home / "spool"
    return sorted(folder.glob("*.spool")) if folder.is_dir() else []


def raw_values(settings, dag_id: str) -> list[bytes]:
    """The record values of tock.events in the DAG's partition, as the broker holds them."""
    topic, partition = topic_name(settings.topic_prefix, EVENTS), partition_for(dag_id, settings.partitions)
    with EventReader(settings, [], client_id="test-raw") as reader:
        high = reader.watermarks(topic, partition)[1]
        reader.consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        values: list[bytes] = []

        def read_all() -> bool:
            values.extend(message.value() for message in reader.consumer.consume(100, 0.2) if not message.error())
            return len(values) >= high

        wait_until(read_all, 30, "the partition's records")
        return values


def test_the_outcome_of_a_runner_killed_during_an_outage_is_resent_by_the_next_runner(setup, private_broker):
    settings, tmp_path = setup
    first = run_task(settings, tmp_path, "waits", "r1")
    wait_until(lambda: user_code_started(settings, "r1"), 60, "the user code to start")
    private_broker.stop()
    (tmp_path / "go").touch()
    [spool_file] = wait_until(lambda: spooled(settings), 30, "the outcome to be spooled")
    assert first.poll() is None  # waiting for the broker, not giving up
    value = base64.b64decode(json.loads(spool_file.read_text())["value"])
    first.kill()
    first.wait()
    private_broker.start()
    later = run_task(settings, tmp_path, "noop", "r2")
    assert later.wait(120) == 0
    assert spooled(settings) == []
    succeeded = [decode(record) for record in raw_values(settings, "spooled") if record == value]
    assert [(event.run_id, event.task_id, type(event)) for event in succeeded] == [("r1", "waits", TaskSucceeded)]
    assert sorted((event.run_id, event.task_id) for event in (record.event for record in replay(settings, EVENTS))
                  if isinstance(event, TaskSucceeded)) == [("r1", "waits"), ("r2", "noop")]


def test_a_runner_heartbeats_through_an_outage_and_delivers_its_outcome_after_it(setup, private_broker):
    settings, tmp_path = setup
    runner = run_task(settings, tmp_path, "waits", "r3")
    wait_until(lambda: user_code_started(settings, "r3"), 60, "the user code to start")
    private_broker.stop()
    (tmp_path / "go").touch()
    wait_until(lambda: spooled(settings), 30, "the outcome to be spooled")
    time.sleep(OUTAGE_SECONDS)
    assert runner.poll() is None
    private_broker.start()
    assert runner.wait(120) == 0
    assert spooled(settings) == []
    [succeeded] = [record.event for record in replay(settings, EVENTS) if isinstance(record.event, TaskSucceeded)]
    beats = [record.event for record in replay(settings, HEARTBEATS) if isinstance(record.event, TaskHeartbeat)]
    pending_beats = [beat for beat in beats if beat.at > succeeded.at]
    assert len(pending_beats) >= OUTAGE_SECONDS  # every 0.2 s while its outcome waited for the broker
    assert {beat.runner_id for beat in beats} == {succeeded.runner_id}
