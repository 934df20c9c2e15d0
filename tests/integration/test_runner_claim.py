"""The claim reader against the real broker: the first TaskStarted (or TaskKillRequested) of a try in
log order decides it, read from where the try was queued, for a batch spanning partitions; then
it watches the tries won for kill requests, read committed, without waiting. (Two real runners
racing for one try: tests/scenarios/test_runner_two_hosts.py.)"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Producer

from infra.log import KafkaEventLog, partition_for
from infra.topics import topic_name
from schemas import EVENTS, TaskKillRequested, TaskQueued, TaskStarted, encode
from services.runner.claim_reader import ClaimReader
from services.runner.core.claim import Claims

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


def task_queued(key, at: float) -> TaskQueued:
    dag_id, run_id, task_id, try_number = key
    return TaskQueued(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, executor="local",
                      queue="default", scheduler_id="s", at=at)


def test_the_claim_reads_from_where_the_try_was_queued(kafka_settings):
    key = ("alpha", "r1", "t", 1)
    with KafkaEventLog(kafka_settings) as event_log:
        event_log.append(started(key, "before-the-queue"))
        event_log.flush()
        time.sleep(1.5)  # appended more than the claim's first margin (1 s) before the try was queued
        queued_at = time.time()
        event_log.append(task_queued(key, queued_at))
        # a runner whose clock is far behind still comes after the TaskQueued in the log
        append_at(event_log, kafka_settings, started(key, "me"), queued_at - 3600)
    assert claim(kafka_settings, {key: "me"}, {key: queued_at}).won == {key}
    assert dict(claim(kafka_settings, {key: "me"}, {key: 0.0}).lost) == {key: "before-the-queue"}


def test_a_scheduler_clock_ahead_of_the_broker_s_does_not_hide_the_first_task_started(kafka_settings):
    # tock.events is stamped by the broker (LogAppendTime). A scheduler 2.5 s ahead of it writes a
    # queued_at the broker's clock reaches only 2.5 s after the TaskQueued was appended: looked up by
    # time, the try's partition "begins" past its TaskQueued and the rival's TaskStarted.
    key = ("alpha", "r1", "t", 1)
    queued_at = time.time() + 2.5
    with KafkaEventLog(kafka_settings) as event_log:
        event_log.append(task_queued(key, queued_at))
        event_log.append(started(key, "rival"))
        event_log.flush()
        time.sleep(2.5)
        event_log.append(started(key, "me"))  # a second launch of the try (a redelivered Celery message)
    claims = claim(kafka_settings, {key: "me"}, {key: queued_at})
    assert (claims.won, dict(claims.lost)) == (frozenset(), {key: "rival"})


def test_a_try_whose_partition_holds_nothing_since_its_queued_at_is_read_from_further_back(kafka_settings):
    # The same scheduler, its runner's claim looked up before anything was appended after queued_at - 1 s.
    key = ("alpha", "r1", "t", 1)
    queued_at = time.time() + 600
    with KafkaEventLog(kafka_settings) as event_log:
        for event in (task_queued(key, queued_at), started(key, "rival"), started(key, "me")):
            event_log.append(event)
    assert dict(claim(kafka_settings, {key: "me"}, {key: queued_at}).lost) == {key: "rival"}


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


def kill_requested(key, reason: str) -> TaskKillRequested:
    dag_id, run_id, task_id, try_number = key
    return TaskKillRequested(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, reason=reason,
                             scheduler_id="s1", at=time.time())


def test_a_try_whose_kill_request_comes_before_any_task_started_is_nobody_s(kafka_settings):
    key = ("alpha", "r1", "t", 1)
    with KafkaEventLog(kafka_settings) as event_log:
        for event in (kill_requested(key, "cleared"), started(key, "me")):
            event_log.append(event)
    claims = claim(kafka_settings, {key: "me"}, {key: 0.0})
    assert (claims.won, dict(claims.lost), dict(claims.killed)) == (frozenset(), {}, {key: "cleared"})


def test_after_the_claim_the_reader_returns_the_kill_requests_of_the_tries_won_without_waiting(kafka_settings):
    ours, other_try, lost = ("alpha", "r1", "t", 1), ("alpha", "r1", "t", 2), ("alpha", "r1", "u", 1)
    with KafkaEventLog(kafka_settings) as event_log, ClaimReader(kafka_settings) as reader:
        for event in (started(ours, "me"), started(lost, "rival"), started(lost, "me-u")):
            event_log.append(event)
        claims = reader.claim({ours: "me", lost: "me-u"}, {ours: 0.0, lost: 0.0})
        assert (claims.won, dict(claims.lost)) == ({ours}, {lost: "rival"})
        assert reader.kill_requests() == {}
        for event in (kill_requested(other_try, "another try"), kill_requested(lost, "not ours"),
                      kill_requested(ours, "cleared"), kill_requested(ours, "killed again")):
            event_log.append(event)
        event_log.flush()
        asked = time.monotonic()
        found = wait_for(reader.kill_requests, 10, "the kill request")
        assert found == {ours: "cleared"}
        assert time.monotonic() - asked < 3.0
        calls = time.monotonic()
        for _ in range(100):
            reader.kill_requests()
        assert time.monotonic() - calls < 0.5  # each call only looks at what was fetched already
        reader.stop_watching()
        assert reader.kill_requests() == {}


def test_a_kill_request_read_with_the_claim_is_returned_at_once(kafka_settings):
    key = ("alpha", "r1", "t", 1)
    with KafkaEventLog(kafka_settings) as event_log, ClaimReader(kafka_settings) as reader:
        for event in (started(key, "me"), kill_requested(key, "cleared")):
            event_log.append(event)
        event_log.flush()
        time.sleep(0.2)  # both readable: the claim's read takes both
        assert reader.claim({key: "me"}, {key: 0.0}).won == {key}
        assert wait_for(reader.kill_requests, 5, "the kill request") == {key: "cleared"}


def test_a_kill_request_in_an_open_transaction_is_not_obeyed_until_it_commits(kafka_settings):
    key = ("alpha", "r1", "t", 1)
    scheduler = Producer({"bootstrap.servers": kafka_settings.bootstrap, "linger.ms": 0,
                          "transactional.id": f"test-scheduler-{uuid.uuid4().hex}"})
    scheduler.init_transactions(30)
    with KafkaEventLog(kafka_settings) as event_log, ClaimReader(kafka_settings) as reader:
        event_log.append(started(key, "me"))
        assert reader.claim({key: "me"}, {key: 0.0}).won == {key}
        scheduler.begin_transaction()
        event = kill_requested(key, "cleared")
        scheduler.produce(topic_name(kafka_settings.topic_prefix, EVENTS), encode(event), "alpha",
                          partition_for("alpha", kafka_settings.partitions))
        scheduler.flush(10)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert reader.kill_requests() == {}
            time.sleep(0.05)
        scheduler.commit_transaction(30)
        assert wait_for(reader.kill_requests, 10, "the committed kill request") == {key: "cleared"}


def wait_for(read, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (found := read()):
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.02)
    return dict(found)


def appended_offsets(settings, events) -> list[int]:
    """Append the events in order (by a plain producer: Tock's reports only failures); the offset of each."""
    producer = Producer({"bootstrap.servers": settings.bootstrap, "linger.ms": 0, "enable.idempotence": True})
    offsets: dict[int, int] = {}
    for index, event in enumerate(events):
        producer.produce(topic_name(settings.topic_prefix, EVENTS), encode(event), event.dag_id,
                         partition_for(event.dag_id, settings.partitions),
                         on_delivery=lambda error, message, index=index: offsets.__setitem__(
                             index, -1 if error else message.offset()))
    assert producer.flush(30) == 0
    return [offsets[index] for index in range(len(events))]


def test_from_its_task_queued_offset_the_claim_reads_from_exactly_there(kafka_settings):
    # A record of the try before its TaskQueued cannot be (runners are launched after it is committed):
    # one put there shows where the read began. By offset, at the TaskQueued; by time, before it.
    key = ("alpha", "r1", "t", 1)
    others = [task_queued(("alpha", "r1", f"other{index}", 1), time.time()) for index in range(50)]
    offsets = appended_offsets(kafka_settings, [*others[:25], started(key, "before-the-queue"),
                                                task_queued(key, time.time()), *others[25:], started(key, "me")])
    with ClaimReader(kafka_settings) as reader:
        claims = reader.claim({key: "me"}, {key: time.time()}, queued_offsets={key: offsets[26]})
    assert claims.won == {key} and claims.queued[key].task_id == "t"
    assert dict(claim(kafka_settings, {key: "me"}, {key: 0.0}).lost) == {key: "before-the-queue"}


def test_a_partition_with_a_try_of_unknown_offset_is_read_by_time_for_all_its_tries(kafka_settings):
    known, unknown = ("alpha", "r1", "t", 1), ("alpha", "r1", "u", 1)
    offsets = appended_offsets(kafka_settings, [started(unknown, "rival"), task_queued(unknown, time.time()),
                                                task_queued(known, time.time()), started(known, "me"),
                                                started(unknown, "me-u")])
    with ClaimReader(kafka_settings) as reader:
        claims = reader.claim({known: "me", unknown: "me-u"}, {known: 0.0, unknown: 0.0},
                              queued_offsets={known: offsets[2], unknown: -1})
    assert (claims.won, dict(claims.lost)) == ({known}, {unknown: "rival"})
