"""Pools in the scheduler's core (issue 24): given these events on a DAG's partition and on the pool's,
these decisions — an ask instead of a TaskQueued, grants that fit in priority order, the try queued once
its grant is folded, the release once its end is in the log — and, for any interleaving of tries'
ends, kills, deaths and takeovers across two DAG partitions and the pool's, occupancy never above the
pool's size and back to zero at the end."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import (
    DagDefinition,
    DagParsed,
    DagRunCreated,
    PoolSlotsGranted,
    PoolSlotsReleased,
    PoolSlotsRequested,
    SetPool,
    TaskDeclaredDead,
    TaskDefinition,
    TaskFailed,
    TaskPoolGranted,
    TaskPoolReleased,
    TaskPoolRequested,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from services.scheduler.core import SchedulerState, decide, fold
from tests.unit.scheduler_fixtures import ME, POLICY

LEDGER = (SetPool, PoolSlotsRequested, PoolSlotsGranted, PoolSlotsReleased)


def dag(dag_id: str = "etl", tasks: int = 3, slots: int = 1, pool: str = "db", weights: tuple[int, ...] = (),
        retries: int = 0) -> DagParsed:
    defined = [TaskDefinition(task_id=f"t{number}", kind="bash", command="true", pool=pool, pool_slots=slots,
                              retries=retries, retry_delay=0.0, priority_weight=weights[number] if weights else 1)
               for number in range(tasks)]
    definition = DagDefinition(dag_id=dag_id, file_path=f"/dags/{dag_id}.py", tasks=defined, max_active_tasks=100)
    return DagParsed(dag_id=dag_id, file_path=definition.file_path, fingerprint=f"fp-{dag_id}", definition=definition,
                     at=0.0)


def run(dag_id: str = "etl", run_id: str = "r1") -> DagRunCreated:
    return DagRunCreated(dag_id=dag_id, run_id=run_id, logical_date=1.0, run_type="manual", dag_fingerprint="fp",
                         scheduler_id=ME, at=1.0)


def pool(size: int, name: str = "db") -> SetPool:
    return SetPool(pool=name, slots=size, at=0.5)


def of(kind: type, events: list[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def started(event: TaskQueued, at: float = 5.0) -> TaskStarted:
    return TaskStarted(dag_id=event.dag_id, run_id=event.run_id, task_id=event.task_id, try_number=event.try_number,
                       runner_id=f"r-{event.task_id}-{event.try_number}", hostname="h", pid=1, at=at)


def ended(event: TaskQueued, kind: type = TaskSucceeded, at: float = 6.0) -> Any:
    ids = {"dag_id": event.dag_id, "run_id": event.run_id, "task_id": event.task_id, "try_number": event.try_number}
    if kind is TaskDeclaredDead:
        return TaskDeclaredDead(**ids, reason="silent", scheduler_id=ME, at=at)
    extra = {"error": "boom"} if kind is TaskFailed else {}
    return kind(**ids, runner_id=f"r-{event.task_id}-{event.try_number}", **extra, at=at)


def test_a_task_in_a_pool_asks_for_its_slots_instead_of_being_queued():
    decided = decide(fold(SchedulerState(), [dag(tasks=1, slots=2), run()]), 2.0, POLICY)
    assert not of(TaskQueued, decided)
    assert [(type(event).__name__, event.pool, event.slots, event.try_number) for event in decided] == [
        ("PoolSlotsRequested", "db", 2, 1), ("TaskPoolRequested", "db", 2, 1)]
    asked = fold(SchedulerState(), [dag(tasks=1, slots=2), run(), *decided])
    assert not decide(asked, 3.0, POLICY)  # asked once: it waits for the grant


def test_the_pools_owner_grants_what_fits_highest_priority_first():
    log = [pool(2), dag(tasks=3, weights=(1, 5, 3)), run()]
    asks = decide(fold(SchedulerState(), log), 2.0, POLICY)
    grants = decide(fold(SchedulerState(), [*log, *asks]), 3.0, POLICY)
    assert [(type(event).__name__, event.task_id) for event in grants] == [
        ("PoolSlotsGranted", "t1"), ("TaskPoolGranted", "t1"), ("PoolSlotsGranted", "t2"), ("TaskPoolGranted", "t2")]
    state = fold(SchedulerState(), [*log, *asks, *grants])
    assert state.pools.occupied("db") == 2
    queued = of(TaskQueued, decide(state, 4.0, POLICY))
    assert sorted(event.task_id for event in queued) == ["t1", "t2"]  # granted: queued now, t0 still waits


def test_a_big_ask_that_does_not_fit_lets_smaller_ones_by():
    big = dag("big", tasks=1, slots=3, weights=(10,))
    log = [pool(2), big, dag("small", tasks=2), run("big"), run("small")]
    asks = decide(fold(SchedulerState(), log), 2.0, POLICY)
    grants = of(PoolSlotsGranted, decide(fold(SchedulerState(), [*log, *asks]), 3.0, POLICY))
    assert sorted(event.dag_id for event in grants) == ["small", "small"]


def test_a_pool_that_does_not_exist_grants_nothing_until_it_is_set():
    log = [dag(tasks=1), run()]
    asks = decide(fold(SchedulerState(), log), 2.0, POLICY)
    assert not decide(fold(SchedulerState(), [*log, *asks]), 3.0, POLICY)
    later = decide(fold(SchedulerState(), [*log, *asks, pool(1)]), 4.0, POLICY)
    assert [type(event).__name__ for event in later] == ["PoolSlotsGranted", "TaskPoolGranted"]


def test_the_trys_end_releases_its_slots_on_both_sides():
    log = [pool(1), dag(tasks=2), run()]
    for _turn in range(3):  # ask, grant, queue
        log += decide(fold(SchedulerState(), log), 2.0, POLICY)
    [queued] = of(TaskQueued, log)
    log += [started(queued), ended(queued, TaskFailed)]
    released = decide(fold(SchedulerState(), log), 7.0, POLICY)
    assert [(type(event).__name__, event.task_id, event.reason) for event in released[:2]] == [
        ("PoolSlotsReleased", queued.task_id, "the try ended failed"),
        ("TaskPoolReleased", queued.task_id, "the try ended failed")]
    state = fold(SchedulerState(), [*log, *released])
    assert state.pools.occupied("db") == 0 and not state.pool_holdings
    assert [type(event).__name__ for event in decide(state, 8.0, POLICY)][:2] == ["PoolSlotsGranted",
                                                                                  "TaskPoolGranted"]


def test_a_grant_no_longer_needed_is_released():
    log = [pool(1), dag(tasks=1), run()]
    for _turn in range(2):  # ask, grant: not queued yet
        log += decide(fold(SchedulerState(), log), 2.0, POLICY)
    state = fold(SchedulerState(), log)
    state.paused.add("etl")  # (the fold of a PauseDag)
    released = decide(state, 3.0, POLICY)
    assert [(type(event).__name__, event.reason) for event in of(TaskPoolReleased, released)] == [
        ("TaskPoolReleased", "its DAG is paused")]


# -- any interleaving, two DAG partitions and the pool's ---------------------------------------------

SIZE = 3


class System:
    """Three partitions' logs, each folded by its owner; decisions appended where their route puts them."""

    def __init__(self) -> None:
        self.logs: dict[str, list[Any]] = {"pool": [pool(SIZE)], "d1": [dag("d1", 4, retries=1), run("d1")],
                                           "d2": [dag("d2", 4, slots=2), run("d2")]}
        self.states = {name: fold(SchedulerState(), log) for name, log in self.logs.items()}
        self.now = 2.0

    def append(self, events: list[Any]) -> None:
        for event in events:
            name = "pool" if isinstance(event, LEDGER) else event.dag_id
            self.logs[name].append(event)
            fold(self.states[name], [event])

    def decide(self, name: str) -> None:
        self.now += 1.0
        self.append(decide(self.states[name], self.now, POLICY))

    def takeover(self, name: str) -> None:
        """A new owner: the fold of the partition's log from its start (it must equal the state it replaces)."""
        fresh = fold(SchedulerState(), self.logs[name])
        assert replace(fresh, timers=self.states[name].timers) == self.states[name]
        self.states[name] = fresh

    def running(self) -> list[TaskQueued]:
        ended_kinds = (TaskSucceeded, TaskFailed, TaskDeclaredDead)
        over = {(event.dag_id, event.task_id, event.try_number) for log in self.logs.values() for event in log
                if isinstance(event, ended_kinds)}
        return [event for name in ("d1", "d2") for event in of(TaskQueued, self.logs[name])
                if (event.dag_id, event.task_id, event.try_number) not in over]

    def occupied(self) -> int:
        return self.states["pool"].pools.occupied("db")


STEPS = st.lists(st.tuples(st.sampled_from(["decide-d1", "decide-d2", "decide-pool", "end", "takeover"]),
                           st.sampled_from([TaskSucceeded, TaskFailed, TaskDeclaredDead]),
                           st.sampled_from(["d1", "d2", "pool"]), st.integers(0, 10)), max_size=80)


@settings(max_examples=150, deadline=None)
@given(STEPS)
def test_occupancy_never_exceeds_the_size_and_returns_to_zero(steps):
    system = System()
    for action, kind, name, pick in steps:
        if action.startswith("decide"):
            system.decide(action.split("-")[1])
        elif action == "end" and system.running():
            chosen = system.running()[pick % len(system.running())]
            system.append([started(chosen, system.now), ended(chosen, kind, system.now + 0.5)])
        elif action == "takeover":
            system.takeover(name)
        assert system.occupied() <= SIZE
        running_slots = sum(task_slots(event) for event in system.running())
        assert running_slots <= SIZE  # counted from the log: the tries queued or running hold their slots
    for _round in range(200):  # then every try ends and every owner decides until nothing is left
        for event in system.running():
            system.append([started(event, system.now), ended(event, TaskSucceeded, system.now + 0.5)])
        for name in ("d1", "d2", "pool"):
            system.decide(name)
        if not any(run.tasks for state in system.states.values() for run in state.runs.values()) \
                and not system.running():
            break
    assert all(not state.runs for name, state in system.states.items() if name != "pool"), "every run finished"
    assert system.occupied() == 0 and not system.states["pool"].pools.asks
    assert not system.states["d1"].pool_holdings and not system.states["d2"].pool_holdings


def task_slots(event: TaskQueued) -> int:
    return 2 if event.dag_id == "d2" else 1
