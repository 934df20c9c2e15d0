"""The projector against the real broker, on SQLite and PostgreSQL: an example run, garbage, rebuild."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition
from sqlalchemy import update
from typer.testing import CliRunner

from infra.topics import topic_name
from projections import queries
from projections.tables import LIVE
from schemas import DEAD_LETTER, DagFileRemoved, DagRemoved, DeadlineMissed
from tests.integration.projection_db import (  # noqa: F401
    ProjectorThread,
    db_url,
    engine,
    log_end,
    offsets_reached,
    produce,
    projection_settings,
    wait_for,
)
from tests.scenarios.scheduler_support import environment
from tests.unit.projection_logs import example_run, operated_run
from tock_cli import app

pytestmark = pytest.mark.integration


def _cli(settings, *args: str):
    return CliRunner().invoke(app, list(args), env=environment(settings))


def _dead_letters(settings, timeout: float = 20.0) -> list:
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "t-dlq",
                         "auto.offset.reset": "earliest"})
    topic = topic_name(settings.topic_prefix, DEAD_LETTER)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(settings.partitions)])
    try:
        return consumer.consume(1, timeout) + consumer.consume(10, 0.5)
    finally:
        consumer.close()


def test_an_example_run_is_projected_and_garbage_is_dead_lettered(projection_settings, engine):
    produce(projection_settings, example_run(), garbage_after=6)
    with ProjectorThread(projection_settings):
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector to catch up")
    states = {row["task_id"]: (row["state"], row["try_number"])
              for row in queries.task_instances(engine, "etl", "manual__1")}
    assert states == {"extract": ("success", 1), "transform": ("success", 2), "load": ("success", 1)}
    assert queries.run(engine, "etl", "manual__1")["state"] == "success"
    history = queries.task_history(engine, "etl", "manual__1", "transform")
    assert [(row["event_type"], row["try_number"]) for row in history][:5] == [
        ("TaskQueued", 1), ("TaskLaunched", 1), ("TaskStarted", 1), ("TaskFailed", 1), ("TaskRetryScheduled", 1)]
    assert [row["file_path"] for row in queries.import_errors(engine)] == ["/dags/broken.py"]
    assert queries.dag(engine, "etl")["is_active"] is True
    dead = _dead_letters(projection_settings)
    assert [message.value() for message in dead] == [b"\x00garbage, not an event"]
    # 0x00 opens the Schema Registry frame, and no release registered the "id" b"garb"
    assert "the schema registry has no schema id" in dict(dead[0].headers())["reason"].decode()


def test_rebuild_verify_passes_after_a_run_and_fails_after_tampering(projection_settings, engine):
    produce(projection_settings, example_run() + example_run(run_id="manual__2", at=1_700_000_100.0))
    with ProjectorThread(projection_settings, records=7):  # many small batches
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector to catch up")
    verified = _cli(projection_settings, "projections", "rebuild", "--verify")
    assert verified.exit_code == 0, verified.output
    with engine.begin() as connection:
        connection.execute(update(LIVE["task_instance"]).where(LIVE["task_instance"].c.task_id == "load")
                           .values(state="failed"))
    tampered = _cli(projection_settings, "projections", "rebuild", "--verify")
    assert tampered.exit_code == 1
    assert "task_instance" in tampered.output
    rebuilt = _cli(projection_settings, "projections", "rebuild")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert _cli(projection_settings, "projections", "rebuild", "--verify").exit_code == 0
    assert queries.task_instance(engine, "etl", "manual__1", "load")["state"] == "success"


def test_cli_queries_show_the_projected_run(projection_settings, engine):
    missed = DeadlineMissed(dag_id="etl", run_id="manual__1", deadline=1_700_000_006.0, at=1_700_000_006.2)
    produce(projection_settings, example_run() + [missed])
    with ProjectorThread(projection_settings):
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector to catch up")
    runs = _cli(projection_settings, "runs", "list", "etl", "--json")
    assert runs.exit_code == 0 and '"manual__1"' in runs.output
    (row,) = json.loads(runs.output)
    assert (row["deadline_missed_at"], row["duration"]) == (1_700_000_006.2, 9.0)  # created at +1, ended at +10
    table = _cli(projection_settings, "runs", "list", "etl")
    assert "deadline_missed_at" in table.output and "9.0 s" in table.output
    tasks = _cli(projection_settings, "tasks", "list", "etl", "manual__1")
    assert tasks.exit_code == 0 and "transform" in tasks.output and "success" in tasks.output
    history = _cli(projection_settings, "tasks", "history", "etl", "manual__1", "transform")
    assert history.exit_code == 0 and history.output.count("TaskQueued") == 2
    missing = _cli(projection_settings, "tasks", "list", "etl", "nope")
    assert missing.exit_code == 1 and "no run nope" in missing.output
    assert [row["dag_id"] for row in queries.list_dags(projection_settings)] == ["etl"]


def test_operator_commands_are_projected_and_verified(projection_settings, engine):
    produce(projection_settings, example_run() + operated_run())
    with ProjectorThread(projection_settings, records=5):  # many small batches
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector to catch up")
    load = queries.task_instance(engine, "etl", "manual__1", "load")
    assert (load["state"], load["try_number"], load["marked_by"], load["kill_requested_at"]) == (
        "success", 2, "api", 1_700_000_051.1)
    states = {row["task_id"]: row["state"] for row in queries.task_instances(engine, "etl", "manual__3")}
    assert states == {"transform": "killed", "gone": "removed", "load": "upstream_failed"}
    assert queries.run(engine, "etl", "manual__1")["reopened_at"] == 1_700_000_050.1
    assert [(c["command"], c["status"]) for c in queries.commands(engine, "k1")] == [("KillTask", "rejected")]
    assert queries.commands(engine, "3")[0]["run_id"] == "manual__3"
    backfill = queries.backfill(engine, "etl", "b1")
    assert (backfill["state"], backfill["planned"], backfill["created"], backfill["finished"]) == (
        "cancelled", 2, 1, 0)
    history = queries.task_history(engine, "etl", "manual__1", "load")
    assert [row["event_type"] for row in history][-6:] == [
        "TaskQueued", "TaskStarted", "MarkTask", "TaskKillRequested", "TaskKilled", "KillTask"]
    assert _cli(projection_settings, "projections", "rebuild", "--verify").exit_code == 0
    with engine.begin() as connection:
        connection.execute(update(LIVE["command"]).values(status="accepted"))
    tampered = _cli(projection_settings, "projections", "rebuild", "--verify")
    assert tampered.exit_code == 1 and "command" in tampered.output
    assert _cli(projection_settings, "projections", "rebuild").exit_code == 0
    assert queries.commands(engine, "k1")[0]["status"] == "rejected"


def test_a_removed_files_import_error_and_parse_status_vanish_live_and_in_a_rebuild(projection_settings, engine):
    at = 1_700_000_050.0
    removed = [DagRemoved(dag_id="etl", file_path="/dags/etl.py", at=at),
               DagFileRemoved(file_path="/dags/etl.py", at=at), DagFileRemoved(file_path="/dags/broken.py", at=at)]
    produce(projection_settings, example_run())
    with ProjectorThread(projection_settings, records=3):  # the rows are committed before their removal is read
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the projector to catch up")
        assert [row["file_path"] for row in queries.import_errors(engine)] == ["/dags/broken.py"]
        produce(projection_settings, removed)
        wait_for(lambda: offsets_reached(engine, log_end(projection_settings)), what="the removals")
    assert queries.import_errors(engine) == [] and queries.parse_statuses(engine) == []
    assert queries.dag(engine, "etl")["is_active"] is False
    verified = _cli(projection_settings, "projections", "rebuild", "--verify")
    assert verified.exit_code == 0, verified.output
