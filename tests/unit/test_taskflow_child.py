"""TaskFlow in the runner's child: given a try's TaskQueued (its recorded context and inputs), the user
code gets its arguments and context, and the outcome carries the values it passes on.

Real forked children, as the runner starts them; no broker: the TaskQueued is built here as the
scheduler would write it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from infra.executors.requests import TryRequest
from infra.task_environment import TaskEnvironment
from infra.try_paths import TryPaths
from schemas import TaskQueued, TryInput
from services.runner.child import ChildSetup
from services.runner.supervise import Outcome, supervise_all
from tock.values import decode_values, encode_values

DAG_FILE = '''
import dataclasses, datetime
from tock import DAG, BashTask, task
from tock.context import get_current_context

@dataclasses.dataclass
class Order:
    id: int
    total: float

with DAG("flow", params={"factor": 2}) as dag:
    @task
    def extract():
        return {"1001": 301.27, "1002": 433.21}

    @task(multiple_outputs=True)
    def transform(orders: dict):
        return {"total_order_value": sum(orders.values()), "count": len(orders)}

    @task
    def load(total: float, params=None):
        return round(total * params["factor"], 2)

    orders = extract()
    summary = transform(orders)
    load(summary["total_order_value"])

    @task
    def annotated() -> dict[str, int]:
        return {"a": 1}

    @task
    def reads_context(ti, ds, logical_date, **context):
        current = get_current_context()
        ti.xcom_push(key="seen", value=[ti.try_number, ds, logical_date, context["run_id"],
                                        current["dag_run"].conf, context["data_interval_start"]])

    @task
    def pulls():
        ti = get_current_context()["ti"]
        return [ti.xcom_pull(task_ids="extract"), ti.xcom_pull(task_ids=["extract"], key="missing", default=0)]

    orders >> pulls()

    @task
    def pulls_a_stranger():
        return get_current_context()["ti"].xcom_pull(task_ids="annotated")

    @task
    def returns_a_socket():
        import socket
        return socket.socket()

    @task
    def returns_too_much():
        return "x" * 5000

    @task
    def returns_megabytes():
        return "\\\\" * 3_000_000  # each escaped twice on its way to the runner

    @task
    def returns_types():
        return (datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.timezone.utc), {1, 2},
                datetime.timedelta(hours=1), Order(7, 9.5), {(1, 2): "pair"})

    @task(multiple_outputs=True)
    def returns_a_list_for_many():
        return [1, 2]

    reads_context(); pulls_a_stranger(); returns_a_socket(); returns_too_much(); returns_types(); returns_megabytes()
    returns_a_list_for_many(); annotated()
    BashTask("bash_last_line", "echo first; echo 'the last line'")
    BashTask("bash_no_output", "true")
    BashTask("bash_fails", "echo partial; exit 3")
    BashTask("bash_killed", "kill -TERM $$")
    BashTask("bash_skips", "echo nothing new; exit 99")
    BashTask("bash_skips_on_its_own_code", "exit 7", skip_on_exit_code=[7, 8])
    BashTask("bash_fails_on_99_without_a_skip_code", "exit 99", skip_on_exit_code=None)
    BashTask("bash_quiet", "echo value", do_xcom_push=False)
    BashTask("bash_templated", 'echo "{{ ds }} $GREETING {{ params.factor }} {{ dag_run.conf.k }}"',
             env={"GREETING": "hello {{ ds_nodash }}"})
    BashTask("bash_bad_template", "echo {{ no_such_name }}")

    @task(templates_dict={"day": "{{ macros.ds_add(ds, 1) }}"})
    def templated(word, templates_dict=None):
        return [word, templates_dict["day"]]

    templated("{{ ds_nodash }}-{{ ti.try_number }}")

    @task
    def fails_for_good():
        from tock import AirflowFailException
        raise AirflowFailException("the input is wrong: no retry helps")

    @task
    def fails_once():
        from tock import AirflowException
        raise AirflowException("the service was away")

    fails_for_good(); fails_once()
'''

LOGICAL = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)


@pytest.fixture
def dag_file(tmp_path):
    path = tmp_path / "flow.py"
    path.write_text(DAG_FILE)
    return path


def queued_of(task_id: str, inputs: list[TryInput] = (), conf: dict | None = None,
              params: dict | None = None) -> TaskQueued:
    return TaskQueued(dag_id="flow", run_id="r1", task_id=task_id, try_number=1, executor="local", queue="default",
                      scheduler_id="s", run_type="manual", logical_date=LOGICAL.timestamp(),
                      data_interval_start=LOGICAL.timestamp(), data_interval_end=LOGICAL.timestamp(),
                      conf_json=json.dumps(conf or {}), params_json=json.dumps(params or {"factor": 2}),
                      inputs=list(inputs), at=1.0)


def values(task_id: str, value, limit: int = 1 << 20) -> TryInput:
    return TryInput(task_id=task_id, try_number=1, values_json=encode_values(value, limit))


def run(tmp_path, dag_file, task_id, queued: TaskQueued | None = None, limit: int = 1 << 20) -> tuple[Outcome, str]:
    request = TryRequest("flow", "r1", task_id, 1, str(dag_file))
    paths = TryPaths(tmp_path / "home", request)
    paths.folder.mkdir(parents=True)
    outcomes: list[Outcome] = []
    setup = ChildSetup(TaskEnvironment.default(), limit, {request.key: queued or queued_of(task_id)})
    supervise_all([(request, str(paths.log))], 10.0, lambda _running: None,
                  lambda _request, outcome: outcomes.append(outcome), setup=setup)
    return outcomes[0], paths.log.read_text()


def test_the_return_value_is_what_the_try_passes_on(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "extract")
    assert outcome.succeeded
    assert decode_values(outcome.values_json) == {"return_value": {"1001": 301.27, "1002": 433.21}}


def test_an_upstream_value_is_the_argument_and_multiple_outputs_passes_each_key(tmp_path, dag_file):
    inputs = [values("extract", {"return_value": {"a": 1.5, "b": 2.5}})]
    outcome, _log = run(tmp_path, dag_file, "transform", queued_of("transform", inputs))
    assert decode_values(outcome.values_json) == {
        "total_order_value": 4.0, "count": 2, "return_value": {"total_order_value": 4.0, "count": 2}}


def test_a_key_of_an_upstream_value_is_the_argument_and_params_come_from_the_record(tmp_path, dag_file):
    inputs = [values("transform", {"total_order_value": 4.0, "return_value": {}})]
    outcome, _log = run(tmp_path, dag_file, "load", queued_of("load", inputs, params={"factor": 3}))
    assert decode_values(outcome.values_json) == {"return_value": 12.0}


def test_a_function_annotated_to_return_a_dict_passes_its_keys(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "annotated")
    assert decode_values(outcome.values_json) == {"a": 1, "return_value": {"a": 1}}


def test_context_keys_as_arguments_and_from_get_current_context(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "reads_context", queued_of("reads_context", conf={"k": "v"}))
    assert decode_values(outcome.values_json) == {
        "seen": [1, "2026-05-04", LOGICAL, "r1", {"k": "v"}, LOGICAL]}


def test_xcom_pull_reads_upstream_values_with_defaults(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "pulls", queued_of("pulls", [values("extract", {"return_value": 5})]))
    assert decode_values(outcome.values_json) == {"return_value": [5, [0]]}


def test_pulling_from_a_task_that_is_not_upstream_fails_saying_so(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "pulls_a_stranger")
    assert not outcome.succeeded
    assert "'annotated', which is not upstream of it" in outcome.error


def test_a_value_that_cannot_travel_fails_the_try_naming_the_task_and_the_type(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "returns_a_socket")
    assert not outcome.succeeded
    assert "task 'returns_a_socket': value 'return_value' is a socket.socket" in outcome.error


def test_values_over_the_limit_fail_the_try_naming_the_size(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "returns_too_much", limit=2048)
    assert not outcome.succeeded
    assert "ValueTooLarge: task 'returns_too_much': its values are 5,019 bytes encoded, more than the 2,048" \
        in outcome.error


def test_a_value_of_megabytes_reaches_the_runner_whole(tmp_path, dag_file):
    # The child's report was cut at 1 MiB: the try succeeded with its value silently lost.
    outcome, _log = run(tmp_path, dag_file, "returns_megabytes", limit=8 << 20)
    assert outcome.succeeded and decode_values(outcome.values_json) == {"return_value": "\\" * 3_000_000}


def test_datetimes_sets_timedeltas_dataclasses_and_other_keys_come_back_as_themselves(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "returns_types")
    [moment, numbers, delta, order, pairs] = decode_values(outcome.values_json)["return_value"]
    assert (moment, numbers, delta, pairs) == (datetime(2026, 1, 2, 3, 4, tzinfo=UTC), {1, 2},
                                               __import__("datetime").timedelta(hours=1), {(1, 2): "pair"})
    assert order == {"id": 7, "total": 9.5}  # its class lives in the DAG file, not importable here


def test_multiple_outputs_of_something_not_a_dict_fails_saying_what_it_was(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "returns_a_list_for_many")
    assert "multiple_outputs=True but returned a list" in outcome.error


@pytest.mark.parametrize(("task_id", "expected"), [
    ("bash_last_line", {"return_value": "the last line"}),
    ("bash_no_output", {}),
    ("bash_quiet", {}),
])
def test_a_bash_task_passes_its_last_line_on(tmp_path, dag_file, task_id, expected):
    outcome, log = run(tmp_path, dag_file, task_id)
    assert outcome.succeeded and decode_values(outcome.values_json) == expected
    if task_id == "bash_last_line":
        assert log.splitlines()[-2:] == ["first", "the last line"]


def test_a_bash_task_is_rendered_with_its_context_and_the_rendering_recorded(tmp_path, dag_file):
    outcome, log = run(tmp_path, dag_file, "bash_templated", queued_of("bash_templated", conf={"k": "v"}))
    assert log.strip() == "2026-05-04 hello 20260504 2 v"
    assert json.loads(outcome.rendered_json)["env"] == {"GREETING": "hello 20260504"}


def test_a_python_tasks_arguments_and_templates_dict_are_rendered(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "templated")
    assert decode_values(outcome.values_json) == {"return_value": ["20260504-1", "2026-05-05"]}


def test_a_template_error_fails_the_try_naming_the_field_and_line(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "bash_bad_template")
    assert not outcome.succeeded
    assert "field bash_command, template <string>, line 1" in outcome.error and "no_such_name" in outcome.error


@pytest.mark.parametrize(("task_id", "error"), [
    ("bash_fails", "user code exited with code 3"),
    ("bash_killed", "user code killed by signal SIGTERM (15)"),
    ("bash_fails_on_99_without_a_skip_code", "user code exited with code 99"),
])
def test_a_bash_task_that_fails_ends_as_before(tmp_path, dag_file, task_id, error):
    outcome, _log = run(tmp_path, dag_file, task_id)
    assert (outcome.succeeded, outcome.error) == (False, error)


@pytest.mark.parametrize(("task_id", "status"), [("bash_skips", 99), ("bash_skips_on_its_own_code", 7)])
def test_a_bash_task_exiting_with_a_skip_code_ends_skipped_not_failed(tmp_path, dag_file, task_id, status):
    outcome, _log = run(tmp_path, dag_file, task_id)
    assert outcome.skipped and not outcome.succeeded and outcome.ended_well
    assert outcome.reason == f"the command exited with {status}, one of its skip_on_exit_code"


def test_a_try_queued_before_contexts_were_recorded_runs_with_none(tmp_path, dag_file):
    request = TryRequest("flow", "r1", "extract", 1, str(dag_file))
    paths = TryPaths(tmp_path / "home", request)
    paths.folder.mkdir(parents=True)
    outcomes: list[Outcome] = []
    supervise_all([(request, str(paths.log))], 10.0, lambda _running: None,
                  lambda _request, outcome: outcomes.append(outcome))
    assert outcomes[0].succeeded


def test_airflow_fail_exception_fails_the_try_saying_it_must_not_be_retried(tmp_path, dag_file):
    for_good, _log = run(tmp_path / "a", dag_file, "fails_for_good")
    once, _log = run(tmp_path / "b", dag_file, "fails_once")
    assert (for_good.succeeded, for_good.retryable, once.succeeded, once.retryable) == (False, False, False, True)
    assert "AirflowFailException: the input is wrong" in for_good.error
