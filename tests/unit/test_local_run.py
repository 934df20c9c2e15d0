"""A DAG run in one process (``dag.test()``, ``tock dags test``, ``tock tasks test``): the scheduler's
core decides, each try runs here with its recorded context; given a DAG, expect its run's outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from schemas import TaskQueued, TaskRetryScheduled
from tock import load_dags

REPO = Path(__file__).resolve().parents[2]

FLOW = '''
from pathlib import Path
from tock import DAG, BashTask, task

with DAG("flow", params={{"factor": 2}}, retries=2, retry_delay=3600) as dag:
    @task
    def extract():
        return {{"a": 1.5, "b": 2.5}}

    @task(multiple_outputs=True)
    def transform(orders: dict):
        return {{"total": sum(orders.values())}}

    @task
    def flaky(total, params=None):
        marks = Path({marks!r})
        marks.write_text(marks.read_text() + "x" if marks.exists() else "x")
        if len(marks.read_text()) < 2:
            raise RuntimeError("first try fails")
        return total * params["factor"]

    @task(retries=0)
    def never():
        raise ValueError("always")

    result = flaky(transform(extract())["total"])
    result >> BashTask("report", "echo {{{{ ds }}}}")
    never() >> BashTask("after_never", "echo no")
'''


@pytest.fixture
def flow(tmp_path):
    path = tmp_path / "flow.py"
    path.write_text(FLOW.format(marks=str(tmp_path / "marks")))
    [dag] = load_dags(path)
    return dag, path


def test_a_dag_runs_to_its_end_here_with_values_retries_and_failures(flow, capsys):
    dag, _path = flow
    run = dag.test(logical_date=datetime(2026, 3, 4, tzinfo=UTC), run_conf={"factor": 10})
    assert run.state == "failed"  # never() failed for good
    states = {item.task_id: (item.state, item.try_number) for item in run.task_instances}
    assert states == {"extract": ("success", 1), "transform": ("success", 1), "flaky": ("success", 2),
                      "report": ("success", 1), "never": ("failed", 1), "after_never": ("upstream_failed", 0)}
    assert run.task_instance("flaky").return_value == 40.0  # the conf's factor over the params'
    assert run.task_instance("report").return_value == "2026-03-04"
    assert "ValueError: always" in run.task_instance("never").error
    # the retry was decided as the scheduler decides it, an hour later, and not waited for
    [retry] = [event for event in run.log if isinstance(event, TaskRetryScheduled)]
    assert retry.task_id == "flaky" and retry.not_before - retry.at >= 3599
    assert "[flaky] try 1: failed" in capsys.readouterr().out


def test_each_try_is_queued_with_the_context_a_scheduler_would_record(flow):
    dag, _path = flow
    run = dag.test(logical_date=datetime(2026, 3, 4, tzinfo=UTC))
    [queued] = [event for event in run.log if isinstance(event, TaskQueued) and event.task_id == "transform"]
    assert [(item.task_id, item.try_number) for item in queued.inputs] == [("extract", 1)]
    assert json.loads(queued.params_json) == {"factor": 2}


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tock_cli", *args], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "TOCK_HOME": str(home), "PYTHONPATH": str(REPO)})


def test_tock_dags_test_prints_the_run_as_json_for_scripts(flow, tmp_path):
    _dag, path = flow
    done = _cli("dags", "test", "flow", "2026-03-04", "--file", str(path), "--json", home=tmp_path / "home")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)  # task output went to stderr
    assert result["state"] == "failed"
    by_task = {item["task_id"]: item for item in result["task_instances"]}
    assert by_task["flaky"]["values"] == {"return_value": 8.0} and by_task["flaky"]["map_index"] == -1
    assert "[extract] try 1: running" in done.stderr


def test_tock_tasks_test_runs_one_task_alone(flow, tmp_path):
    _dag, path = flow
    done = _cli("tasks", "test", "flow", "report", "2026-03-04", "--file", str(path), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert 'report: success · {"return_value":"2026-03-04"}' in done.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["dags", "test", "nope"], "no DAG 'nope'"),
    (["dags", "test", "flow", "not-a-date"], "is not ISO 8601"),
    (["dags", "test", "flow", "--conf", "[1]"], "--conf must be a JSON object"),
    (["tasks", "test", "flow", "nope"], "has no task 'nope'"),
])
def test_bad_input_is_refused_saying_what_was_wrong(flow, tmp_path, args, message):
    _dag, path = flow
    done = _cli(*args, "--file", str(path), home=tmp_path / "home")
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.parametrize("example", sorted((REPO / "examples" / "dags").glob("*.py")), ids=lambda path: path.stem)
def test_every_example_dag_runs_with_tock_dags_test(example, tmp_path):
    for dag in load_dags(example):
        done = _cli("dags", "test", dag.dag_id, "--file", str(example), "--json", home=tmp_path / "home")
        result = json.loads(done.stdout)
        assert result["state"] in ("success", "failed"), done.stderr
        assert {item["task_id"] for item in result["task_instances"]} == set(dag.tasks)


def test_a_conf_the_params_refuse_raises_naming_the_param(tmp_path):
    from tock import DAG, Param, ParamValidationError, task

    with DAG("typed", params={"n": Param(1, type="integer")}) as dag:
        @task
        def show(params=None):
            return params["n"]
        show()
    assert dag.test(run_conf={"n": 5}).task_instance("show").return_value == 5
    with pytest.raises(ParamValidationError, match="param 'n'"):
        dag.test(run_conf={"n": "five"})


def test_variables_and_connections_come_from_the_environment_as_in_a_runner(tmp_path, monkeypatch):
    from tock import DAG, Connection, Variable, task

    monkeypatch.setenv("TOCK_VAR_REGION", "eu-west-1")
    monkeypatch.setenv("TOCK_CONN_WAREHOUSE", "postgres://etl:pw-secret-1@db:5432/dw")
    with DAG("reads_secrets") as dag:
        @task
        def where():
            return [Variable.get("region"), Connection.get("warehouse").host]
        where()
    assert dag.test().task_instance("where").return_value == ["eu-west-1", "db"]


TRY_VARIABLES = '''
import os
from tock import DAG, task

with DAG("variables") as dag:
    @task
    def seen():
        return [os.environ.get(name) for name in ("TOCKRUN_DAG_ID", "TOCKRUN_RUN_ID", "TOCKRUN_TASK_ID",
                                                   "TOCKRUN_TRY_NUMBER")]

    seen()
'''


def test_a_try_here_sees_its_tockrun_variables_as_under_a_runner_and_they_are_gone_after(tmp_path, monkeypatch):
    monkeypatch.delenv("TOCKRUN_RUN_ID", raising=False)
    path = tmp_path / "variables.py"
    path.write_text(TRY_VARIABLES)
    [dag] = load_dags(path)
    run = dag.test()
    assert run.task_instance("seen").return_value == ["variables", run.run_id, "seen", "1"]
    assert "TOCKRUN_RUN_ID" not in os.environ
