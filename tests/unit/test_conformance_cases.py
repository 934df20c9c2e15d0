"""The conformance suite's data (issue 25): every DAG file is a case, every case was recorded on Airflow
3.3.2, and every documented difference names a task instance of a recorded run."""

from __future__ import annotations

import json
import re

from tests.conformance.cases import CASES, DAGS, DIFFERENCES, LOGICAL_DATE, RECORDED


def test_every_dag_file_is_a_case_and_every_case_was_recorded_at_the_cases_logical_date():
    defined = {dag_id for path in DAGS.glob("*.py") for dag_id in re.findall(r'DAG\("(\w+)"', path.read_text())}
    assert defined == set(CASES)
    recorded = json.loads(RECORDED.read_text())
    assert (recorded["airflow"], recorded["logical_date"], set(recorded["runs"])) == ("3.3.2", LOGICAL_DATE,
                                                                                    set(CASES))


def test_every_documented_difference_names_a_recorded_task_instance_and_says_why():
    runs = json.loads(RECORDED.read_text())["runs"]
    for (dag_id, name, what), why in DIFFERENCES.items():
        assert name in runs[dag_id]["tasks"] and what in ("state", "try_number", "values", "exists") and why
