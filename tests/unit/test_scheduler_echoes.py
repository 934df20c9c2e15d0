"""A partition's memory folds its own committed decisions at once and skips their copies read back
from tock.events; that relies on decisions surviving the codec unchanged."""

from __future__ import annotations

import pytest

from infra.log import LogRecord
from schemas import TaskDeclaredDead, decode, encode
from services.scheduler.core import Evidence, decide, decide_adoption
from services.scheduler.memory import PartitionMemory
from tests.unit.scheduler_fixtures import ME, POLICY, created, launched, parsed, queued, started, state_of


def record(event, offset: int, topic: str = "events") -> LogRecord:
    return LogRecord(topic=f"tock.{topic}", partition=0, offset=offset, key="etl", event=event, timestamp=0.0)


def every_kind_of_decision() -> list:
    running = state_of(parsed(retries=1), created(), queued("a", owner="old"), launched("a", owner="old"),
                       started("a"))
    dead = decide(running, now=1000.0, policy=POLICY, evidence=Evidence(1000.0))
    adopted = decide_adoption(running, 9.0, ME, {("etl", "manual__r1", "a"): True})
    return decide(state_of(parsed(), created()), 7.0, POLICY) + dead + adopted


@pytest.mark.parametrize("decision", every_kind_of_decision(), ids=lambda event: type(event).__name__)
def test_decisions_read_back_equal_what_was_committed(decision):
    assert decode(encode(decision)) == decision


def test_own_decisions_are_folded_once_and_their_echo_skipped():
    memory = PartitionMemory(0)
    for offset, event in enumerate([parsed(retries=1), created(), queued("a"), launched("a"), started("a")]):
        memory.fold_record("dags" if offset == 0 else "events", record(event, offset))
    decisions = decide(memory.state, 1000.0, POLICY, evidence=Evidence(1000.0))
    memory.apply_decisions(decisions)
    assert memory.state.runs[("etl", "manual__r1")].tasks["a"].state == "up_for_retry"
    for offset, event in enumerate(decisions, start=10):
        assert memory.fold_record("events", record(decode(encode(event)), offset)) is None
    assert not memory.echoes and memory.positions["events"] == 10 + len(decisions)
    assert isinstance(decisions[0], TaskDeclaredDead)


def test_a_tombstone_on_tock_dags_forgets_the_dag():
    memory = PartitionMemory(0)
    memory.fold_record("dags", record(parsed(), 0, "dags"))
    memory.fold_record("dags", record(None, 1, "dags"))
    assert memory.state.dags == {}
