"""Why a task did not run, as the reads show it: the task_instance and dag folds keep the decision's
rule, upstream states, branch and what a branch followed, and the task groups; the history view says it."""

from __future__ import annotations

import json

import pytest

from projections.records import payload_json
from projections.view import fold
from schemas import (
    DagDefinition,
    DagParsed,
    TaskCleared,
    TaskDefinition,
    TaskEmptySucceeded,
    TaskGroupDefinition,
    TaskQueued,
    TaskRemoved,
    TaskSkipped,
    TaskStarted,
    TaskSucceeded,
    TaskTrySkipped,
    TaskUpstreamFailed,
)
from schemas.decisions_view import decision_fields, described_decision
from tests.unit.projection_logs import LogBuilder

IDS = {"dag_id": "shop", "run_id": "r1"}
SKIPPED = TaskSkipped(**IDS, task_id="parcel", reason="not chosen by pick", trigger_rule="all_success",
                      upstream_states={"pick": "success"}, chosen_by="pick", at=5.0)
GAVE_UP = TaskUpstreamFailed(**IDS, task_id="ship", reason="an upstream task failed", trigger_rule="all_success",
                             upstream_states={"pack": "failed", "weigh": "success"}, at=6.0)


def _view(*events):
    builder = LogBuilder()
    for event in events:
        builder.add(event)
    return fold(builder.records)


def _instance(task_id: str, *events):
    return _view(*events).rows["task_instance"][("shop", "r1", task_id, -1)]


def _tried(task_id: str, at: float = 1.0) -> list:
    return [TaskQueued(**IDS, task_id=task_id, try_number=1, executor="local", queue="default", scheduler_id="s1",
                       at=at),
            TaskStarted(**IDS, task_id=task_id, try_number=1, runner_id="w1", hostname="h", pid=1, at=at + 1)]


def test_a_skip_keeps_its_rule_upstream_states_and_the_branch_that_chose():
    row = _instance("parcel", SKIPPED)
    assert (row["state"], row["reason"], row["trigger_rule"], row["chosen_by"]) == (
        "skipped", "not chosen by pick", "all_success", "pick")
    assert json.loads(row["upstream_states_json"]) == {"pick": "success"}


def test_an_upstream_failure_keeps_its_rule_and_states_and_no_branch():
    row = _instance("ship", GAVE_UP)
    assert (row["state"], row["trigger_rule"], row["chosen_by"]) == ("upstream_failed", "all_success", None)
    assert json.loads(row["upstream_states_json"]) == {"pack": "failed", "weigh": "success"}


@pytest.mark.parametrize(("follow", "kept"), [(["freight"], '["freight"]'), ([], "[]"), (None, None)])
def test_a_success_keeps_what_a_branch_followed(follow, kept):
    success = TaskSucceeded(**IDS, task_id="pick", try_number=1, runner_id="w1", follow=follow, at=3.0)
    assert _instance("pick", *_tried("pick"), success)["follow_json"] == kept


def test_a_clear_and_the_next_try_forget_the_old_decision():
    cleared = TaskCleared(**IDS, task_id="parcel", try_number=0, at=7.0)
    row = _instance("parcel", SKIPPED, cleared)
    assert (row["state"], row["trigger_rule"], row["upstream_states_json"], row["chosen_by"]) == (
        "cleared", None, None, None)
    queued = _tried("parcel", at=8.0)[0]
    assert _instance("parcel", SKIPPED, queued)["trigger_rule"] is None


def test_a_skipped_try_and_an_empty_success_are_states_with_their_reason():
    skipped = TaskTrySkipped(**IDS, task_id="archive", try_number=1, runner_id="w1", reason="nothing today", at=3.0)
    row = _instance("archive", *_tried("archive"), skipped)
    assert (row["state"], row["reason"]) == ("skipped", "nothing today")
    empty = TaskEmptySucceeded(**IDS, task_id="done", scheduler_id="s1", at=4.0)
    assert _instance("done", empty)["state"] == "success"


def test_the_dag_row_keeps_task_groups_and_each_tasks_shape():
    tasks = [TaskDefinition(task_id="crm.clean.dedupe", kind="bash", task_group="crm.clean"),
             TaskDefinition(task_id="setup_db", kind="bash", is_setup=True),
             TaskDefinition(task_id="drop_db", kind="bash", is_teardown=True, trigger_rule="all_done_setup_success",
                            upstream=["setup_db"])]
    groups = [TaskGroupDefinition(group_id="crm", tooltip="Customer records"),
              TaskGroupDefinition(group_id="crm.clean", parent_id="crm")]
    definition = DagDefinition(dag_id="shop", file_path="/d.py", tasks=tasks, task_groups=groups)
    row = _view(DagParsed(dag_id="shop", file_path="/d.py", fingerprint="f", definition=definition,
                          at=1.0)).rows["dag"][("shop",)]
    assert json.loads(row["task_groups_json"]) == [{"group_id": "crm", "parent_id": "", "tooltip": "Customer records"},
                                                   {"group_id": "crm.clean", "parent_id": "crm", "tooltip": ""}]
    shapes = {task["task_id"]: (task["task_group"], task["is_setup"], task["is_teardown"], task["trigger_rule"])
              for task in json.loads(row["tasks_json"])}
    assert shapes == {"crm.clean.dedupe": ("crm.clean", False, False, "all_success"),
                      "setup_db": ("", True, False, "all_success"),
                      "drop_db": ("", False, True, "all_done_setup_success")}


def _said(event) -> str:
    return described_decision(type(event).__name__, json.loads(payload_json(event)))


def test_history_says_why_a_task_did_not_run():
    assert _said(SKIPPED) == "not chosen by pick; trigger rule all_success; upstream pick=success; chosen by pick"
    assert _said(GAVE_UP) == ("an upstream task failed; trigger rule all_success; "
                              "upstream pack=failed, weigh=success")
    assert _said(TaskTrySkipped(**IDS, task_id="a", try_number=1, runner_id="w", reason="no rows", at=1.0)) == (
        "its code raised the skip exception; no rows")
    assert _said(TaskEmptySucceeded(**IDS, task_id="a", scheduler_id="s1", at=1.0)) == (
        "an empty task: ended by scheduler s1, no try")
    assert _said(TaskRemoved(**IDS, task_id="a", reason="gone from the file", at=1.0)) == "removed; gone from the file"


@pytest.mark.parametrize(("follow", "said"), [(["freight", "parcel"], "followed freight, parcel"),
                                              ([], "followed none (every downstream task skipped)"), (None, "")])
def test_history_says_what_a_branch_followed(follow, said):
    assert _said(TaskSucceeded(**IDS, task_id="pick", try_number=1, runner_id="w", follow=follow, at=1.0)) == said


def test_decision_fields_are_typed_and_absent_for_other_events():
    fields = decision_fields("TaskSkipped", json.loads(payload_json(SKIPPED)))
    assert {name: fields[name] for name in ("reason", "trigger_rule", "upstream_states", "chosen_by", "follow")} == {
        "reason": "not chosen by pick", "trigger_rule": "all_success", "upstream_states": {"pick": "success"},
        "chosen_by": "pick", "follow": None}
    queued = decision_fields("TaskQueued", {"reason": "ignored", "try_number": 1})
    assert queued == {"reason": None, "trigger_rule": None, "upstream_states": None, "chosen_by": None,
                      "follow": None, "why": ""}


def test_a_deferral_and_its_ends_are_said_in_words():
    from schemas.decisions_view import described_decision

    moment = 1_790_000_000.0  # 2026-09-21 14:13:20 UTC
    assert described_decision("TaskDeferred", {"external_dag_id": "etl", "until": moment}) == (
        "deferred by the scheduler, no try: waiting on DAG etl, until 2026-09-21 14:13:20 UTC at most")
    assert described_decision("TaskDeferred", {"external_dag_id": "", "until": moment}).startswith(
        "deferred by the scheduler, no try: waiting on its moment")
    assert described_decision("TimeSensorMet", {"moment": moment}) == (
        "its moment 2026-09-21 14:13:20 UTC came: it succeeds, no try")
    assert described_decision("ExternalTaskReported", {"external_dag_id": "etl", "outcome": "failed",
                                                       "reason": "load of 'etl' in failed states"}) == (
        "DAG etl answered: failed; load of 'etl' in failed states")
