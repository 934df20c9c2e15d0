"""``BaseOperator`` subclasses (issue 25): a user's own operator ports as it is written for Airflow. Its
class's template_fields are rendered onto it, its execute(context) runs in the try (a real forked child
here, as the runner starts it), its return value is passed on, and a skip or an error ends the try so."""

from __future__ import annotations

import json

from infra.executors.requests import TryRequest
from infra.task_environment import TaskEnvironment
from infra.try_paths import TryPaths
from schemas import TaskQueued
from services.runner.child import ChildSetup
from services.runner.supervise import Outcome, supervise_all
from tock import DAG, load_dags
from tock.values import decode_values
from tock_cli.local_run import run_dag

DAG_FILE = '''
from tock import DAG, AirflowSkipException, BaseOperator, task


class Greet(BaseOperator):
    template_fields = ("name", "greeting")

    def __init__(self, name, greeting="hello", **kwargs):
        super().__init__(**kwargs)
        self.name, self.greeting = name, greeting

    def execute(self, context):
        context["ti"].xcom_push(key="length", value=len(self.name))
        return f"{self.greeting} {self.name} on {context['ds']}"


class SkipsOnEmpty(BaseOperator):
    def execute(self, context):
        raise AirflowSkipException("nothing to do")


class Forgot(BaseOperator):
    pass


with DAG("operators", retries=0) as dag:
    @task
    def who():
        return "tock"

    greet = Greet(task_id="greet", name="{{ ti.xcom_pull(task_ids='who') }}", greeting="hi {{ params.x }}",
                  params={"x": 1})
    who() >> greet >> SkipsOnEmpty(task_id="skips") >> Forgot(task_id="forgot", trigger_rule="all_done")
'''


def _dag(tmp_path):
    path = tmp_path / "operators.py"
    path.write_text(DAG_FILE)
    [made] = load_dags(path)
    return path, made


def test_a_subclass_is_a_task_of_kind_operator_with_its_dependencies_and_options(tmp_path):
    _path, made = _dag(tmp_path)
    greet = made.tasks["greet"]
    assert type(greet).__name__ == "Greet" and greet.template_fields == ("name", "greeting")
    tasks = {task.task_id: task for task in made.to_definition("/dags/operators.py").tasks}
    assert (tasks["greet"].kind, tasks["greet"].upstream, tasks["forgot"].trigger_rule) == (
        "operator", ["who"], "all_done")


def test_a_run_renders_its_fields_onto_it_passes_on_what_execute_returns_and_ends_skips_and_errors(tmp_path):
    _path, made = _dag(tmp_path)
    ran = run_dag(made, logical_date=1_780_000_000.0)
    states = {instance.task_id: instance.state for instance in ran.task_instances}
    assert states == {"who": "success", "greet": "success", "skips": "skipped", "forgot": "failed"}
    greet = ran.task_instance("greet")
    assert decode_values(greet.values_json) == {"return_value": "hi 1 tock on 2026-05-28", "length": 4}
    assert "must define execute" in ran.task_instance("forgot").error


def test_its_try_runs_in_a_forked_child_as_the_runner_starts_it(tmp_path):
    path, _made = _dag(tmp_path)
    request = TryRequest("operators", "r1", "skips", 1, str(path))
    paths = TryPaths(tmp_path / "home", request)
    paths.folder.mkdir(parents=True)
    queued = TaskQueued(dag_id="operators", run_id="r1", task_id="skips", try_number=1, executor="local",
                        queue="default", scheduler_id="s", params_json=json.dumps({}), at=1.0)
    outcomes: list[Outcome] = []
    supervise_all([(request, str(paths.log))], 10.0, lambda _running: None,
                  lambda _request, outcome: outcomes.append(outcome),
                  setup=ChildSetup(TaskEnvironment.default(), 1 << 20, {request.key: queued}))
    assert (outcomes[0].skipped, outcomes[0].reason) == (True, "nothing to do")


def test_a_dag_defined_with_the_operator_directly_gets_it():
    from tock import BaseOperator

    class Echo(BaseOperator):
        def execute(self, context):
            return context["task"].task_id

    with DAG("direct") as made:
        Echo(task_id="echo")
    assert run_dag(made).task_instance("echo").values_json and made.tasks["echo"].kind == "operator"
