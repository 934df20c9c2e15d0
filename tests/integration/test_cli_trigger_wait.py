"""``tock dags trigger --request-id <used> --wait`` on a run that already ended exits with its outcome
instead of waiting for ever (issue 20, item 18). Real broker, SQLite and PostgreSQL."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from schemas import DagRunCreated, DagRunFinished
from tests.integration.projection_db import db_url, engine, produce, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import dag_parsed, fold_into_tables
from tests.scenarios.scheduler_support import environment
from tock_cli import app as cli

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0


@pytest.mark.parametrize("outcome", ["success", "failed"])
def test_waiting_on_a_run_that_already_ended_exits_with_its_outcome(projection_settings, engine, outcome):
    parsed = dag_parsed("etl", {"extract": []}, AT, schedule="@hourly")
    produce(projection_settings, [parsed])  # tock.dags: the DAG is published
    fold_into_tables(engine, [parsed,
                              DagRunCreated(dag_id="etl", run_id="manual__used", logical_date=AT, run_type="manual",
                                            conf_json="{}", dag_fingerprint="fp", scheduler_id="s", at=AT),
                              DagRunFinished(dag_id="etl", run_id="manual__used", state=outcome, at=AT + 5)])
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["dags", "trigger", "etl", "--request-id", "used", "--wait", "--timeout", "30"],
                                env=environment(projection_settings))
    assert result.exit_code == (0 if outcome == "success" else 1), result.output
    assert f"run manual__used: {outcome}" in result.output
    assert time.monotonic() - started < 20
