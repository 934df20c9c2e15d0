"""``@dag`` (issue 25): Airflow's TaskFlow DAG decorator. The call builds the DAG (its id the function's
name unless given), the function's parameters are the DAG's params, and inside the body each is a
DagParam that a try reads as the run's value of the param (conf over default)."""

from __future__ import annotations

import pytest

from tock import DAG, BashOperator, DagDefinitionError, DagParam, Param, dag, load_dags, task
from tock_cli.local_run import run_dag


def test_a_decorated_function_builds_its_dag_when_called_with_dags_arguments():
    @dag(schedule="@daily", tags=["t"], max_active_runs=2)
    def etl():
        BashOperator(task_id="hello", bash_command="echo hi")

    made = etl()
    assert isinstance(made, DAG) and (made.dag_id, made.tags, made.max_active_runs) == ("etl", ("t",), 2)
    assert list(made.tasks) == ["hello"]

    @dag
    def bare():
        pass

    @dag(dag_id="named")
    def other():
        pass

    assert (bare().dag_id, other().dag_id) == ("bare", "named")


def test_its_parameters_are_the_dags_params_a_call_and_a_param_included():
    @dag(params={"region": "eu"})
    def shaped(rows: int = 10, mode=Param("fast", enum=["fast", "slow"]), needed=None):  # noqa: B008 - Airflow's idiom
        pass

    made = shaped(rows=20)
    assert made.params["region"] == "eu" and made.params["rows"] == 20 and made.params["mode"] == "fast"

    @dag
    def without_default(size):
        pass

    assert "size" in without_default().params_json  # the run's conf must give it


def test_a_dag_param_reaches_a_task_as_the_runs_value():
    @dag
    def greet(name: str = "world", times: int = 1):
        @task
        def shout(who, count):
            return f"{who.upper()} x{count}"

        shout(name, times)
        BashOperator(task_id="echo", bash_command="echo {{ params.name }}")  # a string field: a template

    made = greet()
    assert isinstance(made.tasks["shout"].op_args[0], DagParam)
    ran = run_dag(made, conf={"name": "tock"})
    assert ran.state == "success"
    values = {instance.task_id: instance for instance in ran.task_instances}
    assert "TOCK x1" in str(values["shout"].values) and "tock" in str(values["echo"].values)


def test_a_file_calling_its_dag_functions_defines_their_dags(tmp_path):
    path = tmp_path / "decorated.py"
    path.write_text("from tock import dag, task\n\n@dag(schedule=None)\ndef first():\n    @task\n    def a():\n"
                    "        return 1\n    a()\n\nfirst()\n\n@dag\ndef second():\n    pass\n\nsecond()\n")
    assert [made.dag_id for made in load_dags(path)] == ["first", "second"]


def test_a_wrong_dag_argument_is_a_parse_error_naming_it():
    @dag(max_active_runs="many")
    def broken():
        pass

    with pytest.raises(DagDefinitionError, match="max_active_runs"):
        broken()
