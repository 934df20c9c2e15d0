"""A partition's memory folds its own decisions when they are read back from tock.events, in their
place in the log, never at commit; until then the partition is unsettled (nothing more is decided
for it). Knowing its own decisions again relies on them surviving the codec unchanged."""

from __future__ import annotations

import pytest

from infra.log import LogRecord
from infra.log.read_back import SETTLE_LIMIT
from schemas import TaskDeclaredDead, TaskKillRequested, decode, encode
from schemas.freeze import sample
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


def running_memory() -> PartitionMemory:
    memory = PartitionMemory(0)
    for offset, event in enumerate([parsed(retries=1), created(), queued("a"), launched("a"), started("a")]):
        memory.fold_record("dags" if offset == 0 else "events", record(event, offset))
    return memory


def test_own_decisions_are_folded_when_read_back_and_the_partition_is_unsettled_until_then():
    memory = running_memory()
    decisions = decide(memory.state, 1000.0, POLICY, evidence=Evidence(1000.0))
    assert isinstance(decisions[0], TaskDeclaredDead)
    memory.committed(decisions, now=1000.0)
    assert memory.state.runs[("etl", "manual__r1")].tasks["a"].state == "running"  # not folded at commit
    assert not memory.settled(1000.0)
    for offset, event in enumerate(decisions, start=10):
        assert memory.fold_record("events", record(decode(encode(event)), offset)) is not None
    assert memory.state.runs[("etl", "manual__r1")].tasks["a"].state == "up_for_retry"
    assert not memory.awaiting and memory.settled(1000.0) and memory.positions["events"] == 10 + len(decisions)


def test_a_record_of_others_before_our_decision_is_folded_first():
    """The race of issue 20 item 5: a kill decided on a queued try whose runner's TaskStarted reached
    the log first. In log order the runner won its claim, so the kill does not end the try."""
    memory = PartitionMemory(0)
    for offset, event in enumerate([parsed(), created(), queued("a")]):
        memory.fold_record("dags" if offset == 0 else "events", record(event, offset))
    kill = TaskKillRequested(dag_id="etl", run_id="manual__r1", task_id="a", try_number=1, reason="killed",
                             scheduler_id=ME, at=5.0)
    memory.committed([kill], now=5.0)
    memory.fold_record("events", record(started("a"), 3))  # written while we decided
    assert not memory.settled(5.0)
    memory.fold_record("events", record(kill, 4))
    instance = memory.state.runs[("etl", "manual__r1")].tasks["a"]
    assert instance.state == "running" and instance.kill_requested and memory.settled(5.0)


def test_decisions_never_read_back_stop_holding_the_partition_after_the_settle_limit(caplog):
    memory = running_memory()
    memory.committed([sample(TaskKillRequested)], now=10.0)
    assert not memory.settled(10.0 + SETTLE_LIMIT)
    assert memory.settled(10.0 + SETTLE_LIMIT + 1) and "not read back" in caplog.text


def test_a_tombstone_on_tock_dags_forgets_the_dag():
    memory = PartitionMemory(0)
    memory.fold_record("dags", record(parsed(), 0, "dags"))
    memory.fold_record("dags", record(None, 1, "dags"))
    assert memory.state.dags == {}
