"""Conformance with Airflow 3.3.2 (issue 25), through the real system: every DAG of tests/conformance/dags
(Airflow 3 syntax) is ported with `tock port`, parsed, run by the scheduler and the local executor's
runners at the recorded logical date and conf, and its outcome read from the projections (the run's
state; each task instance's state, try and the values it passed on; the asset events its tasks produced
and the runs of other DAGs it triggered) must equal what Airflow 3.3.2 did (tests/conformance/recorded.json,
`make conformance-record`), but for the differences listed in tests/conformance/cases.py with their
reasons. A few cases run again with every task on Celery workers or in Kubernetes pods."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from infra.settings import Settings
from projections import queries
from projections.db import open_engine
from schemas import DagDefinition, TaskLaunched, TriggerDagRun
from schemas.tasks import instance_name
from services.scheduler.core import manual_run_id
from tests.conformance.cases import (
    CASES,
    DAGS,
    DIFFERENCES,
    LOGICAL_DATE,
    ON_EXECUTORS,
    RECORDED,
    TRIGGERED_ONLY,
)
from tests.conformance.tock_side import compared, outcome, ported_file
from tests.scenarios.kube_support import kube_settings, on_every_executor
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
# How long the run's effects (asset events, triggered runs) may take to reach the projections after its end.
EFFECTS_TIMEOUT = 60.0


def test_every_conformance_dag_does_what_airflow_did_but_for_the_documented_differences(make_settings, system,
                                                                                          tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5)
    create_topics(settings)
    system["processes"], system["tail"] = processes, system_tail = Processes(settings, tmp_path / "logs"), \
        LogTail(settings)
    _publish_ported(settings, tmp_path / "dags", executors={})
    processes.scheduler("s1")
    processes.start("projector", name="projector")
    found = _run_and_compare(settings, system_tail, CASES)
    unexplained = _unexplained(found)
    recorded = json.loads(RECORDED.read_text())["runs"]
    documented = sum(len(items) for items in found.values()) - sum(len(items) for items in unexplained.values())
    print(f"\nconformance: {len(CASES)} DAGs, {sum(len(recorded[dag_id]['tasks']) for dag_id in CASES)} task "
          f"instances compared with Airflow 3.3.2; {documented} documented difference(s), "
          f"{sum(map(len, unexplained.values()))} unexplained")
    _assert_none(unexplained)
    assert not [key for key in DIFFERENCES if key[1:] not in {item[:2] for item in found.get(key[0], [])}], \
        "a documented difference that no longer happens: take it out of DIFFERENCES and the README"


def test_conformance_dags_on_celery_workers_and_in_kubernetes_pods(make_settings, kube_namespace, redis_url, system,
                                                                    tmp_path):
    """The same definitions with every task on another executor (the executor is the installation's
    choice, not the DAG's semantics): the same outcome as Airflow's, and each try ran where it was sent."""
    settings = kube_settings(make_settings, kube_namespace, redis_url, task_heartbeat_seconds=0.5)
    system_tail = on_every_executor(settings, system, tmp_path)
    executors = {dag_id: executor for executor, dag_ids in ON_EXECUTORS.items() for dag_id in dag_ids}
    _publish_ported(settings, tmp_path / "dags", executors)
    system["processes"].scheduler("s1")
    system["processes"].start("projector", name="projector")
    found = _run_and_compare(settings, system_tail, {dag_id: CASES[dag_id] for dag_id in executors})
    _assert_none(_unexplained(found))
    launched = {(event.dag_id, event.executor) for event in system_tail.of_type(TaskLaunched)}
    assert launched == set(executors.items()), launched


def _publish_ported(settings: Settings, folder: Path, executors: dict[str, str]) -> None:
    """Each file ported with `tock port` and its DAGs published as the DAG processor would; a DAG named in
    ``executors`` with every task on that executor, the others as they are."""
    folder.mkdir()

    def on_its_executor(definition: DagDefinition) -> DagDefinition:
        executor = executors.get(definition.dag_id)
        if executor is None:
            return definition
        return replace(definition, tasks=[replace(task, executor=executor) for task in definition.tasks])

    for source in sorted(DAGS.glob("*.py")):
        publish_dags(settings, ported_file(source, folder), on_its_executor)


def _run_and_compare(settings: Settings, tail: LogTail, cases: dict[str, dict]) -> dict[str, list]:
    runs = {dag_id: _trigger(settings, dag_id, conf) for dag_id, conf in cases.items()}
    recorded = json.loads(RECORDED.read_text())["runs"]
    engine = open_engine(settings)
    try:
        return {dag_id: compared(recorded[dag_id], _projected(engine, tail, dag_id, run_id, recorded[dag_id]))
                for dag_id, run_id in runs.items()}
    finally:
        engine.dispose()


def _unexplained(found: dict[str, list]) -> dict[str, list]:
    return {dag_id: [item for item in items if (dag_id, item[0], item[1]) not in DIFFERENCES]
            for dag_id, items in found.items()}


def _assert_none(unexplained: dict[str, list]) -> None:
    found = {dag_id: items for dag_id, items in unexplained.items() if items}
    assert not found, "differences from Airflow 3.3.2 that cases.DIFFERENCES does not list (task, what, Airflow's, " \
                      "Tock's):\n" + json.dumps(found, indent=1, default=str)


def _trigger(settings: Settings, dag_id: str, conf: dict) -> str:
    request_id = uuid.uuid4().hex
    event_log = shared_event_log(settings)
    event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, requested_by="conformance",
                                   conf_json=json.dumps(conf), logical_date=datetime.fromisoformat(LOGICAL_DATE)
                                   .timestamp(), at=time.time()))
    event_log.flush()
    return manual_run_id(request_id)


def _projected(engine: Engine, tail: LogTail, dag_id: str, run_id: str, recorded: dict) -> dict:
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
                                    for row in instances], _effects(engine, dag_id, run_id, recorded))


def _effects(engine: Engine, dag_id: str, run_id: str, recorded: dict) -> dict:
    """The asset events the run produced and the runs it triggered, as the projections hold them: waited for
    until there are as many as Airflow's record has (or EFFECTS_TIMEOUT), then compared as they are."""
    expected_events, expected_runs = len(recorded.get("asset_events", [])), len(recorded.get("triggered", []))
    deadline = time.monotonic() + EFFECTS_TIMEOUT
    while True:
        events, triggered = _asset_events(engine, dag_id, run_id), _triggered_runs(engine, recorded)
        if (len(events) >= expected_events and len(triggered) >= expected_runs) or time.monotonic() > deadline:
            return {key: found for key, found in (("asset_events", events), ("triggered", triggered)) if found}
        time.sleep(0.2)


def _asset_events(engine: Engine, dag_id: str, run_id: str) -> list[dict]:
    rows = [row for row in queries.asset_events(engine, source_dag_id=dag_id, limit=1000)
            if row["source_run_id"] == run_id]
    return sorted(({"task": instance_name(row["source_task_id"], row["source_map_index"]), "uri": row["uri"],
                    "extra": row["extra"] or {}} for row in rows),
                  key=lambda event: (event["task"], event["uri"]))


def _triggered_runs(engine: Engine, recorded: dict) -> list[dict]:
    """The runs of the DAGs only ever triggered by a case (no case triggers them itself)."""
    dag_ids = sorted({run["dag_id"] for run in recorded.get("triggered", [])})
    assert set(dag_ids) <= TRIGGERED_ONLY, dag_ids
    return sorted(({"dag_id": row["dag_id"], "conf": row["conf"] or {}}
                   for dag_id in dag_ids for row in queries.runs(engine, dag_id=dag_id)),
                  key=lambda run: run["dag_id"])
