"""The try message (executor -> runner): one type, and the JSON on the wire as it always was, so
messages already queued in Redis, and lines of a launcher of the previous release, still read."""

from __future__ import annotations

import json

import pytest

from infra.executors.messages import BadTryMessage, TryMessage
from infra.executors.requests import TryRequest

REQUEST = TryRequest("etl", "manual__2026-01-01T00:00:00+00:00", "load", 2, "/dags/etl.py", 30.0, 1767225600.5,
                     '{"image": "python:3.12"}')
TRY = {"dag_id": "etl", "run_id": "manual__2026-01-01T00:00:00+00:00", "task_id": "load", "try_number": 2,
       "dag_file": "/dags/etl.py", "execution_timeout": 30.0, "queued_at": 1767225600.5,
       "pod_override": '{"image": "python:3.12"}'}


def test_a_message_round_trips_through_json():
    message = TryMessage(REQUEST, "local", "default")
    assert TryMessage.from_json(message.to_json()) == message
    assert TryMessage.from_dict(message.to_dict()) == message
    assert "\n" not in message.to_json()


def test_the_wire_is_the_object_the_local_launcher_always_read():
    # Written by infra/executors/local.py before TryMessage: {"try": as_dict(), "executor": ..., "queue": ...}
    line = json.dumps({"try": TRY, "executor": "local", "queue": "default"})
    assert TryMessage(REQUEST, "local", "default").to_json() == line
    assert TryMessage.from_json(line) == TryMessage(REQUEST, "local", "default")


def test_a_celery_message_queued_before_it_named_its_executor_is_read_as_the_worker_s():
    # Sent by infra/executors/celery.py before TryMessage: {"try": as_dict(), "queue": ...}
    assert TryMessage.from_dict({"try": TRY, "queue": "gpu"}, executor="celery") == TryMessage(REQUEST, "celery", "gpu")
    assert TryMessage.from_dict({"try": TRY}, executor="celery").queue == ""


def test_a_request_with_only_the_required_fields_takes_the_defaults():
    minimal = {"dag_id": "etl", "run_id": "r1", "task_id": "load", "try_number": 1, "dag_file": "/dags/etl.py"}
    message = TryMessage.from_dict({"try": minimal, "executor": "local", "queue": ""})
    assert message.request == TryRequest("etl", "r1", "load", 1, "/dags/etl.py")


def test_an_int_where_a_float_goes_is_read():
    message = TryMessage.from_dict({"try": {**TRY, "queued_at": 0, "execution_timeout": None}, "executor": "local"})
    assert (message.request.queued_at, message.request.execution_timeout) == (0, None)


@pytest.mark.parametrize("wire, wrong", [
    ("not json", "is not JSON"),
    ("[1, 2]", "a JSON object, not list"),
    (json.dumps({"try": TRY}), "names no executor"),
    (json.dumps({"try": TRY, "executor": "local", "queue": 3}), '"queue" is a string, not 3'),
    (json.dumps({"executor": "local"}), '"try" is an object of dag_id'),
    (json.dumps({"try": {**TRY, "colour": "red"}, "executor": "local"}), "unknown fields colour"),
    (json.dumps({"try": {"dag_id": "etl"}, "executor": "local"}), "no run_id, task_id, try_number, dag_file"),
    (json.dumps({"try": {**TRY, "try_number": "2"}, "executor": "local"}), "try_number is '2', not int"),
    (json.dumps({"try": {**TRY, "try_number": True}, "executor": "local"}), "try_number is True, not int"),
    (json.dumps({"try": {**TRY, "pod_override": {}}, "executor": "local"}), "pod_override is {}, not str or null"),
])
def test_a_bad_message_fails_naming_what_is_wrong(wire, wrong):
    with pytest.raises(BadTryMessage) as raised:
        TryMessage.from_json(wire)
    assert wrong in str(raised.value)
