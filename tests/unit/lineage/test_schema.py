"""The emitted JSON (services/lineage/run_events.py) against the real OpenLineage schemas (openlineage_spec/)."""

from __future__ import annotations

import json

import pytest
from openlineage.client.event_v2 import RunEvent
from openlineage.client.facet_v2 import (
    error_message_run,
    job_type_job,
    nominal_time_run,
    parent_run,
    processing_engine_run,
)

from schemas import TaskAdopted, TaskDeclaredDead, TaskKilled, TaskKillRequested
from services.lineage.core import lineage_of_log
from services.lineage.run_events import message_key, to_json
from tests.unit.lineage.openlineage_schema import CORE_ID, assert_valid, known_ids, problems
from tests.unit.lineage.test_lineage_core import DAG, LOG, RUN, created, failed, finished, queued, started, succeeded

ASSETS = json.dumps([{"uri": "s3://lake/orders", "name": "orders"}])
RICH = [*LOG[:-1], queued("c", inlets='{"s3://lake/orders": []}', at=8.6), started("c", at=8.7),
        succeeded("c", at=8.8, assets=ASSETS), queued("d", at=8.9), started("d", at=9.0),
        TaskAdopted(dag_id=DAG, run_id=RUN, task_id="d", try_number=1, handle="h", by_scheduler="s2",
                    from_scheduler="s1", at=9.1),
        TaskKilled(dag_id=DAG, run_id=RUN, task_id="d", try_number=1, runner_id="r1", reason="", at=9.2),
        queued("e", at=9.3), TaskKillRequested(dag_id=DAG, run_id=RUN, task_id="e", try_number=1, reason="cleared",
                                               scheduler_id="s1", at=9.4),
        queued("f", at=9.5), started("f", at=9.6),
        TaskDeclaredDead(dag_id=DAG, run_id=RUN, task_id="f", try_number=1, reason="lost", scheduler_id="s2", at=9.7),
        queued("g", at=9.8), started("g", at=9.9), failed("g", at=10.0), finished("failed", at=11.0)]


def test_every_event_of_a_busy_run_is_a_valid_openlineage_run_event():
    events = lineage_of_log(RICH)
    assert {item.event_type for item in events} == {"START", "RUNNING", "COMPLETE", "FAIL", "ABORT"}
    for item in events:
        assert_valid(json.loads(to_json(item)))


def test_the_same_lineage_event_serializes_to_the_same_bytes():
    assert [to_json(item) for item in lineage_of_log(RICH)] == [to_json(item) for item in lineage_of_log(RICH)]


@pytest.mark.parametrize(("path", "value"), [
    (("run", "runId"), "not-a-uuid"),
    (("eventType",), "DONE"),
    (("eventTime",), "yesterday"),
    (("run", "facets", "errorMessage", "programmingLanguage"), None),
    (("run", "facets", "parent", "run", "runId"), "nope"),
])
def test_the_validation_is_real_a_broken_event_fails_it(path, value):
    document = json.loads(to_json(lineage_of_log([created(), queued("g"), started("g"), failed("g")])[-1]))
    target = document
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    assert problems(document)


def test_the_schemas_kept_are_the_versions_the_client_stamps_on_its_events():
    stamped = {RunEvent._get_schema(), parent_run.ParentRunFacet._get_schema(),
               error_message_run.ErrorMessageRunFacet._get_schema(),
               nominal_time_run.NominalTimeRunFacet._get_schema(), job_type_job.JobTypeJobFacet._get_schema(),
               processing_engine_run.ProcessingEngineRunFacet._get_schema()}
    assert {url.split("#")[0] for url in stamped} <= known_ids()
    assert CORE_ID in known_ids()


def test_a_tries_events_are_keyed_by_its_dag_as_the_kafka_transport_keys_them():
    run_start, try_start = lineage_of_log([created(), queued("t"), started("t")])
    assert message_key(run_start) == message_key(try_start) == f"run:tock/{DAG}"
