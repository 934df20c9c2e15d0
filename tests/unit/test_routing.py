"""Routing is declared on each event, and keys every frozen sample exactly as the old attribute rule did.

Record keys are data: compacted topics keep the latest record per key, and readers find a try's
log lines or a task instance's heartbeats by key. The rule that guessed keys from attribute names
(``getattr(event, "dag_id")`` and so on) is kept below as the reference the declared routes must
reproduce, byte for byte, on the frozen sample of every version of every event.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import schemas
from infra.log import routing_key
from schemas import EVENT_TYPES, EVENTS, HEARTBEATS, LOGS, EventBase, TaskHeartbeat, TaskLogShipped, decode
from schemas.declare import event
from schemas.freeze import SAMPLES_DIR
from schemas.routing import (
    BY_ASSET,
    BY_CONNECTION,
    BY_DAG,
    BY_POOL,
    BY_TASK_INSTANCE,
    BY_TRY,
    BY_VARIABLE,
    BY_WORKER,
    ROUTES,
)

SAMPLES = sorted(SAMPLES_DIR.glob("*.json"))
# Routes declared after the old rule was replaced: their events never had one (see test_secret_store.py).
NEWER_ROUTES = (BY_VARIABLE, BY_CONNECTION, BY_POOL, BY_ASSET)
OLD_RULE_SAMPLES = [path for path in SAMPLES if EVENT_TYPES[path.name.split(".")[0]].ROUTE not in NEWER_ROUTES]


def old_routing_key(event: Any) -> tuple[str, str]:
    """infra/log/records.py:routing_key before routes were declared (the reference; do not change)."""
    dag_id = getattr(event, "dag_id", None)
    if dag_id is not None:
        if event.TOPIC == HEARTBEATS:
            return f"{dag_id}|{event.run_id}|{event.task_id}", dag_id
        if event.TOPIC == LOGS:
            return f"{dag_id}|{event.run_id}|{event.task_id}|{event.try_number}", dag_id
        return dag_id, dag_id
    worker = getattr(event, "worker", None)
    if worker is not None:
        return f"worker/{worker}", f"worker/{worker}"
    for attribute in ("file_path", "scheduler_id", "username"):
        value = getattr(event, attribute, None)
        if value is not None:
            return value, value
    raise TypeError(f"{type(event).__name__} has no routing field")


def test_there_is_a_sample_of_every_event() -> None:
    assert {path.name.split(".")[0] for path in SAMPLES} == set(EVENT_TYPES)


@pytest.mark.parametrize("path", OLD_RULE_SAMPLES, ids=lambda path: path.stem)
def test_declared_route_keys_the_frozen_sample_as_the_old_rule_did(path: Path) -> None:
    sample = decode(bytes.fromhex(json.loads(path.read_text())["hex"]))
    if getattr(sample, "map_index", -1) >= 0:  # mapped instances came after the old rule: it keys the unmapped
        sample = dataclasses.replace(sample, map_index=-1)
    assert routing_key(sample) == old_routing_key(sample)


def test_a_mapped_instance_heartbeat_is_keyed_by_its_map_index_too() -> None:
    beat = TaskHeartbeat(dag_id="d", run_id="r", task_id="t", map_index=3, try_number=1, runner_id="x", at=1.0)
    assert routing_key(beat) == ("d|r|t|3", "d")
    assert routing_key(dataclasses.replace(beat, map_index=-1)) == ("d|r|t", "d")


@pytest.mark.parametrize("cls", sorted(EVENT_TYPES.values(), key=lambda cls: cls.__name__), ids=lambda c: c.__name__)
def test_every_event_declares_one_of_the_routes(cls: type[EventBase]) -> None:
    assert any(cls.ROUTE is route for route in ROUTES)


def test_keys_of_hand_written_events() -> None:
    beat = TaskHeartbeat(dag_id="etl", run_id="r|1", task_id="load", try_number=2, runner_id="x", at=1.0)
    lines = TaskLogShipped(dag_id="etl", run_id="r1", task_id="load", try_number=3, runner_id="x", offset=0,
                           text="", at=1.0)
    worker = schemas.WorkerHeartbeat(worker="w1", executor="celery", hostname="h", pid=1, concurrency=2, at=1.0)
    assert routing_key(beat) == ("etl|r|1|load", "etl")
    assert routing_key(lines) == ("etl|r1|load|3", "etl") == (schemas.try_log_key("etl", "r1", "load", 3), "etl")
    assert routing_key(worker) == ("worker/w1", "worker/w1")
    assert TaskHeartbeat.ROUTE is BY_TASK_INSTANCE and TaskLogShipped.ROUTE is BY_TRY
    assert schemas.DagRemoved.ROUTE is BY_DAG  # it has a file_path too: the dag wins, as before


def test_an_event_declared_without_a_route_is_refused() -> None:
    with pytest.raises(TypeError, match="route"):
        event(EVENTS)  # type: ignore[call-arg]  # the missing route is what is tested


def test_an_event_routed_by_a_field_it_lacks_is_refused() -> None:
    with pytest.raises(TypeError, match="routed by worker but has no worker"):
        @event(EVENTS, route=BY_WORKER)  # type: ignore[arg-type]  # mypy refuses it too: that is the point
        class Unroutable(EventBase):
            dag_id: str
    assert "Unroutable" not in EVENT_TYPES


def test_a_value_that_is_no_event_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="pass key= and partition_key="):
        routing_key(object())  # type: ignore[arg-type]  # what a caller outside mypy may pass
