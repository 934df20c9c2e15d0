"""The Tock side of a conformance case: the DAG file ported with `tock port`, run once to its end, and its
outcome in the shape record.py records Airflow's."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import tock
from schemas.tasks import instance_name
from tock import load_dags
from tock.values import decode_values
from tock_cli.local_run import run_dag
from tock_cli.porting import port_source

# XComs Airflow pushes for its own bookkeeping (a branch's and a short circuit's choice: Tock records the
# choice in the success itself, TaskSucceeded.follow), and its operators' extra links (``_link_<Name>``, a
# URL of its UI): not values a DAG's code passed on.
AIRFLOW_INTERNAL_KEYS = ("skipmixin_key",)
AIRFLOW_LINK_PREFIX = "_link_"
# What a run did besides its task instances, compared when either side did any: the asset events its tasks
# produced, and the runs of other DAGs it triggered (with their conf).
RUN_EFFECTS = ("asset_events", "triggered")


def ported_file(source: Path, folder: Path) -> Path:
    ported = port_source(source.read_text(), frozenset(tock.__all__))
    assert not ported.missing, ported.missing
    target = folder / source.name
    target.write_text(ported.source)
    return target


def run_here(path: Path, dag_id: str, logical_date: str, conf: dict) -> dict:
    """The case run by `tock dags test` (this process, the scheduler's core deciding, no service)."""
    [dag] = [made for made in load_dags(path) if made.dag_id == dag_id]
    ran = run_dag(dag, logical_date=datetime.fromisoformat(logical_date).timestamp(), conf=conf)
    return outcome(ran.state, [(instance.task_id, instance.map_index, instance.state, instance.try_number,
                                instance.values_json) for instance in ran.task_instances])


def outcome(state: str, instances: list[tuple[str, int, str, int, str]], effects: dict | None = None) -> dict:
    """(task_id, map_index, state, try_number, values_json) of each task instance, and the run's effects
    (RUN_EFFECTS, each a list) -> record.py's shape."""
    tasks = {}
    for task_id, map_index, instance_state, try_number, values_json in instances:
        tasks[instance_name(task_id, map_index)] = {"state": instance_state, "try_number": try_number,
                                                    "values": decode_values(values_json) if values_json else {}}
    return {"state": state, "tasks": dict(sorted(tasks.items())), **(effects or {})}


def compared(airflow: dict, ours: dict, effects: bool = True) -> list[tuple[str, str, object, object]]:
    """(task or "" for the run, what, Airflow's, Tock's) for each difference (``exists``: a task instance
    one of them has and the other has not); the run's effects (RUN_EFFECTS) too unless ``effects`` is
    False (`tock dags test`'s path writes no asset event and triggers no run)."""
    found: list[tuple[str, str, object, object]] = []
    if airflow["state"] != ours["state"]:
        found.append(("", "state", airflow["state"], ours["state"]))
    for name in sorted(set(airflow["tasks"]) | set(ours["tasks"])):
        theirs, mine = airflow["tasks"].get(name), ours["tasks"].get(name)
        if theirs is None or mine is None:
            found.append((name, "exists", theirs is not None, mine is not None))
            continue
        for what in ("state", "try_number"):
            if theirs[what] != mine[what]:
                found.append((name, what, theirs[what], mine[what]))
        values = {key: value for key, value in theirs["values"].items()
                  if key not in AIRFLOW_INTERNAL_KEYS and not key.startswith(AIRFLOW_LINK_PREFIX)}
        if values != mine["values"]:
            found.append((name, "values", values, mine["values"]))
    for what in RUN_EFFECTS if effects else ():
        if airflow.get(what, []) != ours.get(what, []):
            found.append(("", what, airflow.get(what, []), ours.get(what, [])))
    return found
