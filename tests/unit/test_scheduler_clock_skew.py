"""Silence is judged on the broker's clock, never the runner's: a partition's memory folds a runner's
TaskStarted, heartbeats and outcomes with the time the broker appended them (the record's
LogAppendTime), so a runner whose clock is minutes off is neither declared dead while it heartbeats
nor kept alive, or its retry put off, by a clock that runs ahead. Records that carry their
producer's clock (CreateTime: written before the topic was brought to LogAppendTime) keep the
runner's ``at``, as they were judged when live."""

from __future__ import annotations

import pytest

from infra.log import LogRecord
from services.scheduler.core import Evidence, decide, next_wakeup
from services.scheduler.memory import PartitionMemory
from tests.unit.scheduler_fixtures import (
    POLICY,
    RUN,
    created,
    failed,
    heartbeat,
    launched,
    names,
    parsed,
    queued,
    started,
)

T = 1_750_000_000.0  # the broker's and the scheduler's clock (they agree)
TIMEOUT = POLICY.heartbeat_timeout  # 30 s
KEY = ("etl", RUN, "a")


class Log:
    """A partition's memory fed records the way the scheduler reads them."""

    def __init__(self) -> None:
        self.memory = PartitionMemory(0)
        self.offsets = {"dags": 0, "events": 0, "heartbeats": 0}

    def append(self, event, appended_at: float, *, broker_time: bool = True) -> None:
        topic = {"DagParsed": "dags", "TaskHeartbeat": "heartbeats"}.get(type(event).__name__, "events")
        record = LogRecord(topic=f"tock.{topic}", partition=0, offset=self.offsets[topic], key="etl", event=event,
                           timestamp=appended_at, log_append_time=broker_time)
        self.offsets[topic] += 1
        self.memory.fold_record(topic, record)

    def launched_try(self, retries: int = 0) -> Log:
        """A try the scheduler queued and launched at T (its own clock, written in its events)."""
        self.append(parsed(retries=retries), T - 10)
        self.append(created(at=T - 2), T - 2)
        self.append(queued("a", at=T - 1), T - 1)
        self.append(launched("a", at=T), T)
        return self

    def decide(self, now: float) -> list:
        return decide(self.memory.state, now, POLICY, evidence=Evidence(heard_until=now))

    @property
    def instance(self):
        return self.memory.state.runs[("etl", RUN)].tasks["a"]


@pytest.mark.parametrize("skew", [-120.0, -3600.0], ids=["2 min behind", "1 h behind"])
def test_a_runner_whose_clock_is_behind_is_not_silent_while_it_heartbeats(skew):
    log = Log().launched_try()
    log.append(started("a", at=T + 1 + skew), T + 1)
    for beat in range(1, 21):  # every 5 s for 100 s, each appended as it was sent
        log.append(heartbeat("a", at=T + 1 + 5 * beat + skew), T + 1 + 5 * beat)
    assert log.instance.last_heartbeat_at == T + 101
    assert log.decide(T + 101 + TIMEOUT - 1) == []
    assert next_wakeup(log.memory.state, TIMEOUT, now=T + 102) == T + 101 + TIMEOUT


@pytest.mark.parametrize("skew", [120.0, 3600.0], ids=["2 min ahead", "1 h ahead"])
def test_a_runner_whose_clock_is_ahead_does_not_put_its_death_off(skew):
    log = Log().launched_try()
    log.append(started("a", at=T + 1 + skew), T + 1)
    log.append(heartbeat("a", at=T + 6 + skew), T + 6)  # then the runner falls silent
    assert log.decide(T + 6 + TIMEOUT - 1) == []
    assert names(log.decide(T + 6 + TIMEOUT + 1)) == ["TaskDeclaredDead:a", "DagRunFinished"]


def test_a_start_stamped_in_the_future_does_not_keep_a_runner_that_never_heartbeat_alive():
    log = Log().launched_try()
    log.append(started("a", at=T + 3600), T + 1)  # the runner died before its first heartbeat
    assert names(log.decide(T + 1 + TIMEOUT + 1)) == ["TaskDeclaredDead:a", "DagRunFinished"]


@pytest.mark.parametrize("skew", [-3600.0, 3600.0], ids=["1 h behind", "1 h ahead"])
def test_a_retry_waits_its_delay_from_when_the_failure_was_appended(skew):
    log = Log().launched_try(retries=1)
    log.append(started("a", at=T + 1 + skew), T + 1)
    log.append(failed("a", at=T + 20 + skew), T + 20)
    [retry] = log.decide(T + 21)
    assert retry.not_before == T + 20 + 10.0  # retry_delay 10 s from the broker's time, not the runner's


def test_records_that_carry_their_producer_s_clock_keep_the_runner_s_time():
    # Written before tock.heartbeats was LogAppendTime: judged as they were when they were live.
    log = Log().launched_try()
    log.append(started("a", at=T + 1), T + 1, broker_time=False)
    log.append(heartbeat("a", at=T - 500), T + 6, broker_time=False)
    assert log.instance.last_heartbeat_at == T - 500 and log.instance.started_at == T + 1


def test_the_scheduler_s_own_events_keep_their_time():
    # Decisions carry the deciding scheduler's clock: their record time changes nothing.
    log = Log()
    log.append(parsed(), T)
    log.append(created(at=T), T + 50)
    log.append(queued("a", at=T + 1), T + 51)
    log.append(launched("a", at=T + 2), T + 52)
    assert (log.instance.queued_at, log.instance.launched_at) == (T + 1, T + 2)
