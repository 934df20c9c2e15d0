"""The runner's side of control flow (issue 23): what a branch or short circuit follows, and a try that
raises the skip exception, from the user code to the outcome event the runner writes.

The child tests fork real children, as the runner starts them (no broker: each try's TaskQueued is built
here as the scheduler would write it). The outcome-to-event tests are plain values.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from infra.executors.requests import TryRequest
from infra.task_environment import TaskEnvironment
from infra.try_paths import TryPaths
from schemas import TaskFailed, TaskKilled, TaskQueued, TaskSucceeded, TaskTrySkipped, decode, encode
from services.runner.child import ERROR_LIMIT, ChildSetup
from services.runner.runner import FAILED, SUCCEEDED, _described, _outcome_event
from services.runner.supervise import Outcome, _outcome, supervise_all
from services.runner.task_code import SKIPPED_WITHOUT_REASON
from tock import load_dags
from tock.values import decode_values

REPO = Path(__file__).resolve().parents[2]
BRANCHING = REPO / "examples" / "dags" / "branching.py"

DAY = 86_400.0

DAG_FILE = '''
from tock import (DAG, AirflowSkipException, BranchPythonOperator, LatestOnlyOperator, ShortCircuitOperator,
                  TaskGroup, task)
from tock.context import get_current_context

with DAG("choices", schedule="@daily") as dag:
    @task.branch
    def pick(which):
        return which

    @task
    def left(): ...

    @task
    def right(): ...

    with TaskGroup("group") as group:
        @task
        def inner(): ...
        inner()

    pick("{{ dag_run.conf.which }}") >> [left(), right(), group]

    @task.short_circuit
    def gate():
        return get_current_context()["dag_run"].conf["open"]

    @task
    def after_gate(): ...

    gate() >> after_gate()

    @task
    def skips(ti=None):
        ti.xcom_push(key="counted", value=3)
        raise AirflowSkipException("nothing new upstream")

    @task
    def skips_silently():
        raise AirflowSkipException()

    @task
    def skips_quoting_a_secret():
        from tock import Variable
        raise AirflowSkipException("token " + Variable.get("token") + " expired")

    skips(); skips_silently(); skips_quoting_a_secret()

    op_branch = BranchPythonOperator(task_id="op_branch", python_callable=lambda: ["op_a"])
    op_branch >> [left.override(task_id="op_a")(), right.override(task_id="op_b")()]
    ShortCircuitOperator(task_id="op_gate", python_callable=lambda: 0) >> after_gate.override(task_id="op_after")()
    LatestOnlyOperator(task_id="latest") >> [left.override(task_id="l1")(), right.override(task_id="l2")()]
'''


@pytest.fixture
def dag_file(tmp_path):
    path = tmp_path / "choices.py"
    path.write_text(DAG_FILE)
    return path


def queued_of(task_id: str, conf: dict | None = None, run_type: str = "manual",
              interval_end: float | None = None) -> TaskQueued:
    end = interval_end if interval_end is not None else 1_777_000_000.0
    return TaskQueued(dag_id="choices", run_id="r1", task_id=task_id, try_number=1, executor="local",
                      queue="default", scheduler_id="s", run_type=run_type, logical_date=end - DAY,
                      data_interval_start=end - DAY, data_interval_end=end, conf_json=json.dumps(conf or {}),
                      at=1.0)


def run(tmp_path, dag_file, queued: TaskQueued, environment: dict[str, str] | None = None) -> tuple[Outcome, str]:
    request = TryRequest("choices", "r1", queued.task_id, 1, str(dag_file))
    paths = TryPaths(tmp_path / "home", request)
    paths.folder.mkdir(parents=True)
    outcomes: list[Outcome] = []
    setup = ChildSetup(TaskEnvironment.default(), queued={request.key: queued},
                       secrets=_variables(environment or {}))
    supervise_all([(request, str(paths.log))], 10.0, lambda _running: None,
                  lambda _request, outcome: outcomes.append(outcome), setup=setup)
    return outcomes[0], paths.log.read_text()


def _variables(variables: dict[str, str]):
    from infra.secrets.env import EnvironmentSecrets

    return lambda _environ, _writer: [EnvironmentSecrets({f"TOCK_VAR_{name.upper()}": value
                                                          for name, value in variables.items()})]


# -- what a choosing try reports -----------------------------------------------------------------

@pytest.mark.parametrize(("which", "follow"), [
    ("left", ("left",)),
    ("group", ("group.inner",)),  # a group id stands for its roots
])
def test_a_branch_try_reports_what_it_follows(tmp_path, dag_file, which, follow):
    outcome, _log = run(tmp_path, dag_file, queued_of("pick", {"which": which}))
    assert outcome.succeeded and outcome.follow == follow
    assert decode_values(outcome.values_json) == {"return_value": which}  # the value is passed on too


def test_a_branch_naming_no_task_of_the_dag_fails_saying_what_it_could_name(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, queued_of("pick", {"which": "nowhere"}))
    assert not outcome.succeeded and "branch task 'pick' of DAG 'choices' returned 'nowhere'" in outcome.error
    assert "(its downstream tasks: group.inner, left, right)" in outcome.error


def test_a_short_circuit_that_is_false_follows_nothing_and_one_that_is_true_makes_no_choice(tmp_path, dag_file):
    closed, _log = run(tmp_path, dag_file, queued_of("gate", {"open": False}))
    assert closed.succeeded and closed.follow == ()
    opened, _log = run(tmp_path / "again", dag_file, queued_of("gate", {"open": True}))
    assert opened.succeeded and opened.follow is None  # everything downstream runs by its trigger rule


def test_the_operators_choose_as_the_decorators_do(tmp_path, dag_file):
    branch, _log = run(tmp_path, dag_file, queued_of("op_branch"))
    gate, _log = run(tmp_path / "gate", dag_file, queued_of("op_gate"))
    assert (branch.follow, gate.follow) == (("op_a",), ())


def test_an_ordinary_task_makes_no_choice(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, queued_of("left"))
    assert outcome.succeeded and outcome.follow is None


@pytest.mark.parametrize(("run_type", "interval_end", "follow"), [
    ("manual", 1_000_000.0, ("l1", "l2")),             # a manual run always follows all
    ("scheduled", 1_000_000.0, ()),                    # an interval long past: not the latest
    ("backfill", 1_000_000.0, ()),
    ("scheduled", (time.time() // DAY) * DAY, ("l1", "l2")),  # today's interval ended, tomorrow's not yet
])
def test_latest_only_decides_from_the_runs_recorded_context(tmp_path, dag_file, run_type, interval_end, follow):
    outcome, _log = run(tmp_path, dag_file, queued_of("latest", run_type=run_type, interval_end=interval_end))
    assert outcome.succeeded and outcome.follow == follow


# -- a try that raises the skip exception ---------------------------------------------------------

def test_the_skip_exception_ends_the_try_skipped_with_its_reason_and_what_it_pushed(tmp_path, dag_file):
    outcome, log = run(tmp_path, dag_file, queued_of("skips"))
    # skipped is only read from a child that exited 0: a skip is no failure
    assert outcome.skipped and not outcome.succeeded and outcome.ended_well
    assert outcome.reason == "nothing new upstream" and outcome.error == ""
    assert decode_values(outcome.values_json) == {"counted": 3}
    assert "the try ends skipped: nothing new upstream" in log


def test_a_skip_without_a_message_says_what_happened(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, queued_of("skips_silently"))
    assert outcome.skipped and outcome.reason == SKIPPED_WITHOUT_REASON


def test_a_skip_reason_quoting_a_secret_is_masked(tmp_path, dag_file):
    outcome, log = run(tmp_path, dag_file, queued_of("skips_quoting_a_secret"), {"token": "tk-9f8e7d6c5b"})
    assert outcome.skipped and "tk-9f8e7d6c5b" not in outcome.reason and "expired" in outcome.reason
    assert "tk-9f8e7d6c5b" not in log


# -- how the supervisor reads a report, and the event the runner writes ----------------------------

EXITED_0, EXITED_1 = 0, 1 << 8  # wait statuses


@pytest.mark.parametrize(("status", "report", "expected"), [
    (EXITED_0, {"values": "", "follow": ["a"]}, Outcome(True, follow=("a",))),
    (EXITED_0, {"values": "", "follow": []}, Outcome(True, follow=())),
    (EXITED_0, {"values": ""}, Outcome(True)),
    (EXITED_0, {"values": '{"k":1}', "skipped": "why"}, Outcome(False, values_json='{"k":1}', skipped=True,
                                                               reason="why")),
    (EXITED_1, {"error": "ValueError: x", "traceback": "tb"}, Outcome(False, "ValueError: x", "tb")),
])
def test_the_supervisor_reads_the_childs_report(status, report, expected):
    assert _outcome(status, False, None, report) == expected


def test_a_report_whose_follow_is_not_task_ids_fails_the_try_rather_than_the_runner():
    outcome = _outcome(EXITED_0, False, None, {"values": "", "follow": [1]})
    assert not outcome.succeeded and "follow that is not a list of task ids" in outcome.error


REQUEST = TryRequest("choices", "r1", "pick", 2, "/dags/choices.py")


@pytest.mark.parametrize(("outcome", "expected", "code"), [
    (Outcome(True, values_json='{"return_value":"left"}', follow=("left",)),
     TaskSucceeded(dag_id="choices", run_id="r1", task_id="pick", try_number=2, runner_id="h:1:x",
                   values_json='{"return_value":"left"}', follow=["left"], at=0.0), SUCCEEDED),
    (Outcome(True), TaskSucceeded(dag_id="choices", run_id="r1", task_id="pick", try_number=2, runner_id="h:1:x",
                                  follow=None, at=0.0), SUCCEEDED),
    (Outcome(False, values_json='{"k":1}', rendered_json='{"f":"v"}', skipped=True, reason="why"),
     TaskTrySkipped(dag_id="choices", run_id="r1", task_id="pick", try_number=2, runner_id="h:1:x", reason="why",
                    values_json='{"k":1}', rendered_json='{"f":"v"}', at=0.0), SUCCEEDED),
    (Outcome(False, "boom"), TaskFailed(dag_id="choices", run_id="r1", task_id="pick", try_number=2,
                                        runner_id="h:1:x", error="boom", at=0.0), FAILED),
    (Outcome(False, "asked", killed=True), TaskKilled(dag_id="choices", run_id="r1", task_id="pick", try_number=2,
                                                      runner_id="h:1:x", reason="asked", at=0.0), FAILED),
])
def test_each_ending_is_its_event_and_exit_code(outcome, expected, code):
    event = _outcome_event(REQUEST, "h:1:x", outcome)
    assert replace(event, at=0.0) == expected
    assert decode(encode(event)) == event  # as the runner sends and spools it
    assert (SUCCEEDED if outcome.ended_well else FAILED) == code


@pytest.mark.parametrize(("outcome", "said"), [
    (Outcome(True), "succeeded"),
    (Outcome(True, follow=("a", "b")), "succeeded, following a, b"),
    (Outcome(True, follow=()), "succeeded, following none of its downstream tasks"),
    (Outcome(False, skipped=True, reason="no data"), "skipped: no data"),
])
def test_the_runners_log_line_names_the_ending(outcome, said):
    assert _described(outcome) == said


def test_a_long_skip_reason_is_bounded_in_the_report(tmp_path):
    dag = tmp_path / "long.py"
    dag.write_text("from tock import DAG, AirflowSkipException, task\n"
                   "with DAG('choices') as d:\n"
                   "    @task\n"
                   "    def skips():\n"
                   "        raise AirflowSkipException('x' * 10_000)\n"
                   "    skips()\n")
    outcome, _log = run(tmp_path, dag, queued_of("skips"))
    assert outcome.skipped and len(outcome.reason) == ERROR_LIMIT and "cut to" in outcome.reason


# -- tock dags test / tasks test: the same endings, folded by the scheduler's core ---------------------

def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tock_cli", *args], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "TOCK_HOME": str(home), "PYTHONPATH": str(REPO)})


def test_tock_dags_test_example_branching_succeeds_with_the_unchosen_tasks_skipped(tmp_path):
    done = _cli("dags", "test", "example_branching", "--file", str(BRANCHING), "--json", home=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    states = {item["task_id"]: (item["state"], item["try_number"]) for item in result["task_instances"]}
    assert result["state"] == "success"
    assert states == {"weigh": ("success", 1), "pick_carrier": ("success", 1), "freight": ("success", 1),
                      "parcel": ("skipped", 0), "shipped": ("success", 0),  # its rule tolerates the skip
                      "anything_to_bill": ("success", 1), "invoice": ("skipped", 0),
                      "only_latest": ("success", 1),  # a manual run is the latest
                      "maybe_archive": ("skipped", 1)}  # it ran, and raised the skip exception
    assert "[maybe_archive] try 1: skipped: nothing to archive today" in done.stderr
    assert "[pick_carrier] try 1: success" in done.stderr and "follows freight" in done.stderr


def test_the_local_run_writes_the_choices_and_the_skip_as_a_runner_does():
    [dag] = load_dags(BRANCHING)
    log = dag.test().log
    follows = {event.task_id: event.follow for event in log if isinstance(event, TaskSucceeded)}
    assert follows == {"weigh": None, "pick_carrier": ["freight"], "freight": None, "anything_to_bill": [],
                       "only_latest": ["maybe_archive"]}
    [skipped] = [event for event in log if isinstance(event, TaskTrySkipped)]
    assert (skipped.task_id, skipped.try_number, skipped.reason) == ("maybe_archive", 1, "nothing to archive today")
    assert not [event for event in log if isinstance(event, TaskFailed)]


def test_a_true_short_circuit_lets_everything_downstream_run(tmp_path):
    from tock import DAG, task

    with DAG("open_gate") as dag:
        @task.short_circuit
        def gate():
            return "yes"

        @task
        def first():
            return 1

        @task
        def second(value):
            return value + 1

        gate() >> second(first())
    run = dag.test()
    assert run.state == "success"
    assert {item.task_id: item.state for item in run.task_instances} == {
        "gate": "success", "first": "success", "second": "success"}


@pytest.mark.parametrize(("task_id", "printed"), [
    ("maybe_archive", "maybe_archive: skipped: nothing to archive today"),
    ("only_latest", "only_latest: success, follows maybe_archive"),  # alone: a manual run's context
])
def test_tock_tasks_test_says_how_a_choosing_or_skipping_try_ended(tmp_path, task_id, printed):
    done = _cli("tasks", "test", "example_branching", task_id, "--file", str(BRANCHING), home=tmp_path)
    assert done.returncode == 0, done.stderr  # a skip is no failure
    assert printed in done.stdout
