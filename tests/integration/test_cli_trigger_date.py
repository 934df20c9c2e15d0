"""``tock dags trigger DAG_ID --logical-date DATE`` (``-l``) appends the trigger with that logical date;
real broker."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from infra.log import replay
from schemas import EVENTS, TriggerDagRun
from tests.integration.projection_db import db_url, engine, produce, projection_settings  # noqa: F401 - fixtures
from tests.integration.ui_pages_support import dag_parsed
from tests.scenarios.scheduler_support import environment
from tock_cli import app as cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("flag", "given", "expected"), [
    ("--logical-date", "2024-01-31T06:00:00+02:00", datetime(2024, 1, 31, 4, tzinfo=UTC)),
    ("-l", "2024-01-31", datetime(2024, 1, 31, tzinfo=UTC)),
])
def test_the_trigger_carries_the_logical_date(projection_settings, flag, given, expected):
    produce(projection_settings, [dag_parsed("etl", {"extract": []}, 1.0, schedule="@hourly")])
    result = CliRunner().invoke(cli, ["dags", "trigger", "etl", flag, given, "--request-id", "dated"],
                                env=environment(projection_settings))
    assert result.exit_code == 0, result.output
    [trigger] = [record.event for record in replay(projection_settings, EVENTS)
                 if isinstance(record.event, TriggerDagRun)]
    assert (trigger.request_id, trigger.logical_date) == ("dated", expected.timestamp())
