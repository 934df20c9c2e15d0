"""The OpenLineage emitter through the real system (services/lineage): a DAG with a success, a failure and its
retry, and a task that updates an asset, run by real schedulers and runners while two emitters turn the log
into OpenLineage run events, one through the Kafka transport and one through the file transport.

Faults, all for real: the scheduler is killed with -9 while the asset task runs (the next scheduler adopts the
try: a RUNNING event); the file emitter is killed with -9 mid-run and restarted; the Kafka emitter freezes
inside its first transaction after the scheduler's death (fault injection: its offsets sent, not committed;
in practice the one carrying the adoption's RUNNING event), is killed with -9 there and restarted under its
name. Then every state change in the log has exactly one lineage event in the file and
exactly one in the topic (read_committed): none lost, none doubled; both hold the very bytes the core derives
from the log; and every event is valid against the OpenLineage JSON schema (tests/unit/lineage/openlineage_spec).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from confluent_kafka import Consumer, TopicPartition

from infra.log import LogRecord, replay
from infra.log.config import common_config
from schemas import EVENTS, DagRunCreated, DagRunFinished, TaskAdopted, TaskFailed, TaskStarted, TaskSucceeded
from services.lineage.core import LineageConfig
from services.lineage.folding import PartitionLineage
from services.lineage.local_sinks import FileSink, SinkBusy, position_of
from services.lineage.run_events import to_json
from tests.scenarios.scheduler_support import Processes, kill_hard, start_with_dags, trigger, wait_until
from tests.unit.lineage.openlineage_schema import assert_valid

pytestmark = pytest.mark.scenario

DAG_ID = "lineage_demo"
URI = "s3://lake/orders"

DAGS = '''
from tock import DAG, Asset, task

orders = Asset({uri!r})

with DAG({dag_id!r}) as dag:
    @task
    def extract():
        return 1

    @task(retries=1, retry_delay=0)
    def flaky(ti=None):
        if ti.try_number == 1:
            raise RuntimeError("the first try fails")
        return 2

    @task(outlets=[orders])
    def land(outlet_events=None):
        import os, time
        while not os.path.exists({flag!r}):  # the test lets it end once a new scheduler has adopted it
            time.sleep(0.1)
        outlet_events[orders].extra["rows"] = 42
        return "landed"

    first, second, third = extract(), flaky(), land()
    first >> second >> third
'''


def expected_lines(settings, records: list[LogRecord] | None = None) -> list[str]:
    """What the lineage core derives from the records of tock.events (default: all, read now), as the
    transports write it."""
    records = list(replay(settings, EVENTS)) if records is None else records
    partitions = settings.partitions
    folds = {partition: PartitionLineage(partition, LineageConfig()) for partition in range(partitions)}
    lines = []
    for record in sorted(records, key=lambda record: (record.partition, record.offset)):
        lines += [to_json(item) for item in folds[record.partition].apply(record)]
    return lines


def file_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def topic_values(settings, topic: str) -> list[str]:
    """Every committed record of ``topic`` up to its last stable offset (read_committed)."""
    consumer = Consumer({**common_config(settings, "test-lineage"), "group.id": "test-lineage-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        parts = [TopicPartition(topic, partition) for partition in range(settings.partitions)]
        ends = {part.partition: consumer.get_watermark_offsets(part, timeout=30)[1] for part in parts}
        consumer.assign([TopicPartition(topic, partition, 0) for partition in ends if ends[partition] > 0])
        found, done = [], {partition for partition, end in ends.items() if end == 0}
        while len(done) < len(ends):
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:  # end of a partition (its last stable offset)
                done.add(message.partition())
                continue
            found.append(message.value().decode())
        return found
    finally:
        consumer.close()


def _frozen(process) -> bool:
    return psutil.Process(process.pid).status() == psutil.STATUS_STOPPED


def test_every_state_change_is_one_lineage_event_through_kills_of_the_scheduler_and_the_emitters(
        make_settings, system, tmp_path):
    flag, lineage_file, freeze = tmp_path / "go", tmp_path / "lineage" / "openlineage.jsonl", tmp_path / "freeze"
    settings, processes, tail = start_with_dags(
        make_settings, system, tmp_path, DAGS.format(uri=URI, dag_id=DAG_ID, flag=str(flag)),
        scheduler_session_timeout=6, lineage_session_timeout=6, task_heartbeat_timeout=30)
    topic = f"{settings.topic_prefix}tock.lineage"
    file_env = {"TOCK_LINEAGE_TRANSPORT": "file", "TOCK_LINEAGE_FILE": str(lineage_file)}
    kafka = Processes(settings.model_copy(update={"fault_stop_before_commit": freeze}), tmp_path / "logs")
    system["workers"] = kafka  # closed at the end of the test, whatever happens
    files = Processes(settings, tmp_path / "logs", extra_env=file_env)
    system["agents"] = files

    first = processes.scheduler("s1")
    kafka_emitter = kafka.start("lineage", "--name", "k1", name="lineage-k1")
    file_emitter = files.start("lineage", "--name", "f1", name="lineage-f1")
    run_id = trigger(settings, DAG_ID)
    tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=run_id, task_id="land"), 180,
                  "the asset task to start")
    wait_until(lambda: len(file_lines(lineage_file)) >= 5, 60, "the file emitter to emit the run's first events")

    kill_hard(first.pid)  # the scheduler dies while the asset task runs
    first.wait(30)
    kill_hard(file_emitter.pid)  # and the file emitter, mid-run
    file_emitter.wait(30)
    freeze.touch()  # the Kafka emitter stops itself inside its next transaction (events and offsets sent)
    processes.scheduler("s2")
    tail.wait_for(lambda _events: tail.of_type(TaskAdopted, run_id=run_id, task_id="land"), 120,
                  "the next scheduler to adopt the running asset task")
    wait_until(lambda: _frozen(kafka_emitter), 60, "the Kafka emitter to freeze inside its transaction")
    kill_hard(kafka_emitter.pid)
    kafka_emitter.wait(30)
    freeze.unlink()
    kafka.start("lineage", "--name", "k1", name="lineage-k1")  # the same name: its open transaction is aborted
    files.start("lineage", "--name", "f1", name="lineage-f1")

    flag.write_text("go")
    assert tail.run_finished(run_id, 180).state == "success"
    caught_up = lambda: (len(expected_lines(settings))  # noqa: E731
                         <= min(len(file_lines(lineage_file)), len(topic_values(settings, topic))))
    wait_until(caught_up, 120, "both emitters to emit every state change", interval=0.5)
    kafka.close()
    files.close()

    expected = expected_lines(settings)
    in_file, in_topic = file_lines(lineage_file), topic_values(settings, topic)
    assert Counter(in_file) == Counter(expected), "the file holds other events than the log's"
    assert Counter(in_topic) == Counter(expected), "the topic holds other events than the log's"
    for partition in range(settings.partitions):  # the file keeps each partition's order
        mine = [line for line in in_file if position_of(line.encode())[0] == partition]
        assert mine == [line for line in expected if position_of(line.encode())[0] == partition]
    for line in set(expected):
        assert_valid(json.loads(line))
    _every_state_change_once(tail, run_id, [json.loads(line) for line in in_file])
    assert "fault injection" in kafka.log_of("lineage-k1")


def _every_state_change_once(tail, run_id: str, emitted: list[dict]) -> None:
    """Each of the run's state changes in the log has exactly one lineage event, of the expected type."""
    by_source = Counter((doc["run"]["facets"]["tock"]["partition"], doc["run"]["facets"]["tock"]["offset"])
                        for doc in emitted)
    summary = Counter((doc["job"]["name"], doc["run"]["facets"]["tock"]["tryNumber"], doc["eventType"])
                      for doc in emitted)
    adoptions = len(tail.of_type(TaskAdopted, run_id=run_id, task_id="land"))
    assert summary == Counter({
        (DAG_ID, 0, "START"): 1, (DAG_ID, 0, "COMPLETE"): 1,
        (f"{DAG_ID}.extract", 1, "START"): 1, (f"{DAG_ID}.extract", 1, "COMPLETE"): 1,
        (f"{DAG_ID}.flaky", 1, "START"): 1, (f"{DAG_ID}.flaky", 1, "FAIL"): 1,
        (f"{DAG_ID}.flaky", 2, "START"): 1, (f"{DAG_ID}.flaky", 2, "COMPLETE"): 1,
        (f"{DAG_ID}.land", 1, "START"): 1, (f"{DAG_ID}.land", 1, "RUNNING"): adoptions,
        (f"{DAG_ID}.land", 1, "COMPLETE"): 1})
    changes = [*tail.of_type(DagRunCreated, run_id=run_id), *tail.of_type(DagRunFinished, run_id=run_id),
               *tail.of_type(TaskFailed, run_id=run_id), *tail.of_type(TaskSucceeded, run_id=run_id),
               *tail.of_type(TaskAdopted, run_id=run_id)]
    for change in changes:
        record = tail.record_of(change)
        assert by_source[(record.partition, record.offset)] == 1, f"{type(change).__name__} at {record.offset}"
    run_start = next(doc for doc in emitted if doc["job"]["name"] == DAG_ID and doc["eventType"] == "START")
    for doc in emitted:
        if doc["job"]["name"] != DAG_ID:
            assert doc["run"]["facets"]["parent"]["run"]["runId"] == run_start["run"]["runId"]
    (failure,) = [doc for doc in emitted if doc["eventType"] == "FAIL"]
    assert "the first try fails" in failure["run"]["facets"]["errorMessage"]["message"]
    (landed,) = [doc for doc in emitted if doc["job"]["name"] == f"{DAG_ID}.land" and doc["eventType"] == "COMPLETE"]
    assert [(item["namespace"], item["name"]) for item in landed["outputs"]] == [("s3://lake", "orders")]


def test_a_file_sink_cuts_a_line_a_kill_left_unfinished_and_resumes_after_the_last_whole_one(tmp_path):
    path = tmp_path / "lineage.jsonl"
    whole = {"run": {"facets": {"tock": {"partition": 1, "offset": 7, "index": 0}}}}
    path.write_text(json.dumps(whole) + "\n" + '{"run": {"facets": {"tock": {"partition": 1, "off')
    sink = FileSink(path)
    try:
        assert sink.delivered() == {1: (7, 0)}
        assert path.read_text() == json.dumps(whole) + "\n"
        with pytest.raises(SinkBusy, match="another `tock lineage`"):
            FileSink(path)  # one emitter per file
    finally:
        sink.close()


class Receiver(BaseHTTPRequestHandler):
    """An OpenLineage endpoint on loopback that accepts every event and keeps its body."""

    bodies: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        if self.path == "/api/v1/lineage":
            type(self).bodies.append(body)
        self.send_response(201 if self.path == "/api/v1/lineage" else 404)
        self.end_headers()

    def log_message(self, *_args) -> None:
        pass


def test_the_http_transport_delivers_every_state_change_at_least_once_and_repeats_only_identical_bytes(
        make_settings, system, tmp_path):
    flag = tmp_path / "go"
    flag.write_text("go")  # the asset task ends at once here
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Endpoint", (Receiver,), {"bodies": []}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings, processes, tail = start_with_dags(
            make_settings, system, tmp_path, DAGS.format(uri=URI, dag_id=DAG_ID, flag=str(flag)),
            lineage_transport="http", lineage_url=f"http://127.0.0.1:{server.server_address[1]}")
        bodies = server.RequestHandlerClass.bodies
        processes.scheduler("s1")
        emitter = processes.start("lineage", "--name", "h1", name="lineage-h1")
        run_id = trigger(settings, DAG_ID)
        wait_until(lambda: len(bodies) >= 3, 120, "the first events to be accepted")
        kill_hard(emitter.pid)
        emitter.wait(30)
        processes.start("lineage", "--name", "h1", name="lineage-h1")
        assert tail.run_finished(run_id, 180).state == "success"
        wait_until(lambda: set(expected_lines(settings)) <= set(bodies), 120, "every event to be accepted")
        expected = expected_lines(settings)
        received = Counter(bodies)
    finally:
        server.shutdown()
        server.server_close()
    assert set(received) == set(expected)  # none lost, nothing else: the very bytes of the log's events
    assert sum(received.values()) - len(expected) <= 1  # at most the one in flight when the emitter died
    assert (settings.home / "lineage" / "http-h1.json").exists()
    for body in received:
        assert_valid(json.loads(body))
