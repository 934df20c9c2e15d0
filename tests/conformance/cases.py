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
}

# (dag_id, "task_id[map_index]" or "" for the run, "state" | "values") -> why Tock differs on purpose
DIFFERENCES: dict[tuple[str, str, str], str] = {
    ("conf_branching", "choose", "values"): "a branch's return value (what it follows) is passed on as its "
                                            "return_value; Airflow 3.3 pushes none",
    ("conf_branching", "gate", "values"): "a short circuit's return value is passed on as its return_value; "
                                          "Airflow 3.3 pushes none",
    ("conf_branching", "join", "try_number"): "an EmptyOperator succeeds with no try (the scheduler decides it, "
                                              "TaskEmptySucceeded): try_number 0; Airflow counts one",
}
