"""One run of a DAG with control flow, as the DAG processor, the scheduler and the runners write it, for
the tests of "why did this task not run?" (API, CLI, web UI).

shop: weigh >> pick (a branch) >> [freight, parcel] >> shipped (an EmptyOperator, none_failed_min_one_success);
weigh >> archive (raises the skip exception); open_db (a setup) >> crm.fetch >> crm.clean.dedupe (nested task
groups crm and crm.clean) >> close_db (its teardown). In run r1 pick follows freight, so parcel is skipped
(chosen_by pick); crm.fetch fails, so crm.clean.dedupe is upstream_failed; close_db runs anyway.
"""

from __future__ import annotations

from schemas import (
    DagDefinition,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    TaskDefinition,
    TaskEmptySucceeded,
    TaskGroupDefinition,
    TaskSkipped,
    TaskSucceeded,
    TaskTrySkipped,
    TaskUpstreamFailed,
)
from tests.unit.projection_logs import lifecycle

DAG_ID, RUN_ID = "shop", "r1"
AT = 1_700_000_000.0
IDS = {"dag_id": DAG_ID, "run_id": RUN_ID}
PARCEL_REASON = "not chosen by branch pick"
DEDUPE_REASON = "an upstream task failed"


def _task(task_id: str, *upstream: str, **shape) -> TaskDefinition:
    return TaskDefinition(task_id=task_id, kind=shape.pop("kind", "python"), upstream=list(upstream), **shape)


def shop_definition() -> DagParsed:
    tasks = [_task("weigh"), _task("pick", "weigh", chooses="branch"), _task("freight", "pick"),
             _task("parcel", "pick"),
             _task("shipped", "freight", "parcel", kind="empty", trigger_rule="none_failed_min_one_success"),
             _task("archive", "weigh"), _task("open_db", is_setup=True),
             _task("crm.fetch", "open_db", task_group="crm"),
             _task("crm.clean.dedupe", "crm.fetch", task_group="crm.clean"),
             _task("close_db", "open_db", "crm.clean.dedupe", is_teardown=True, trigger_rule="all_done_setup_success")]
    groups = [TaskGroupDefinition(group_id="crm", tooltip="Customer records"),
              TaskGroupDefinition(group_id="crm.clean", parent_id="crm", tooltip="Dedupe <the> records")]
    definition = DagDefinition(dag_id=DAG_ID, file_path="/dags/shop.py", tasks=tasks, task_groups=groups)
    return DagParsed(dag_id=DAG_ID, file_path="/dags/shop.py", fingerprint="fp-shop", definition=definition, at=AT)


def shop_run() -> list:
    """The definition, then run r1 of it to its (failed) end."""
    pick = lifecycle(DAG_ID, RUN_ID, "pick", 1, AT + 3)
    pick[-1] = TaskSucceeded(**IDS, task_id="pick", try_number=1, runner_id="runner-1", follow=["freight"],
                             at=AT + 4)
    archive = lifecycle(DAG_ID, RUN_ID, "archive", 1, AT + 3)
    archive[-1] = TaskTrySkipped(**IDS, task_id="archive", try_number=1, runner_id="runner-1",
                                 reason="nothing to archive today", at=AT + 4)
    return [shop_definition(),
            DagRunCreated(**IDS, logical_date=AT, run_type="manual", dag_fingerprint="fp-shop", scheduler_id="s1",
                          at=AT + 1),
            *lifecycle(DAG_ID, RUN_ID, "weigh", 1, AT + 1), *lifecycle(DAG_ID, RUN_ID, "open_db", 1, AT + 1),
            *pick, *archive, *lifecycle(DAG_ID, RUN_ID, "freight", 1, AT + 5),
            TaskSkipped(**IDS, task_id="parcel", reason=PARCEL_REASON, trigger_rule="all_success",
                        upstream_states={"pick": "success"}, chosen_by="pick", at=AT + 5),
            TaskEmptySucceeded(**IDS, task_id="shipped", scheduler_id="s1", at=AT + 7),
            *lifecycle(DAG_ID, RUN_ID, "crm.fetch", 1, AT + 3, outcome="failed"),
            TaskUpstreamFailed(**IDS, task_id="crm.clean.dedupe", reason=DEDUPE_REASON, trigger_rule="all_success",
                               upstream_states={"crm.fetch": "failed"}, at=AT + 5),
            *lifecycle(DAG_ID, RUN_ID, "close_db", 1, AT + 6),
            DagRunFinished(**IDS, state="failed", reason="crm.fetch failed", at=AT + 8)]
