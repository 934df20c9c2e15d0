"""kill -9 of ``tock projector`` in the middle of its work, then a restart: tables equal a rebuild."""

from __future__ import annotations

import signal

import pytest

from projections import queries
from projections.rebuild import verify
from tests.integration.projection_db import (  # noqa: F401
    db_url,
    engine,
    log_end,
    many_runs,
    offsets_reached,
    produce,
    projection_settings,
    projector_process,
    wait_for,
)

pytestmark = pytest.mark.integration


def _projected(engine) -> int:
    try:
        return sum(row["next_offset"] for row in queries.projected_offsets(engine))
    except Exception:  # noqa: BLE001 - tables not created yet
        return 0


def test_killed_mid_batch_then_restarted_equals_a_rebuild(projection_settings, engine, tmp_path):
    events = many_runs(600)  # 3,000 task instances, 15,000 events
    produce(projection_settings, events)
    end = log_end(projection_settings)
    total = sum(end.values())
    settings = projection_settings.model_copy(update={"projector_batch": 700})  # many batches to die in
    first = projector_process(settings, tmp_path / "projector.log")
    try:
        wait_for(lambda: _projected(engine) >= total // 4, what="a quarter of the log projected")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    assert _projected(engine) < total, "the projector finished before it could be killed"
    second = projector_process(settings, tmp_path / "projector.log")
    try:
        wait_for(lambda: offsets_reached(engine, end), timeout=120, what="the restarted projector to catch up")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0, (tmp_path / "projector.log").read_text()[-2000:]
    assert verify(projection_settings, engine) == []
    assert queries.count(engine, "task_event") == len([e for e in events if e.TOPIC == "events"])
    assert queries.count(engine, "task_instance") == 3000
