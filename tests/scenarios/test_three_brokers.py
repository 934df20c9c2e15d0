"""A three-broker cluster (issue 13): topics replicated 3 / min.insync 2, the cluster commands on a
live cluster, and a broker lost mid-run: ``kill -9`` the leader of the partition holding a running
50-task chain; the run completes, each task once, nothing lost or duplicated in the log itself;
the broker restarts and catches up.

One private cluster (own TOCK_HOME, free ports) serves the module; the test that kills a node
runs last. Marked ``apart``: it runs in the second pytest process of infra/scripts/run-tests.sh.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from infra.log.partitioner import partition_for
from infra.topics import SPECS, TopicNames, ensure_topics, topic_name
from schemas import (
    EVENTS,
    DagRunCreated,
    DagRunFinished,
    TaskDeclaredDead,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    decode,
)
from tests.scenarios.cluster_support import (
    cluster_settings,
    dump_batches,
    leader_of,
    partitions_missing_from_isr,
    start_private_cluster,
)
from tests.scenarios.scheduler_support import (
    REPO,
    LogTail,
    Processes,
    create_topics,
    kill_hard,
    publish_dags,
    trigger,
    wait_until,
)

pytestmark = [pytest.mark.scenario, pytest.mark.apart]

TASKS = [f"step_{index:02d}" for index in range(50)]
KILL_AFTER_SUCCEEDED = 4

# Each step records its user code's start in MARKS and sleeps a little, so the chain is still
# running when the leader is killed (no-op hops take ~50 ms: the chain would end in seconds).
CHAIN = r'''
import pathlib
import time

from tock import DAG, task

MARKS = pathlib.Path({marks!r})


def step(name):
    with open(MARKS / (name + ".starts"), "a") as starts:
        starts.write("%f\n" % time.time())
    time.sleep(0.2)


with DAG("broker_loss_chain") as dag:
    previous = None
    for name in {tasks!r}:
        current = task(task_id=name)(step)(name)
        if previous is not None:
            previous >> current
        previous = current
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    broker = start_private_cluster(tmp_path_factory.mktemp("cluster") / "home")
    yield broker
    broker.stop()


def tock(broker, *args: str) -> subprocess.CompletedProcess:
    """The CLI as a user runs it on the cluster's home: the node count comes from what it remembers."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOCK_")}
    env.update({"TOCK_HOME": str(broker.settings.home), "TOCK_BROKER_PORT": str(broker.settings.broker_port),
                "TOCK_BROKER_HEAP": broker.settings.broker_heap})
    return subprocess.run([sys.executable, "-m", "tock_cli", *args], env=env, capture_output=True, text=True,
                          timeout=180, cwd=REPO)


def test_topics_get_three_replicas_and_min_insync_two(cluster, tmp_path):
    settings = cluster_settings(cluster, tmp_path / "home")
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    assert len(ensure_topics(admin, settings.topic_prefix, settings.partitions)) == len(SPECS)
    assert ensure_topics(admin, settings.topic_prefix, settings.partitions) == []  # verified, not recreated
    metadata = admin.list_topics(timeout=10).topics
    for name in TopicNames(settings.topic_prefix).all:
        assert [sorted(partition.replicas) for partition in metadata[name].partitions.values()] == [[1, 2, 3]] * 3
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        assert admin.describe_configs([resource])[resource].result(10)["min.insync.replicas"].value == "2", name


def test_cluster_commands_know_the_node_count_and_refuse_bad_nodes(cluster):
    status = tock(cluster, "broker", "status")
    assert status.returncode == 0, status.stderr
    assert "3-node cluster, 3 of 3 ready" in status.stdout
    assert [line.split(":")[0].strip() for line in status.stdout.splitlines()[1:]] == ["node 1", "node 2", "node 3"]
    for command in (["stop", "--node", "4"], ["start", "--node", "0"]):
        refused = tock(cluster, "broker", *command)
        assert refused.returncode == 1 and "numbered 1..3" in refused.stderr, refused.stderr
    other_count = tock(cluster, "broker", "start", "--nodes", "1")
    assert other_count.returncode == 1 and "was made with 3 node(s), not 1" in other_count.stderr


@pytest.mark.timeout(600)
def test_losing_the_partition_leader_mid_run_loses_and_duplicates_nothing(cluster, tmp_path):
    """Honest "contiguous": the broker writes every offset of a partition once, as a data record
    or a transaction marker (a control record, which no consumer returns). So, on the partition
    holding the run, from Kafka's own dump of the log segments (DumpLogSegments): the batches tile
    [0, high watermark) without gap or overlap; the offsets a read_uncommitted consumer returns are
    exactly the non-control ones (what it skips are the markers); the read_committed offsets are a
    subset, and every offset between two consecutive read_committed ones is a marker or a record of
    an aborted transaction (a decision rolled back when the leader died, decided again later). On
    the read_committed records: each of the run's lifecycle events once per task, one
    TaskSucceeded per task. The restarted broker's copy of the partition then equals the leader's
    batch for batch (offsets, markers, CRCs)."""
    marks, dags = tmp_path / "marks", tmp_path / "dags"
    marks.mkdir()
    dags.mkdir()
    (dags / "chain.py").write_text(CHAIN.format(marks=str(marks), tasks=TASKS))
    settings = cluster_settings(cluster, tmp_path / "home", task_heartbeat_seconds=1, scheduler_session_timeout=10)
    create_topics(settings)
    events_topic = topic_name(settings.topic_prefix, EVENTS)
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    [dag_id] = publish_dags(settings, dags / "chain.py")
    partition = partition_for(dag_id, settings.partitions)
    services, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    began = time.monotonic()
    try:
        scheduler = services.scheduler("cluster-test")
        run_id = trigger(settings, dag_id)
        tail.wait_for(lambda _events: len(tail.of_type(TaskSucceeded, run_id=run_id)) >= KILL_AFTER_SUCCEEDED,
                      120, f"{KILL_AFTER_SUCCEEDED} tasks to succeed")
        victim = leader_of(admin, events_topic, partition)
        kill_hard(cluster.node_status(victim).pid)
        succeeded_at_kill = len(tail.of_type(TaskSucceeded, run_id=run_id))
        assert succeeded_at_kill < len(TASKS), "the chain ended before the kill: nothing was tested"
        killed_after = time.monotonic() - began

        finished = tail.run_finished(run_id, 240)
        run_seconds = time.monotonic() - began
        assert finished.state == "success", services.log_of("scheduler-cluster-test")[-3000:]
        assert scheduler.poll() is None, "the scheduler died"
        assert leader_of(admin, events_topic, partition) != victim
    finally:
        services.close()
        tail.close()
    _assert_each_task_ran_once(tail, run_id, marks)
    _assert_log_whole(cluster, settings, events_topic, partition, run_id, leader_of(admin, events_topic, partition))

    restarted = tock(cluster, "broker", "start", "--node", str(victim))
    assert restarted.returncode == 0, restarted.stderr
    wait_until(lambda: not partitions_missing_from_isr(admin, victim, settings.topic_prefix), 120,
               f"node {victim} back in every ISR", interval=0.5)
    leader = leader_of(admin, events_topic, partition)
    assert _batches_below(cluster, victim, events_topic, partition, settings) == \
        _batches_below(cluster, leader, events_topic, partition, settings)
    ends = sorted(event.at for event in tail.of_type(TaskSucceeded, run_id=run_id))
    hops = [later - earlier for earlier, later in zip(ends, ends[1:], strict=False)]
    print(f"\nkilled node {victim} (leader of {events_topic}[{partition}]) {killed_after:.1f} s after start, "
          f"{succeeded_at_kill} of {len(TASKS)} tasks done; run finished {run_seconds:.1f} s after start; "
          f"between two TaskSucceeded: longest {max(hops):.1f} s, median {statistics.median(hops):.2f} s")


def _assert_each_task_ran_once(tail: LogTail, run_id: str, marks) -> None:
    for kind in (TaskQueued, TaskStarted, TaskSucceeded):
        per_task = sorted((event.task_id, event.try_number) for event in tail.of_type(kind, run_id=run_id))
        assert per_task == [(name, 1) for name in TASKS], kind.__name__
    assert tail.of_type(TaskDeclaredDead, run_id=run_id) == []
    starts = {name: len((marks / f"{name}.starts").read_text().splitlines()) for name in TASKS}
    assert starts == dict.fromkeys(TASKS, 1), "user-code starts per task"


def _assert_log_whole(cluster, settings, topic: str, partition: int, run_id: str, node_id: int) -> None:
    uncommitted = _read_partition(settings, topic, partition, "read_uncommitted")
    committed = _read_partition(settings, topic, partition, "read_committed")
    end = max(uncommitted) + 1
    batches = [batch for batch in dump_batches(cluster, node_id, topic, partition) if batch.base_offset < end]
    assert [batch.base_offset for batch in batches] == [0] + [batch.last_offset + 1 for batch in batches[:-1]], \
        "the log's batches do not tile its offsets"
    markers = {batch.base_offset for batch in batches if batch.control}
    transactional = {offset for batch in batches if batch.transactional and not batch.control
                     for offset in range(batch.base_offset, batch.last_offset + 1)}
    assert set(uncommitted) == set(range(batches[-1].last_offset + 1)) - markers
    assert set(committed) <= set(uncommitted)
    aborted = set(uncommitted) - set(committed)
    assert aborted <= transactional, "a non-transactional record is missing from read_committed"
    ordered = sorted(committed)
    for before, after in zip(ordered, ordered[1:], strict=False):
        assert set(range(before + 1, after)) <= markers | aborted, f"offsets between {before} and {after}"
    events = [decode(value) for value in committed.values()]
    lifecycle = Counter((type(event).__name__, event.task_id, event.try_number) for event in events
                        if getattr(event, "run_id", None) == run_id and hasattr(event, "task_id")
                        and isinstance(event, (TaskQueued, TaskStarted, TaskSucceeded)))
    assert lifecycle == Counter({(kind, name, 1): 1 for kind in ("TaskQueued", "TaskStarted", "TaskSucceeded")
                                 for name in TASKS})
    for kind in (DagRunCreated, DagRunFinished):
        assert sum(isinstance(event, kind) and event.run_id == run_id for event in events) == 1, kind.__name__
    print(f"\n{topic}[{partition}]: {len(committed)} committed records, {len(aborted)} aborted, "
          f"{len(markers)} markers, offsets 0..{end - 1}")


def _read_partition(settings, topic: str, partition: int, isolation: str) -> dict[int, bytes]:
    """offset -> value of every record a consumer with ``isolation`` returns, up to the partition's end."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": f"check-{isolation}",
                         "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    records, deadline = {}, time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    return records
                raise AssertionError(f"reading {topic}[{partition}]: {message.error()}")
            assert message.offset() not in records, f"offset {message.offset()} read twice"
            records[message.offset()] = message.value()
    finally:
        consumer.close()
    raise AssertionError(f"{topic}[{partition}] ({isolation}) was not read to its end within 60 s")


def _batches_below(cluster, node_id: int, topic: str, partition: int, settings) -> list:
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "check-end"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()
    return [batch for batch in dump_batches(cluster, node_id, topic, partition) if batch.base_offset < high]
