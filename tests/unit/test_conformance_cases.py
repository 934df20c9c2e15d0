"""The conformance suite's data (issue 25): every DAG file is a case, every case was recorded on Airflow
3.3.2, and every documented difference names a task instance of a recorded run."""

from __future__ import annotations

import json
import re

from tests.conformance.cases import (
    BEFORE,
    CASES,
    DAGS,
    DIFFERENCES,
    LOGICAL_DATE,
    ON_EXECUTORS,
    RECORDED,
    TRIGGERED_ONLY,
)
from tests.conformance.tock_side import RUN_EFFECTS


def test_every_dag_file_is_a_case_and_every_case_was_recorded_at_the_cases_logical_date():
    defined = {dag_id for path in DAGS.glob("*.py") for dag_id in re.findall(r'DAG\("(\w+)"', path.read_text())}
    assert defined == set(CASES) | TRIGGERED_ONLY and not set(CASES) & TRIGGERED_ONLY
    recorded = json.loads(RECORDED.read_text())
    assert (recorded["airflow"], recorded["logical_date"], set(recorded["runs"])) == ("3.3.2", LOGICAL_DATE,
                                                                                    set(CASES))


def test_every_documented_difference_names_a_recorded_task_instance_or_run_effect_and_says_why():
    runs = json.loads(RECORDED.read_text())["runs"]
    for (dag_id, name, what), why in DIFFERENCES.items():
        assert why
        if name:
            assert name in runs[dag_id]["tasks"] and what in ("state", "try_number", "values", "exists")
        else:
            assert what in ("state", *RUN_EFFECTS)


def test_cases_run_first_and_on_other_executors_are_cases():
    assert set(BEFORE) | set(BEFORE.values()) <= set(CASES)
    assert {dag_id for dag_ids in ON_EXECUTORS.values() for dag_id in dag_ids} <= set(CASES)
    assert set(ON_EXECUTORS) == {"celery", "kubernetes"}
