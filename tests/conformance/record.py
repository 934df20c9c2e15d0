"""`make conformance-record`: run every conformance case on Airflow 3.3.2 and record what it did.

Run with any Python (stdlib only) and the path of a virtualenv holding ``apache-airflow==3.3.2``: each
case runs with ``airflow dags test`` against a fresh SQLite metadata database, and the run's state, each
task instance's state and try, and every XCom it pushed are read back from that database into
tests/conformance/recorded.json (sorted, so a re-record that changes nothing changes no byte).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conformance.cases import BEFORE, CASES, DAGS, LOGICAL_DATE, RECORDED

# A run id Airflow makes from the moment a run is triggered (a TriggerDagRunOperator's trigger_run_id, its
# link): recorded as this, so that recording again changes no byte.
AIRFLOW_RUN_ID = re.compile(r"manual__\d{4}-\d\d-\d\dT[0-9:.+]+")
TRIGGERED_RUN_ID = "manual__<when it was triggered>"


def record(airflow_python: str) -> dict:
    recorded = {}
    for dag_id in CASES:
        with tempfile.TemporaryDirectory(prefix="tock-conformance-") as home:
            environment = {**os.environ, "AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                           "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS), "AIRFLOW__CORE__UNIT_TEST_MODE": "False"}
            airflow = [airflow_python, "-m", "airflow"]
            subprocess.run([*airflow, "db", "migrate"], env=environment, check=True, capture_output=True)
            for ran in _with_before(dag_id):
                finished = subprocess.run([*airflow, "dags", "test", ran, LOGICAL_DATE, "-c", json.dumps(CASES[ran])],
                                          env=environment, capture_output=True, text=True)
            recorded[dag_id] = _outcome(Path(home) / "airflow.db", dag_id)
            print(f"{dag_id}: {recorded[dag_id]['state']} (airflow dags test exit {finished.returncode})", flush=True)
    return recorded


def _with_before(dag_id: str) -> list[str]:
    """The case, after the cases whose runs it waits for (run first, in the same metadata database)."""
    return [*_with_before(BEFORE[dag_id]), dag_id] if dag_id in BEFORE else [dag_id]


def _outcome(database: Path, dag_id: str) -> dict:
    with sqlite3.connect(database) as connection:
        (state,) = connection.execute("SELECT state FROM dag_run WHERE dag_id = ?", (dag_id,)).fetchone()
        tasks = {_name(task_id, map_index): {"state": ti_state, "try_number": tries, "values": {}}
                 for task_id, map_index, ti_state, tries in connection.execute(
                     "SELECT task_id, map_index, state, try_number FROM task_instance WHERE dag_id = ?", (dag_id,))}
        for task_id, map_index, key, value in connection.execute(
                "SELECT task_id, map_index, key, value FROM xcom WHERE dag_id = ?", (dag_id,)):
            # SQLite keeps a JSON number as a number (its column affinity), anything else as its JSON text
            value = json.loads(AIRFLOW_RUN_ID.sub(TRIGGERED_RUN_ID, value)) if isinstance(value, str) else value
            tasks[_name(task_id, map_index)]["values"][key] = value
        found = {"state": state, "tasks": dict(sorted(tasks.items()))}
        return {**found, **_asset_events(connection, dag_id), **_triggered(connection, dag_id)}


def _asset_events(connection: sqlite3.Connection, dag_id: str) -> dict:
    """The asset events the run's tasks produced (only when there are some: the older cases' records stay)."""
    events = sorted(({"task": _name(task_id, map_index), "uri": uri, "extra": json.loads(extra or "{}")}
                     for task_id, map_index, uri, extra in connection.execute(
                         "SELECT e.source_task_id, e.source_map_index, a.uri, e.extra FROM asset_event e "
                         "JOIN asset a ON a.id = e.asset_id WHERE e.source_dag_id = ?", (dag_id,))),
                    key=lambda event: (event["task"], event["uri"]))
    return {"asset_events": events} if events else {}


def _triggered(connection: sqlite3.Connection, dag_id: str) -> dict:
    """The runs of other DAGs the run triggered, with their conf (their own outcome is not the case's: no
    scheduler runs them under `dags test`)."""
    ran_before = set(_with_before(dag_id))
    runs = sorted(({"dag_id": other, "conf": json.loads(conf or "{}")} for other, conf in connection.execute(
        "SELECT dag_id, conf FROM dag_run") if other not in ran_before), key=lambda run: run["dag_id"])
    return {"triggered": runs} if runs else {}


def _name(task_id: str, map_index: int) -> str:
    return task_id if map_index < 0 else f"{task_id}[{map_index}]"


def main() -> None:
    recorded = record(sys.argv[1])
    RECORDED.write_text(json.dumps({"airflow": "3.3.2", "logical_date": LOGICAL_DATE, "runs": recorded},
                                   indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(recorded)} runs, "
          f"{sum(len(run['tasks']) for run in recorded.values())} task instances into {RECORDED}")


if __name__ == "__main__":
    main()
