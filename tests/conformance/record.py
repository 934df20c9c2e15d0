"""`make conformance-record`: run every conformance case on Airflow 3.3.2 and record what it did.

Run with any Python (stdlib only) and the path of a virtualenv holding ``apache-airflow==3.3.2``: each
case runs with ``airflow dags test`` against a fresh SQLite metadata database, and the run's state, each
task instance's state and try, and every XCom it pushed are read back from that database into
tests/conformance/recorded.json (sorted, so a re-record that changes nothing changes no byte).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conformance.cases import CASES, DAGS, LOGICAL_DATE, RECORDED


def record(airflow_python: str) -> dict:
    recorded = {}
    for dag_id, conf in CASES.items():
        with tempfile.TemporaryDirectory(prefix="tock-conformance-") as home:
            environment = {**os.environ, "AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                           "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS), "AIRFLOW__CORE__UNIT_TEST_MODE": "False"}
            airflow = [airflow_python, "-m", "airflow"]
            subprocess.run([*airflow, "db", "migrate"], env=environment, check=True, capture_output=True)
            finished = subprocess.run([*airflow, "dags", "test", dag_id, LOGICAL_DATE, "-c", json.dumps(conf)],
                                      env=environment, capture_output=True, text=True)
            recorded[dag_id] = _outcome(Path(home) / "airflow.db", dag_id)
            print(f"{dag_id}: {recorded[dag_id]['state']} (airflow dags test exit {finished.returncode})", flush=True)
    return recorded


def _outcome(database: Path, dag_id: str) -> dict:
    with sqlite3.connect(database) as connection:
        (state,) = connection.execute("SELECT state FROM dag_run WHERE dag_id = ?", (dag_id,)).fetchone()
        tasks = {_name(task_id, map_index): {"state": ti_state, "try_number": tries, "values": {}}
                 for task_id, map_index, ti_state, tries in connection.execute(
                     "SELECT task_id, map_index, state, try_number FROM task_instance WHERE dag_id = ?", (dag_id,))}
        for task_id, map_index, key, value in connection.execute(
                "SELECT task_id, map_index, key, value FROM xcom WHERE dag_id = ?", (dag_id,)):
            # SQLite keeps a JSON number as a number (its column affinity), anything else as its JSON text
            tasks[_name(task_id, map_index)]["values"][key] = json.loads(value) if isinstance(value, str) else value
    return {"state": state, "tasks": dict(sorted(tasks.items()))}


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
