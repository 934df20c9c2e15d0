"""Dynamic task mapping where tries run: ``dag.test()`` / ``tock dags test`` run a mapped task's
instances with their elements and a reduce reads them all; the runner's claims, try keys, messages
and log paths tell instances of one try number apart; a try reads a mapped upstream's values."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.executors.messages import TryMessage
from infra.executors.requests import TryRequest
from infra.try_paths import TryPaths
from schemas import TaskStarted, TryInput
from services.runner.core.claim import winners
from tock import DAG, PythonOperator, task
from tock.context import RuntimeTaskInstance
from tock_cli.local_run import run_dag


def _quiet(dag: DAG):
    return run_dag(dag, report=lambda _line: None)


def test_a_local_run_maps_over_an_upstream_value_and_reduces_in_map_index_order():
    with DAG("local_map") as dag:
        @task
        def numbers():
            return [3, 1, 2]

        @task
        def double(number, factor):
            return number * factor

        @task
        def collect(values):
            return values

        collect(double.partial(factor=2).expand(number=numbers()))
    run = _quiet(dag)
    assert run.state == "success"
    assert [(item.map_index, item.return_value) for item in run.task_instances if item.task_id == "double"] == [
        (0, 6), (1, 2), (2, 4)]
    assert run.task_instance("collect").return_value == [6, 2, 4]


def test_a_local_run_expands_kwargs_of_an_operator_and_a_product_of_literals():
    with DAG("local_kwargs") as dag:
        PythonOperator.partial(task_id="py", python_callable=lambda x, y=0: x + y).expand(
            op_kwargs=[{"x": 1}, {"x": 2, "y": 10}])

        @task
        def pair(letter, number):
            return f"{letter}{number}"

        pair.expand(letter=["a", "b"], number=[1, 2])
    run = _quiet(dag)
    assert [run.task_instance("py", index).return_value for index in (0, 1)] == [1, 12]
    assert [run.task_instance("pair", index).return_value for index in range(4)] == ["a1", "a2", "b1", "b2"]


def test_a_local_run_skips_an_empty_expansion_and_what_follows_it():
    with DAG("local_empty") as dag:
        @task
        def nothing():
            return []

        @task
        def each(item):
            return item

        @task
        def after(values):
            return values

        after(each.expand(item=nothing()))
    run = _quiet(dag)
    assert run.state == "success"
    assert run.task_instance("each").state == "skipped" and run.task_instance("after").state == "skipped"


def test_a_local_run_fails_a_mapping_over_a_value_that_is_not_a_list():
    with DAG("local_bad") as dag:
        @task
        def five():
            return 5

        @task
        def each(item):
            return item

        each.expand(item=five())
    run = _quiet(dag)
    assert run.state == "failed"
    assert "is a int, not a list or dict" in run.task_instance("each").error


# -- the runner's keys ----------------------------------------------------------------------------

def _request(map_index: int) -> TryRequest:
    return TryRequest("d", "r", "t", 1, "/dags/d.py", map_index=map_index)


def test_instances_of_one_try_number_have_their_own_try_keys_messages_and_log_paths(tmp_path: Path):
    keys = {_request(index).key for index in (-1, 0, 1)}
    assert keys == {("d", "r", "t", 1), ("d", "r", "t|0", 1), ("d", "r", "t|1", 1)}
    message = TryMessage(_request(4), "local", "default")
    assert TryMessage.from_json(message.to_json()).request == _request(4)
    paths = {TryPaths(tmp_path, _request(index)).log.name for index in (-1, 0)}
    assert paths == {"1.log", "1.m0.log"}


def test_each_instance_claims_its_own_try():
    started = [TaskStarted(dag_id="d", run_id="r", task_id="t", map_index=index, try_number=1, runner_id=f"me{index}",
                           hostname="h", pid=1, at=1.0) for index in (0, 1)]
    claims = winners(started, {_request(0).key: "me0", _request(1).key: "me1"})
    assert claims.won == {_request(0).key, _request(1).key} and not claims.lost


def test_a_try_reads_a_mapped_upstreams_values_as_a_list_or_by_map_index():
    with DAG("pull") as dag:
        @task
        def each(item):
            return item

        @task
        def reduce(values):
            return values

        reduce(each.expand(item=[1, 2, 3]))
    inputs = [TryInput(task_id="each", try_number=1, map_index=index, values_json=f'{{"return_value":{index * 10}}}')
              for index in (2, 0, 1)]
    ti = RuntimeTaskInstance(dag.tasks["reduce"], "r", 1, inputs)
    assert ti.xcom_pull(task_ids="each") == [0, 10, 20]
    assert ti.xcom_pull(task_ids="each", map_indexes=1) == 10
    assert ti.xcom_pull(task_ids="each", map_indexes=[2, 0]) == [20, 0]


def test_a_mapped_instance_ships_its_log_under_its_own_key():
    from infra.log import routing_key
    from schemas import TaskLogShipped, try_log_key

    shipped = TaskLogShipped(dag_id="d", run_id="r", task_id="t", map_index=2, try_number=1, runner_id="x", offset=0,
                             text="hi\n", at=1.0)
    assert routing_key(shipped) == ("d|r|t|1|2", "d") == (try_log_key("d", "r", "t", 1, 2), "d")
    assert try_log_key("d", "r", "t", 1) == "d|r|t|1"


# -- the projections ------------------------------------------------------------------------------

def test_the_task_instance_table_has_a_row_per_map_index_and_the_whole_keeps_the_count():
    from projections.view import fold as fold_view
    from schemas import TaskMapExpanded, TaskMapFailed, TaskQueued, TaskSucceeded
    from tests.unit.projection_logs import LogBuilder

    ids = {"dag_id": "etl", "run_id": "r1", "task_id": "add"}
    builder = LogBuilder()
    builder.add(TaskMapExpanded(**ids, count=2, scheduler_id="s", at=1.0))
    for index in (0, 1):
        builder.add(TaskQueued(**ids, map_index=index, try_number=1, executor="local", queue="default",
                               scheduler_id="s", at=2.0))
    builder.add(TaskSucceeded(**ids, map_index=1, try_number=1, runner_id="r", at=3.0))
    builder.add(TaskMapFailed(dag_id="etl", run_id="r1", task_id="other", reason="is a int", scheduler_id="s", at=4.0))
    view = fold_view(builder.records)
    rows = view.rows["task_instance"]
    assert rows[("etl", "r1", "add", -1)]["map_count"] == 2
    assert [rows[("etl", "r1", "add", index)]["state"] for index in (0, 1)] == ["queued", "success"]
    assert rows[("etl", "r1", "other", -1)]["state"] == "failed"
    assert rows[("etl", "r1", "other", -1)]["reason"] == "is a int"
    assert [(row["event_type"], row["map_index"]) for row in view.history][:3] == [
        ("TaskMapExpanded", -1), ("TaskQueued", 0), ("TaskQueued", 1)]


def test_a_mapped_task_maps_over_a_mapped_upstreams_values():
    with DAG("local_chain") as dag:
        @task
        def add_one(number):
            return number + 1

        @task
        def double(number):
            return number * 2

        double.expand(number=add_one.expand(number=[1, 2, 3]))
    run = _quiet(dag)
    assert run.state == "success"
    assert [run.task_instance("double", index).return_value for index in range(3)] == [4, 6, 8]


def test_map_on_a_value_transforms_each_element_in_the_try_and_may_skip_one():
    from tock import AirflowSkipException

    def shout(word):
        if word == "skip":
            raise AirflowSkipException("not this one")
        return word.upper()

    with DAG("local_xmap") as dag:
        @task
        def words():
            return ["a", "skip", "b"]

        @task
        def echo(word):
            return word

        @task
        def pairs():
            return [1, 2]

        @task
        def add(x, y):
            return x + y

        echo.expand(word=words().map(shout))
        add.expand_kwargs(pairs().map(lambda number: {"x": number, "y": 10}))
    run = _quiet(dag)
    assert [run.task_instance("echo", index).state for index in range(3)] == ["success", "skipped", "success"]
    assert [run.task_instance("echo", index).return_value for index in (0, 2)] == ["A", "B"]
    assert [run.task_instance("add", index).return_value for index in range(2)] == [11, 12]
    assert run.state == "success"


def test_the_queries_read_one_map_index_and_its_history():
    from sqlalchemy import create_engine, insert

    from projections import queries
    from projections.db import create_tables
    from projections.tables import LIVE, TASK_EVENT
    from projections.task_instance import empty

    engine = create_engine("sqlite://")
    create_tables(engine)
    with engine.begin() as connection:
        for index, state in ((-1, None), (0, "success"), (1, "failed")):
            connection.execute(insert(LIVE["task_instance"]), {**empty("d", "r", "t", index), "state": state})
        for offset, (kind, index) in enumerate((("TaskMapExpanded", -1), ("TaskQueued", 0), ("TaskQueued", 1))):
            connection.execute(insert(LIVE[TASK_EVENT]), {"topic": "events", "partition": 0, "offset": offset,
                                                          "dag_id": "d", "run_id": "r", "task_id": "t",
                                                          "event_type": kind, "map_index": index, "at": 1.0,
                                                          "payload_json": "{}"})
    assert queries.task_instance(engine, "d", "r", "t", 1)["state"] == "failed"
    assert queries.task_instance(engine, "d", "r", "t")["state"] is None
    assert [row["map_index"] for row in queries.task_instances(engine, "d", "r")] == [-1, 0, 1]
    history = queries.task_history(engine, "d", "r", "t", map_index=1)
    assert [(row["event_type"], row["map_index"]) for row in history] == [("TaskMapExpanded", -1), ("TaskQueued", 1)]
    assert len(queries.task_history(engine, "d", "r", "t")) == 3


def _zip_dag(dag_id: str, build) -> DAG:
    """A DAG of ``letters`` (a, b, c) and ``numbers`` (1, 2) and what ``build(letters, numbers)`` adds."""
    with DAG(dag_id) as dag:
        @task
        def letters():
            return ["a", "b", "c"]

        @task
        def numbers():
            return [1, 2]

        build(letters(), numbers())
    return dag


def _instances(run, task_id: str) -> list:
    return [item.return_value for item in run.task_instances if item.task_id == task_id and item.map_index >= 0]


def test_a_local_run_maps_over_zipped_values_as_airflow_zip():
    @task
    def show(pair):
        return f"{pair[0]}{pair[1]}" if isinstance(pair, tuple) else f"not a tuple: {pair!r}"

    def build(letters, numbers):
        show.override(task_id="shortest").expand(pair=letters.zip(numbers))
        show.override(task_id="longest").expand(pair=letters.zip(numbers, fillvalue=0))
        show.override(task_id="mapped").expand(pair=letters.zip(numbers.map(lambda n: n * 10)))

    run = _quiet(_zip_dag("local_zip", build))
    assert run.state == "success"
    assert _instances(run, "shortest") == ["a1", "b2"]
    assert _instances(run, "longest") == ["a1", "b2", "c0"]
    assert _instances(run, "mapped") == ["a10", "b20"]


def test_a_zip_mapped_to_dicts_feeds_expand_kwargs_and_a_zip_argument_is_its_tuples():
    @task
    def join(letter, number):
        return letter * number

    @task
    def collect(pairs):
        return pairs

    def build(letters, numbers):
        join.expand_kwargs(letters.zip(numbers).map(lambda pair: {"letter": pair[0], "number": pair[1]}))
        collect(letters.zip(numbers, fillvalue=None))

    run = _quiet(_zip_dag("local_zip_kwargs", build))
    assert run.state == "success"
    assert _instances(run, "join") == ["a", "bb"]
    assert run.task_instance("collect").return_value == [("a", 1), ("b", 2), ("c", None)]


def test_a_local_run_maps_a_bash_operator_and_renders_each_instances_command():
    from tock import BashOperator

    with DAG("local_bash_map") as dag:
        @task
        def words():
            return ["echo one", "echo two-{{ ti.map_index }}"]

        BashOperator.partial(task_id="literal", env={"WHO": "tock"}).expand(
            bash_command=["echo $WHO", "echo {{ ti.map_index }}-of-{{ dag.dag_id }}"])
        BashOperator.partial(task_id="over_value").expand(bash_command=words())
        BashOperator.partial(task_id="kwargs").expand_kwargs([{"bash_command": "pwd", "cwd": "/tmp"}])
    run = _quiet(dag)
    assert run.state == "success"
    assert _instances(run, "literal") == ["tock", "1-of-local_bash_map"]
    assert _instances(run, "over_value") == ["one", "two-1"]
    assert _instances(run, "kwargs") == ["/tmp"]


def test_a_mapped_bash_operator_without_a_command_is_refused_or_fails_that_instance():
    from tock import BashOperator
    from tock.mapping import MappingError

    with DAG("bash_no_command"):
        with pytest.raises(MappingError, match="needs bash_command in partial"):
            BashOperator.partial(task_id="nothing").expand(env=[{"A": "1"}])
        with pytest.raises(MappingError, match="item 0 gives no bash_command"):
            BashOperator.partial(task_id="no_item").expand_kwargs([{"cwd": "/tmp"}])
    with DAG("bash_no_command_at_run_time") as dag:
        @task
        def items():
            return [{"bash_command": "echo fine"}, {"cwd": "/tmp"}]

        BashOperator.partial(task_id="from_value").expand_kwargs(items())
    run = _quiet(dag)
    instances = [item for item in run.task_instances if item.task_id == "from_value"]
    assert [(item.map_index, item.state) for item in instances] == [(0, "success"), (1, "failed")]
    assert "this instance's element gives no bash_command" in instances[1].error


def test_a_local_run_of_a_mapped_task_group_runs_each_chain_by_map_index_and_reduces():
    from tock import task_group

    with DAG("local_mapped_group") as dag:
        @task
        def numbers():
            return [1, 2, 3]

        @task
        def add(number, offset):
            return number + offset

        @task
        def double(value, label):
            return f"{label}:{value * 2}"

        @task
        def collect(values):
            return values

        @task
        def peek():  # takes none of the group's arguments, pulls its upstream's value of its own map index
            from tock import get_current_context

            return get_current_context()["ti"].xcom_pull(task_ids="chain_of.add")

        @task_group
        def chain_of(number, offset):
            added = add(number=number, offset=offset)
            added >> peek()
            return double(added, label="x")

        collect(chain_of.partial(offset=10).expand(number=numbers()))
    run = _quiet(dag)
    assert run.state == "success"
    assert _instances(run, "chain_of.add") == [11, 12, 13]
    assert _instances(run, "chain_of.double") == ["x:22", "x:24", "x:26"]
    assert _instances(run, "chain_of.peek") == [11, 12, 13]
    assert run.task_instance("collect").return_value == ["x:22", "x:24", "x:26"]


def test_a_mapped_task_group_refuses_what_it_cannot_map():
    from tock import task_group
    from tock.mapping import MappingError

    @task
    def show(value):
        return value

    @task_group
    def positional(value):
        show(value)

    @task_group
    def nested(value):
        show(value=[value])

    @task_group
    def inner_mapped(value):
        show.expand(value=[1, 2])

    with DAG("bad_groups"):
        for group, words in [(positional, "by keyword"), (nested, "inside a value"), (inner_mapped, "mapped itself")]:
            with pytest.raises(MappingError, match=words):
                group.expand(value=[1])
        with pytest.raises(MappingError, match="unexpected keyword argument 'nope'"):
            positional.expand(value=[1], nope=[1])
        with pytest.raises(MappingError, match="missing a required argument: 'value'"):
            positional.expand(nope=[1])


def test_a_mapped_value_passed_as_a_plain_argument_is_its_elements_through_the_function():
    with DAG("local_map_argument") as dag:
        @task
        def numbers():
            return [1, 2, 3]

        @task
        def collect(values):
            return values

        collect(numbers().map(lambda number: number * 100))
    run = _quiet(dag)
    assert run.state == "success" and run.task_instance("collect").return_value == [100, 200, 300]
