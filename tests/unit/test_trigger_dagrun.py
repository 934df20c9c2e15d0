"""``TriggerDagRunOperator`` (issue 24): its fields rendered, the command its runner appends before the
success with a request id the same for every try (one run, whatever retries), the run id pushed,
``reset_dag_run`` clearing on a later try, and what is not offered refused at parse time."""

from __future__ import annotations

import pytest

from schemas import ClearTask, TriggerDagRun
from services.runner.core.commands import commands_of
from services.runner.supervise import Outcome
from tock import DAG, DagDefinitionError, TriggerDagRunOperator
from tock.trigger_dagrun import derived_request_id
from tock_cli.local_run import run_dag


def test_a_try_asks_for_one_trigger_with_its_rendered_conf_and_pushes_the_run_id():
    with DAG("source", schedule=None) as dag:
        TriggerDagRunOperator(task_id="kick", trigger_dag_id="target", conf={"day": "{{ ds }}", "n": 2})
    lines: list[str] = []
    run = run_dag(dag, report=lines.append)
    assert run.state == "success"
    assert any("would append TriggerDagRun for target" in line for line in lines)
    pushed = run.task_instance("kick").values["trigger_run_id"]
    assert pushed == f"manual__{derived_request_id('source', run.run_id, 'kick', -1, 'target')}"


def test_the_request_id_is_the_same_for_every_try_of_an_instance_and_differs_between_instances():
    first = derived_request_id("s", "r1", "kick", -1, "target")
    assert first == derived_request_id("s", "r1", "kick", -1, "target")
    assert len({first, derived_request_id("s", "r2", "kick", -1, "target"),
                derived_request_id("s", "r1", "kick", 0, "target")}) == 3


def test_a_succeeded_outcome_gives_its_commands_and_any_other_none():
    items = ({"command": "TriggerDagRun", "dag_id": "t", "request_id": "abc", "conf_json": '{"a": 1}',
              "logical_date": 5.0},
             {"command": "ClearTask", "dag_id": "t", "run_id": "manual__abc", "request_id": "abc.reset.2"},
             {"command": "Nonsense"}, {"command": "TriggerDagRun"})
    made = commands_of(Outcome(True, commands=items), 9.0)
    assert [type(event) for event in made] == [TriggerDagRun, ClearTask]
    assert (made[0].request_id, made[0].conf_json, made[0].logical_date) == ("abc", '{"a": 1}', 5.0)
    assert commands_of(Outcome(False, commands=items), 9.0) == []


@pytest.mark.parametrize("options, words", [({"skip_when_already_exists": True}, "skip_when_already_exists is not"),
                                            ({"wait_for_completion": True, "allowed_states": ["done"]},
                                             "allowed_states names 'done'"),
                                            ({"wait_for_completion": True, "failed_states": ["success"]},
                                             "both allowed and failed"),
                                            ({"trigger_dag_id": ""}, "trigger_dag_id must be"),
                                            ({"conf": [1]}, "conf must be a dict")])
def test_what_is_not_offered_or_wrong_is_refused_at_parse_time(options, words):
    arguments = {"task_id": "kick", "trigger_dag_id": "target", **options}
    with pytest.raises((ValueError, TypeError, DagDefinitionError), match=words), DAG("source", schedule=None):
        TriggerDagRunOperator(**arguments)


def test_wait_for_completion_makes_a_wait_on_the_triggered_run_after_the_success():
    with DAG("source", schedule=None) as dag:
        TriggerDagRunOperator(task_id="kick", trigger_dag_id="target", wait_for_completion=True, deferrable=True,
                              poke_interval=5, allowed_states=["success", "failed"], failed_states=[])
    [task] = dag.to_definition("/dags/source.py").tasks
    assert task.kind == "python" and task.external is not None
    assert (task.external.external_dag_id, task.external.after_success, task.external.allowed_states,
            task.external.failed_states) == ("target", True, ["success", "failed"], [])
