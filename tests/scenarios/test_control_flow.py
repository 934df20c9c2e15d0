"""Control flow through the real system (issue 23): a branch, short circuits, a teardown after a failure
and a mapped reduce, each decided by a real scheduler and run by real local runners, checked from the
log; mapping, a zip and a mapped task group across the Celery and Kubernetes executors; and a scheduler
killed with -9 in the middle of a wide expansion runs every map index once."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy.exc import SQLAlchemyError

from projections import queries
from projections.db import open_engine
from schemas import DagRunFinished, TaskFailed, TaskMapExpanded, TaskQueued, TaskSkipped, TaskStarted, TaskSucceeded
from tests.scenarios.celery_support import Workers
from tests.scenarios.kube_support import kube_settings, on_every_executor
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    kill_hard,
    publish_dags,
    start_with_dags,
    trigger,
    wait_until,
)
from tock.values import decode_values

pytestmark = pytest.mark.scenario

FLOWS = '''
from tock import DAG, TriggerRule, task

with DAG("cf_branch") as dag:
    @task.branch
    def choose():
        return "left"

    @task
    def left():
        return "went left"

    @task
    def right():
        return "went right"

    @task(trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    def join():
        return "joined"

    choose() >> [left(), right()] >> join()

for short_id, ignore in (("cf_short_all", True), ("cf_short_direct", False)):
    with DAG(short_id) as dag:  # the gate skips all downstream, or (ignore=False) the direct one only
        @task.short_circuit(ignore_downstream_trigger_rules=ignore)
        def gate():
            return False

        @task
        def after():
            return 1

        @task(trigger_rule="all_done")
        def finally_():
            return 2

        gate() >> after() >> finally_()
    globals()[short_id] = dag

with DAG("cf_teardown") as dag:
    @task
    def make_room():
        return "room"

    @task
    def work():
        raise RuntimeError("the work broke")

    @task
    def clean_room():
        return "cleaned"

    room = make_room()
    room >> work() >> clean_room().as_teardown(setups=room)

with DAG("cf_reduce") as dag:
    @task
    def make_list():
        return [1, 2, 3]

    @task
    def double(x):
        return 2 * x

    @task
    def total(values):
        return sum(values)

    total(double.expand(x=make_list()))
'''

WIDE = '''
from tock import DAG, task

with DAG("cf_wide") as dag:
    @task
    def numbers():
        return list(range({count}))

    @task
    def echo(x):
        return x

    echo.expand(x=numbers())
'''


MAPPED_EVERYWHERE = '''
from tock import DAG, BashOperator, task, task_group

with DAG("cf_mapped_executors") as dag:
    @task
    def numbers():
        return [1, 2, 3]

    @task(executor="celery")
    def double(number):
        return number * 2

    @task(executor="kubernetes")
    def plus(number, other):
        return number + other

    @task
    def label(value):
        return f"v{value}"

    @task_group
    def chain_of(number):
        return label(plus(number=number, other=100))

    @task
    def total(doubled, labels, echoed):
        return {"doubled": doubled, "labels": labels, "echoed": echoed}

    echoed = BashOperator.partial(task_id="echo", executor="celery").expand(
        bash_command=["echo {{ ti.map_index }}-a", "echo {{ ti.map_index }}-b"])
    listed = numbers()
    total(double.expand(number=listed), chain_of.expand(number=listed), echoed)
'''


def _succeeded(tail: LogTail, run_id: str) -> set[str]:
    return {event.task_id for event in tail.of_type(TaskSucceeded, run_id=run_id)}


def _skipped(tail: LogTail, run_id: str) -> dict[str, TaskSkipped]:
    return {event.task_id: event for event in tail.of_type(TaskSkipped, run_id=run_id)}


def test_branches_short_circuits_teardowns_and_a_mapped_reduce(make_settings, system, tmp_path):
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path, FLOWS)
    processes.scheduler("s1")
    processes.start("projector", name="projector")
    runs = {dag_id: trigger(settings, dag_id)
            for dag_id in ("cf_branch", "cf_short_all", "cf_short_direct", "cf_teardown", "cf_reduce")}
    states = {dag_id: tail.run_finished(run_id, 180).state for dag_id, run_id in runs.items()}
    assert states == {"cf_branch": "success", "cf_short_all": "success", "cf_short_direct": "success",
                      "cf_teardown": "failed", "cf_reduce": "success"}

    branch = runs["cf_branch"]
    assert _succeeded(tail, branch) == {"choose", "left", "join"}
    [skipped_right] = _skipped(tail, branch).values()
    assert (skipped_right.task_id, skipped_right.chosen_by) == ("right", "choose")
    assert skipped_right.reason
    _projected(settings, "cf_branch", branch, {"left": "success", "right": "skipped", "join": "success"})

    # all downstream skipped by the gate itself; with its rules respected, only the direct one
    everything = _skipped(tail, runs["cf_short_all"])
    assert sorted(everything) == ["after", "finally_"]
    assert {event.chosen_by for event in everything.values()} == {"gate"}
    assert _succeeded(tail, runs["cf_short_all"]) == {"gate"}
    direct = _skipped(tail, runs["cf_short_direct"])
    assert sorted(direct) == ["after"] and direct["after"].chosen_by == "gate"
    assert _succeeded(tail, runs["cf_short_direct"]) == {"gate", "finally_"}

    teardown = runs["cf_teardown"]
    assert _succeeded(tail, teardown) == {"make_room", "clean_room"}
    assert not _skipped(tail, teardown)
    assert [event.task_id for event in tail.of_type(TaskFailed, run_id=teardown)] == ["work"]

    reduce = runs["cf_reduce"]
    [expanded] = tail.of_type(TaskMapExpanded, run_id=reduce, task_id="double")
    assert expanded.count == 3
    doubles = tail.of_type(TaskSucceeded, run_id=reduce, task_id="double")
    assert sorted(event.map_index for event in doubles) == [0, 1, 2]
    assert Counter(event.map_index for event in tail.of_type(TaskStarted, run_id=reduce, task_id="double")) \
        == {0: 1, 1: 1, 2: 1}
    [total] = tail.of_type(TaskSucceeded, run_id=reduce, task_id="total")
    assert decode_values(total.values_json) == {"return_value": 12}


def _projected(settings, dag_id: str, run_id: str, expected: dict[str, str]) -> None:
    """The projector's task_instance rows reach ``expected`` (task id -> state)."""
    engine = open_engine(settings)

    def states():
        try:
            return {task_id: (queries.task_instance(engine, dag_id, run_id, task_id) or {}).get("state")
                    for task_id in expected}
        except SQLAlchemyError:  # the projector has not created its tables yet
            return {}

    try:
        wait_until(lambda: states() == expected, 60, f"the projector to fold {dag_id} to {expected}")
    finally:
        engine.dispose()


WIDE_COUNT = 1000


def test_a_scheduler_killed_during_a_wide_expansion_runs_every_index_once(make_settings, system, tmp_path):
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path, WIDE.format(count=WIDE_COUNT),
                                       scheduler_session_timeout=6)
    first = processes.scheduler("s1")
    run_id = trigger(settings, "cf_wide")
    tail.wait_for(lambda _events: tail.of_type(TaskStarted, run_id=run_id, task_id="echo"), 120,
                  "the first mapped tries to start")
    kill_hard(first.pid)
    done_before_the_kill = len(tail.of_type(TaskSucceeded, run_id=run_id, task_id="echo"))
    assert done_before_the_kill < WIDE_COUNT and not tail.of_type(DagRunFinished, run_id=run_id)
    processes.scheduler("s2")
    assert tail.run_finished(run_id, 600).state == "success"
    succeeded = Counter(event.map_index for event in tail.of_type(TaskSucceeded, run_id=run_id, task_id="echo"))
    assert succeeded == {index: 1 for index in range(WIDE_COUNT)}
    for kind in (TaskQueued, TaskStarted):
        tries = Counter((event.map_index, event.try_number)
                        for event in tail.of_type(kind, run_id=run_id, task_id="echo"))
        assert set(tries) == {(index, 1) for index in range(WIDE_COUNT)}, kind.__name__
        assert set(tries.values()) == {1}, kind.__name__
    assert len(tail.of_type(TaskMapExpanded, run_id=run_id, task_id="echo")) == 1
    assert len(tail.of_type(DagRunFinished, run_id=run_id)) == 1


def test_mapping_and_a_mapped_group_run_on_celery_and_kubernetes(make_settings, kube_namespace, redis_url, system,
                                                                 tmp_path):
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5)
    on_every_executor(settings, system, tmp_path)
    path = tmp_path / "dags" / "mapped.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(MAPPED_EVERYWHERE)
    publish_dags(settings, path)
    system["processes"].scheduler("s1")
    tail = system["tail"]
    run_id = trigger(settings, "cf_mapped_executors")
    assert tail.run_finished(run_id, 300).state == "success"
    started = Counter((event.task_id, event.map_index, event.executor) for event in tail.of_type(TaskStarted,
                                                                                                 run_id=run_id))
    assert started == Counter({("numbers", -1, "local"): 1, ("total", -1, "local"): 1,
                               **{("double", index, "celery"): 1 for index in range(3)},
                               **{("chain_of.plus", index, "kubernetes"): 1 for index in range(3)},
                               **{("chain_of.label", index, "local"): 1 for index in range(3)},
                               **{("echo", index, "celery"): 1 for index in range(2)}})
    [reduced] = tail.of_type(TaskSucceeded, run_id=run_id, task_id="total")
    assert decode_values(reduced.values_json)["return_value"] == {
        "doubled": [2, 4, 6], "labels": ["v101", "v102", "v103"], "echoed": ["0-a", "1-b"]}
