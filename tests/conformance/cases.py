"""The conformance cases (issue 25): each DAG of tests/conformance/dags, written in Airflow 3's syntax by
Tock's team, run once at a fixed logical date with a fixed conf, on Airflow 3.3.2 (record.py) and on Tock
(tests/unit/test_conformance.py), and compared: the run's state, each task instance's state and the
values it passed on. A difference that is Tock's on purpose is listed in DIFFERENCES with its reason (and
in the README); any other is a failure."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
DAGS = HERE / "dags"
RECORDED = HERE / "recorded.json"
LOGICAL_DATE = "2026-01-02T00:00:00+00:00"

# dag_id -> the run's conf
CASES: dict[str, dict] = {
    "conf_taskflow_values": {},
    "conf_params_templating": {"who": "tock"},
    "conf_trigger_rules": {},
    "conf_branching": {},
    "conf_groups_setup_teardown": {},
    "conf_mapping": {},
    "conf_retries_and_failures": {},
    "conf_sensors": {},
    "conf_assets": {},
    "conf_trigger": {"who": "tock"},
    "conf_external_upstream": {},
    "conf_external_sensor": {},
}

# DAGs of the files that are not cases: run only when a case triggers them.
TRIGGERED_ONLY = frozenset({"conf_trigger_target"})

# case -> the case whose run (at the same logical date) it waits for. Airflow's `dags test` runs one DAG
# and cannot wait for another, so the recording runs that one first, in the same metadata database; on
# Tock both are triggered at once and the sensor waits.
BEFORE: dict[str, str] = {"conf_external_sensor": "conf_external_upstream"}

# Cases run again on each other executor (every task of theirs on it), through the real services.
ON_EXECUTORS: dict[str, tuple[str, ...]] = {"celery": ("conf_taskflow_values", "conf_mapping"),
                                            "kubernetes": ("conf_params_templating", "conf_retries_and_failures")}

# (dag_id, "task_id[map_index]" or "" for the run, "state" | "values") -> why Tock differs on purpose
DIFFERENCES: dict[tuple[str, str, str], str] = {
    ("conf_branching", "choose", "values"): "a branch's return value (what it follows) is passed on as its "
                                            "return_value; Airflow 3.3 pushes none",
    ("conf_branching", "gate", "values"): "a short circuit's return value is passed on as its return_value; "
                                          "Airflow 3.3 pushes none",
    ("conf_branching", "join", "try_number"): "an EmptyOperator succeeds with no try (the scheduler decides it, "
                                              "TaskEmptySucceeded): try_number 0; Airflow counts one",
    ("conf_assets", "done", "try_number"): "an EmptyOperator (here with outlets) succeeds with no try: try_number 0; "
                                           "Airflow counts one",
    ("conf_sensors", "rescheduled", "try_number"): "each poke of a reschedule-mode sensor is a try in the log (the "
                                                   "second poke is try 2); Airflow keeps one try number across "
                                                   "reschedules",
    ("conf_sensors", "waited", "try_number"): "a time sensor makes no poke: the scheduler succeeds it at its moment "
                                              "(here already past, TimeSensorMet), no try runs: try_number 0; "
                                              "Airflow pokes once",
    ("conf_trigger", "start_target", "values"): "the triggered run's id is manual__triggered-<derived from the "
                                                "task instance> (every try triggers the same run), Airflow's "
                                                "manual__<when it was triggered>; Tock also pushes trigger_dag_id",
}
