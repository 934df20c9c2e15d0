"""`tock dags trigger --conf` and `tock dags backfill --conf` refuse a conf the DAG's params refuse (exit 2,
naming the param and the rule) and append nothing. Real broker and SQLite."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from infra.log import replay
from schemas import EVENTS, RequestBackfill, TriggerDagRun
from schemas.params import ParamSpec, to_json
from tests.integration.projection_db import db_url, engine, produce, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import dag_parsed, fold_into_tables
from tests.scenarios.scheduler_support import environment

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]
AT = 1_700_000_000.0
PARAMS = to_json([ParamSpec("x", {"type": "integer", "maximum": 20}, None, True, 5),
                  ParamSpec("who", {"type": "string"}, None, False)])


def tock(settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tock_cli", *args], env=environment(settings),
                          capture_output=True, text=True, timeout=120)


def test_the_cli_refuses_a_conf_the_params_refuse_and_appends_a_fitting_one(projection_settings, engine):
    parsed = dag_parsed("etl", {"extract": []}, AT, schedule="@hourly", params_json=PARAMS)
    produce(projection_settings, [parsed])  # `dags trigger` reads the definition from tock.dags
    fold_into_tables(engine, [parsed])  # `dags backfill` from the dag table
    refused = tock(projection_settings, "dags", "trigger", "etl", "--conf", json.dumps({"x": "abc"}))
    assert refused.returncode == 2, refused.stderr
    assert "param 'x': 'abc' is not of type 'integer'" in refused.stderr
    assert "param 'who': required" in refused.stderr and "Traceback" not in refused.stderr
    backfill = tock(projection_settings, "dags", "backfill", "etl", "--start-date", "2024-01-01", "--end-date",
                    "2024-01-02", "--conf", json.dumps({"who": "ada", "x": 21}))
    assert backfill.returncode == 2, backfill.stderr
    assert "param 'x': 21 is greater than the maximum of 20" in backfill.stderr
    accepted = tock(projection_settings, "dags", "trigger", "etl", "--conf", json.dumps({"who": "ada"}))
    assert accepted.returncode == 0, accepted.stderr
    appended = [record.event for record in replay(projection_settings, EVENTS)
                if isinstance(record.event, (TriggerDagRun, RequestBackfill))]
    assert [(type(event), json.loads(event.conf_json)) for event in appended] == [(TriggerDagRun, {"who": "ada"})]
