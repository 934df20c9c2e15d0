"""Conformance with Airflow 3.3.2 (issue 25), through the real system: every DAG of tests/conformance/dags
(Airflow 3 syntax) is ported with `tock port`, parsed, run by the scheduler and the local executor's
runners at the recorded logical date and conf, and its outcome read from the projections (the run's
state; each task instance's state, try and the values it passed on) must equal what Airflow 3.3.2 did
(tests/conformance/recorded.json, `make conformance-record`), but for the differences listed in
tests/conformance/cases.py with their reasons."""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime

import pytest
from sqlalchemy.exc import SQLAlchemyError

from projections import queries
from projections.db import open_engine
from schemas import TriggerDagRun
from services.scheduler.core import manual_run_id
from tests.conformance.cases import CASES, DAGS, DIFFERENCES, LOGICAL_DATE, RECORDED
from tests.conformance.tock_side import compared, outcome, ported_file
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    publish_dags,
    shared_event_log,
    wait_until,
)

pytestmark = pytest.mark.scenario

FINISHED = {"success", "failed", "skipped", "upstream_failed", "removed"}


def test_every_conformance_dag_does_what_airflow_did_but_for_the_documented_differences(make_settings, system,
                                                                                          tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5)
    create_topics(settings)
    system["processes"], system["tail"] = processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    folder = tmp_path / "dags"
    folder.mkdir()
    for source in sorted(DAGS.glob("*.py")):
        publish_dags(settings, ported_file(source, folder))
    processes.scheduler("s1")
    processes.start("projector", name="projector")
    runs = {dag_id: _trigger(settings, dag_id, conf) for dag_id, conf in CASES.items()}
    recorded = json.loads(RECORDED.read_text())["runs"]
    engine = open_engine(settings)
    try:
        found = {dag_id: compared(recorded[dag_id], _projected(engine, tail, dag_id, run_id))
                 for dag_id, run_id in runs.items()}
    finally:
        engine.dispose()
    unexplained = {dag_id: [item for item in items if (dag_id, item[0], item[1]) not in DIFFERENCES]
                   for dag_id, items in found.items()}
    compared_tasks = sum(len(recorded[dag_id]["tasks"]) for dag_id in CASES)
    documented = sum(len(items) for items in found.values()) - sum(len(items) for items in unexplained.values())
    print(f"\nconformance: {len(CASES)} DAGs, {compared_tasks} task instances compared with Airflow 3.3.2; "
          f"{documented} documented difference(s), {sum(map(len, unexplained.values()))} unexplained")
    assert {dag_id: items for dag_id, items in unexplained.items() if items} == {}
    assert not [key for key in DIFFERENCES if key[1:] not in {item[:2] for item in found.get(key[0], [])}], \
        "a documented difference that no longer happens: take it out of DIFFERENCES and the README"


def _trigger(settings, dag_id: str, conf: dict) -> str:
    request_id = uuid.uuid4().hex
    event_log = shared_event_log(settings)
    event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, requested_by="conformance",
                                   conf_json=json.dumps(conf), logical_date=datetime.fromisoformat(LOGICAL_DATE)
                                   .timestamp(), at=time.time()))
    event_log.flush()
    return manual_run_id(request_id)


def _projected(engine, tail: LogTail, dag_id: str, run_id: str) -> dict:
    """The run's outcome as the projections hold it, once the run ended and every row is final."""
    finished = tail.run_finished(run_id, 300)

    def rows():
        try:
            run = queries.run(engine, dag_id, run_id)
            instances = [row for row in queries.task_instances(engine, dag_id, run_id, limit=1000)
                         if not queries.is_mapped_whole(row)]
        except SQLAlchemyError:  # the projector has not created its tables yet
            return None
        done = run is not None and run["state"] == finished.state and instances and all(
            row["state"] in FINISHED for row in instances)
        return instances if done else None

    instances = wait_until(rows, 120, f"the projector to fold run {run_id} of {dag_id}")
    # The rows' values are values_json decoded once (projections/queries.py): encoded again for decode_values.
    return outcome(finished.state, [(row["task_id"], row["map_index"], row["state"], row["try_number"] or 0,
                                     "" if row["values"] is None else json.dumps(row["values"]))
                                    for row in instances])
