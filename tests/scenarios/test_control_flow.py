"""Control flow through the real system (broker, scheduler, local runners as processes): a branch, a
short circuit, a teardown after a failure and a mapped reduce over an upstream's value, each decision
read back from the log; and a scheduler killed -9 in the middle of a 1,000-way expansion, whose
successor runs every map index exactly once."""

from __future__ import annotations

from collections import Counter

import pytest

from schemas import TaskMapExpanded, TaskQueued, TaskSkipped, TaskStarted, TaskSucceeded
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, kill_hard, publish_dags, trigger
from tock.values import decode_values

pytestmark = pytest.mark.scenario

FLOWS = '''
from tock import DAG, TriggerRule, task, setup, teardown

with DAG("cf_branch") as branch_dag:
    @task.branch
    def pick():
        return "heavy"

    @task
    def heavy():
        return "pallet"

    @task
    def light():
        return "parcel"

    @task(trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    def join():
        return "joined"

    pick() >> [heavy(), light()] >> join()

with DAG("cf_short_circuit") as short_dag:
    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def anything():
        return False

    @task
    def bill():
        return "billed"

    @task(trigger_rule=TriggerRule.ALL_DONE)
    def tidy():
        return "tidied"

    anything() >> bill() >> tidy()

with DAG("cf_teardown") as teardown_dag:
    @setup
    def create():
        return "created"

    @task
    def work():
        raise RuntimeError("the work broke")

    @teardown
    def drop():
        return "dropped"

    created, dropped = create(), drop()
    created >> work() >> dropped
    created >> dropped

with DAG("cf_mapped_reduce") as mapped_dag:
    @task
    def numbers():
        return [1, 2, 3]

    @task
    def double(x):
        return 2 * x

    @task
    def total(values):
        return sum(values)

    total(double.expand(x=numbers()))
'''

WIDE = '''
from tock import DAG, task

with DAG("cf_wide", max_active_tasks=64) as dag:
    @task
    def indexes():
        return list(range({width}))

    @task
    def echo(x):
        return x

    echo.expand(x=indexes())
'''


@pytest.fixture
def system(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5, scheduler_session_timeout=6)
    create_topics(settings)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    yield settings, processes, tail
    processes.close()
    tail.close()


def _value(tail: LogTail, run_id: str, task_id: str, map_index: int = -1):
    [succeeded] = tail.of_type(TaskSucceeded, run_id=run_id, task_id=task_id, map_index=map_index)
    return decode_values(succeeded.values_json).get("return_value")


def _skip(tail: LogTail, run_id: str, task_id: str) -> TaskSkipped:
    [skipped] = tail.of_type(TaskSkipped, run_id=run_id, task_id=task_id)
    return skipped


def _dags(tmp_path, name: str, text: str):
    path = tmp_path / "dags" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_branch_short_circuit_teardown_and_mapped_reduce_decide_in_the_log(system, tmp_path):
    settings, processes, tail = system
    publish_dags(settings, _dags(tmp_path, "flows.py", FLOWS))
    processes.scheduler("s1")
    runs = {dag_id: trigger(settings, dag_id) for dag_id in ("cf_branch", "cf_short_circuit", "cf_teardown",
                                                               "cf_mapped_reduce")}
    finished = {dag_id: tail.run_finished(run_id, 180).state for dag_id, run_id in runs.items()}
    assert finished == {"cf_branch": "success", "cf_short_circuit": "success", "cf_teardown": "failed",
                        "cf_mapped_reduce": "success"}

    branch = runs["cf_branch"]  # the branch not chosen is skipped, naming who chose; the join runs
    assert (_value(tail, branch, "heavy"), _value(tail, branch, "join")) == ("pallet", "joined")
    light = _skip(tail, branch, "light")
    assert light.chosen_by == "pick" and not tail.of_type(TaskStarted, run_id=branch, task_id="light")

    short = runs["cf_short_circuit"]  # only the direct downstream is skipped; all_done further down runs
    assert _skip(tail, short, "bill").reason and not tail.of_type(TaskStarted, run_id=short, task_id="bill")
    assert _value(tail, short, "tidy") == "tidied"

    torn = runs["cf_teardown"]  # the teardown runs after the failed work; the work's failure fails the run
    assert _value(tail, torn, "drop") == "dropped"
    assert [event.task_id for event in tail.of_type(TaskStarted, run_id=torn)] == ["create", "work", "drop"]

    mapped = runs["cf_mapped_reduce"]  # each instance once, the reduce reads them in map index order
    [expanded] = tail.of_type(TaskMapExpanded, run_id=mapped, task_id="double")
    assert expanded.count == 3 and [source.task_id for source in expanded.sources] == ["numbers"]
    assert [_value(tail, mapped, "double", index) for index in range(3)] == [2, 4, 6]
    assert _value(tail, mapped, "total") == 12


WIDTH = 1000


def test_a_scheduler_killed_during_a_1000_way_expansion_runs_each_index_once(system, tmp_path):
    settings, processes, tail = system
    publish_dags(settings, _dags(tmp_path, "wide.py", WIDE.format(width=WIDTH)))
    first = processes.scheduler("s1")
    run_id = trigger(settings, "cf_wide")
    tail.wait_for(lambda _events: len(tail.of_type(TaskSucceeded, run_id=run_id, task_id="echo")) >= 20, 240,
                  "the first instances of echo to succeed")
    kill_hard(first.pid)  # mid-expansion: most instances are queued or not yet started
    assert len(tail.of_type(TaskSucceeded, run_id=run_id, task_id="echo")) < WIDTH // 2
    processes.scheduler("s2")
    assert tail.run_finished(run_id, 600).state == "success"
    assert len(tail.of_type(TaskMapExpanded, run_id=run_id, task_id="echo")) == 1
    queued = Counter(event.map_index for event in tail.of_type(TaskQueued, run_id=run_id, task_id="echo"))
    succeeded = Counter(event.map_index for event in tail.of_type(TaskSucceeded, run_id=run_id, task_id="echo"))
    assert set(queued) == set(succeeded) == set(range(WIDTH))
    assert max(queued.values()) == max(succeeded.values()) == 1  # no index queued or run twice
    assert {_value(tail, run_id, "echo", index) for index in (0, WIDTH // 2, WIDTH - 1)} == {0, WIDTH // 2, WIDTH - 1}
