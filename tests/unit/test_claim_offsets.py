"""Where a runner's claim starts reading when the scheduler handed it the offset of each try's TaskQueued
(services/runner/claim_reader.py exact_starts), how the offset travels to the runner (the try message, a
pod's command) and how the scheduler's memory learns it from the records it folds."""

from __future__ import annotations

from infra.executors import build_executors
from infra.executors.kubernetes import _command
from infra.executors.messages import TryMessage
from infra.executors.requests import TryRequest
from infra.log import partition_for
from infra.settings import Settings
from schemas import EVENTS, TaskLaunched, TaskQueued
from services.runner import local_launcher_command
from services.runner.claim_reader import exact_starts
from services.scheduler.launching import Launcher
from services.scheduler.memory import PartitionMemory
from tests.unit.scheduler_fixtures import created, log_record, parsed
from tests.unit.scheduler_fixtures import queued as scheduler_queued

PARTITIONS = 12


def other_partition_dag(dag_id: str) -> str:
    return next(name for index in range(100)
                if partition_for(name := f"dag{index}", PARTITIONS) != partition_for(dag_id, PARTITIONS))


def test_a_partition_starts_at_its_earliest_task_queued_offset_when_every_try_of_it_has_one():
    beta = other_partition_dag("alpha")
    tries = [("alpha", "r", "a", 1), ("alpha", "r", "b", 1), (beta, "r", "c", 1)]
    assert exact_starts(tries, {tries[0]: 40, tries[1]: 17, tries[2]: 5}, PARTITIONS) == {
        partition_for("alpha", PARTITIONS): 17, partition_for(beta, PARTITIONS): 5}


def test_a_partition_with_a_try_of_unknown_offset_has_no_exact_start():
    beta = other_partition_dag("alpha")
    tries = [("alpha", "r", "a", 1), ("alpha", "r", "b", 1), (beta, "r", "c", 1)]
    assert exact_starts(tries, {tries[0]: 40, tries[2]: 5}, PARTITIONS) == {partition_for(beta, PARTITIONS): 5}
    assert exact_starts(tries, {}, PARTITIONS) == {}


def request(**changes) -> TryRequest:
    fields = {"dag_id": "d", "run_id": "r", "task_id": "t", "try_number": 2, "dag_file": "/dags/d.py",
              "queued_at": 12.5} | changes
    return TryRequest(**fields)


def test_the_offset_travels_in_the_try_message_and_an_unknown_one_is_left_out_as_before():
    known = TryMessage(request(queued_offset=1234), "local", "default")
    assert TryMessage.from_json(known.to_json()).request.queued_offset == 1234
    unknown = TryMessage(request(), "local", "default")
    assert "queued_offset" not in unknown.to_dict()["try"]
    assert TryMessage.from_json(unknown.to_json()).request.queued_offset == -1


def test_a_pod_s_runner_gets_the_offset_as_an_argument_when_it_is_known():
    assert _command(request(queued_offset=77), "default")[-2:] == ["--queued-offset", "77"]
    assert "--queued-offset" not in _command(request(), "default")


def queued(task_id: str, try_number: int, map_index: int = -1) -> TaskQueued:
    return TaskQueued(dag_id="d", run_id="r", task_id=task_id, map_index=map_index, try_number=try_number,
                      executor="local", queue="default", scheduler_id="s", at=1.0)


def launched(task_id: str, try_number: int) -> TaskLaunched:
    return TaskLaunched(dag_id="d", run_id="r", task_id=task_id, try_number=try_number, executor="local",
                        handle="1@h:1", scheduler_id="s", at=2.0)


def test_the_memory_knows_the_offset_of_each_try_queued_and_not_launched_yet():
    memory = PartitionMemory(0)
    memory.fold_record(EVENTS, log_record(queued("t", 1), 10))
    memory.fold_record(EVENTS, log_record(queued("m", 1, map_index=3), 11))
    assert memory.queued_offset(("d", "r", "t"), 1) == 10
    assert memory.queued_offset(("d", "r", "m|3"), 1) == 11
    assert memory.queued_offset(("d", "r", "t"), 2) == -1  # another try of it: not this offset
    memory.fold_record(EVENTS, log_record(launched("t", 1), 12))
    assert memory.queued_offset(("d", "r", "t"), 1) == -1
    memory.fold_record(EVENTS, log_record(queued("t", 2), 20))
    assert memory.queued_offset(("d", "r", "t"), 2) == 20


def test_the_scheduler_s_launch_of_a_try_carries_the_offset_of_the_task_queued_it_read():
    settings = Settings(kafka_bootstrap="kafka:9092", topic_prefix="offsets.", executors="local")
    executors = build_executors(settings, local_launcher=local_launcher_command())
    try:
        launcher = Launcher(executors, settings.executor_parallelism, "s1")
        memory = PartitionMemory(0)
        for offset, event in enumerate([parsed("etl", {"a": []}), created("etl"), scheduler_queued("a")]):
            memory.fold_record(EVENTS, log_record(event, offset))
        launch = launcher._prepare(memory, ("etl", "manual__r1", "a"))
        assert launch is not None and launch.request.queued_offset == 2
    finally:
        for executor in executors.values():
            executor.close()


def test_the_memory_keeps_the_offsets_of_tries_waiting_for_a_launch_and_forgets_those_that_never_get_one():
    """A try queued and then cleared, removed or ended without a launch gets no TaskLaunched: its note goes
    when the notes outnumber the tries waiting (twice over, plus PRUNE_SLACK), so they stay bounded."""
    from services.scheduler.memory import PRUNE_SLACK

    width = 3 * PRUNE_SLACK
    memory = PartitionMemory(0)
    edges: dict[str, list[str]] = {f"t{index}": [] for index in range(width)}
    for offset, event in enumerate([parsed("etl", edges), created("etl")]):
        memory.fold_record(EVENTS, log_record(event, offset))
    for index in range(width):  # all of them wait for a launch: every note is kept
        memory.fold_record(EVENTS, log_record(scheduler_queued(f"t{index}"), 100 + index))
    assert len(memory.state.unlaunched) == width
    assert all(memory.queued_offset(("etl", "manual__r1", f"t{index}"), 1) == 100 + index for index in range(width))

    for index in range(5 * width):  # tries of a run this partition does not hold: never waiting
        memory.fold_record(EVENTS, log_record(scheduler_queued(f"gone{index}", run_id="gone"), 10_000 + index))
    assert len(memory.queued_offsets) <= 2 * width + PRUNE_SLACK
    assert all(memory.queued_offset(("etl", "manual__r1", f"t{index}"), 1) == 100 + index for index in range(width))
