"""The authoring API: DAG, @task, BashTask, dependencies, definitions, load_dags."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from schemas import DagDefinition, decode, encode
from schemas.params import for_task
from tock import DAG, BashTask, DagDefinitionError, fingerprint, load_dags, task

HERE = Path(__file__).parent
EXAMPLE = HERE / "dag_files" / "example_etl.py"


def write(tmp_path: Path, source: str, name: str = "dag.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def test_the_example_file_loads_with_its_tasks_and_dependencies():
    [dag] = load_dags(EXAMPLE)
    assert dag.dag_id == "example_etl"
    assert set(dag.tasks) == {"extract", "transform", "load", "notify"}
    assert dag.tasks["extract"].kind == "python" and callable(dag.tasks["extract"].python_callable)
    assert dag.tasks["load"].kind == "bash" and dag.tasks["load"].command == "echo loaded"
    assert dag.tasks["transform"].upstream_task_ids == {"extract"}
    assert dag.tasks["notify"].upstream_task_ids == {"load", "transform"}


def test_a_task_function_found_by_dag_and_task_id_runs():
    [dag] = load_dags(EXAMPLE)
    assert dag.tasks["extract"].python_callable() == [1, 2, 3]


def test_dependency_operators_with_lists_in_both_directions():
    with DAG("deps") as dag:
        a, b, c, d = (BashTask(name, "true") for name in "abcd")
        assert (a >> [b, c]) == [b, c]
        [b, c] >> d  # noqa: B015 - the operator is the point
        a << BashTask("zero", "true")
        d << [BashTask("side", "true")]  # noqa: B015
    assert dag.tasks["b"].upstream_task_ids == {"a"}
    assert dag.tasks["d"].upstream_task_ids == {"b", "c", "side"}
    assert dag.tasks["a"].upstream_task_ids == {"zero"}


def test_per_task_options_and_dag_defaults_reach_the_definition():
    with DAG("opts", schedule="@hourly", start_date=datetime(2024, 1, 1), retries=3,
             retry_delay=timedelta(minutes=2), deadline=3600, tags=["x"], params={"n": 1}) as dag:
        @task(task_id="big", retries=0, execution_timeout=timedelta(seconds=90), deadline=timedelta(minutes=5),
              executor="kubernetes",
              queue="gpu", pod_override={"image": "python:3.11", "resources": {"limits": {"memory": "1Gi"}}})
        def work():
            return None

        work() >> BashTask("after", "echo hi", executor="celery")
    definition = dag.to_definition("/dags/opts.py")
    big, after = (next(t for t in definition.tasks if t.task_id == name) for name in ("big", "after"))
    assert (big.retries, big.retry_delay, big.execution_timeout, big.executor, big.queue) == (
        0, 120.0, 90.0, "kubernetes", "gpu")
    assert (big.deadline, after.deadline) == (300.0, None)  # seconds after first queued; none by default
    assert json.loads(big.pod_override_json)["image"] == "python:3.11"
    assert (after.retries, after.executor, after.upstream) == (3, "celery", ["big"])
    assert definition.start_date == datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    assert (definition.schedule, definition.deadline, definition.tags) == ("@hourly", 3600.0, ["x"])
    assert for_task(definition.params_json, "{}", "{}") == {"n": 1}


def test_definition_round_trips_through_the_codec_inside_dag_parsed():
    from schemas import DagParsed

    [dag] = load_dags(EXAMPLE)
    definition = dag.to_definition(str(EXAMPLE))
    event = DagParsed(dag_id=dag.dag_id, file_path=str(EXAMPLE), fingerprint=fingerprint(definition),
                      definition=definition, at=1.0)
    assert decode(encode(event)) == event


def test_fingerprint_is_stable_and_ignores_task_declaration_order(tmp_path):
    one = write(tmp_path, """
        from tock import DAG, BashTask
        with DAG("same"):
            BashTask("a", "true") >> BashTask("b", "true")
    """, "one.py")
    two = write(tmp_path, """
        from tock import DAG, BashTask
        with DAG("same"):
            b = BashTask("b", "true")
            BashTask("a", "true") >> b
    """, "two.py")
    prints = {fingerprint(dag.to_definition("/same/path.py")) for path in (one, two, one) for dag in load_dags(path)}
    assert len(prints) == 1
    changed = DagDefinition(dag_id="same", file_path="/same/path.py")
    assert fingerprint(changed) not in prints


def test_a_file_with_several_dags_yields_each_and_loads_afresh_every_time(tmp_path):
    path = write(tmp_path, """
        from tock import DAG, BashTask
        COUNT = [0]
        for name in ("first", "second"):
            with DAG(name):
                BashTask("t", "true")
    """)
    first = load_dags(path)
    second = load_dags(path)
    assert [dag.dag_id for dag in first] == ["first", "second"]
    assert first[0] is not second[0]


def test_a_task_function_outside_a_dag_is_the_plain_function():
    @task
    def add(a, b):
        return a + b

    assert add(2, 3) == 5


INVALID = {
    "cycle": ("""
        from tock import DAG, BashTask
        with DAG("cyclic"):
            a, b, c = BashTask("a", "x"), BashTask("b", "x"), BashTask("c", "x")
            a >> b >> c >> a
    """, "cyclic", "dependency cycle"),
    "duplicate task": ("""
        from tock import DAG, BashTask
        with DAG("dup"):
            BashTask("a", "x")
            BashTask("a", "y")
    """, "dup", "duplicate task id 'a'"),
    "unknown executor": ("""
        from tock import DAG, task
        with DAG("ex"):
            @task(executor="mesos")
            def work(): ...
            work()
    """, "ex", "unknown executor 'mesos'"),
    "bad cron": ("""
        from tock import DAG
        DAG("cron", schedule="61 * * * *")
    """, "cron", "bad schedule '61 * * * *'"),
    "same dag twice": ("""
        from tock import DAG
        DAG("twice"); DAG("twice")
    """, "twice", "defined twice"),
    "bad task deadline": ("""
        from tock import DAG, BashTask
        with DAG("late"):
            BashTask("a", "x", deadline=-5)
    """, "late", "deadline must not be negative"),
    "bad retries": ("""
        from tock import DAG
        DAG("neg", retries=-1)
    """, "neg", "retries must be a non-negative integer"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_definitions_name_the_file_the_dag_and_the_problem(tmp_path, case):
    source, dag_id, problem = INVALID[case]
    path = write(tmp_path, source)
    with pytest.raises(DagDefinitionError) as raised:
        load_dags(path)
    message = str(raised.value)
    assert str(path) in message and repr(dag_id) in message and problem in message


def test_tasks_outside_any_dag_and_cross_dag_dependencies_are_refused():
    with pytest.raises(RuntimeError, match="inside a `with DAG"):
        BashTask("lonely", "true")
    with DAG("one"):
        a = BashTask("a", "true")
    with DAG("two"):
        b = BashTask("b", "true")
    with pytest.raises(DagDefinitionError, match="cannot depend on 'b' of DAG 'two'"):
        a >> b  # noqa: B015


def test_errors_of_the_file_itself_propagate(tmp_path):
    with pytest.raises(SyntaxError):
        load_dags(write(tmp_path, "def broken(:\n"))
    with pytest.raises(ZeroDivisionError):
        load_dags(write(tmp_path, "1 / 0\n", "raises.py"))


def test_a_dag_file_imports_a_helper_module_kept_beside_it(tmp_path):
    from tock import load_dags

    (tmp_path / "etl_helpers_for_test.py").write_text("TABLES = ['orders', 'users']\n")
    (tmp_path / "uses_helper.py").write_text(
        "from etl_helpers_for_test import TABLES\n"
        "from tock import DAG, BashTask\n"
        "with DAG('uses_helper') as dag:\n"
        "    for table in TABLES:\n"
        "        BashTask(f'copy_{table}', 'true')\n")
    [dag] = load_dags(tmp_path / "uses_helper.py")
    assert sorted(dag.tasks) == ["copy_orders", "copy_users"]


def test_callbacks_are_webhook_urls_or_callable_paths_carried_by_the_definition():
    with DAG("hooked", deadline=60, on_failure="https://hooks.example/fail",
             on_deadline_missed="http://127.0.0.1:9/late") as dag:
        BashTask("a", "true")
    definition = dag.to_definition("/dags/hooked.py")
    assert (definition.on_failure, definition.on_deadline_missed) == ("https://hooks.example/fail",
                                                                       "http://127.0.0.1:9/late")
    with DAG("called", on_failure="mypkg.alerts:notify") as dag:
        BashTask("a", "true")
    assert dag.to_definition("/dags/called.py").on_failure == "mypkg.alerts:notify"
    for bad in ("my_module.notify", "ftp://hooks.example", "mypkg:alerts:notify", "my-pkg:notify"):
        with pytest.raises(DagDefinitionError, match="must be an http.s. webhook URL or a 'module:function'"):
            DAG("bad", on_failure=bad)
