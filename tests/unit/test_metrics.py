"""The pure parts of the services' metrics: what the gauges read from a fold, lag, delays, ports."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.settings import load_settings
from projections.metrics import lag_by_topic
from services.scheduler.metrics import heartbeat_delay, tries_by_executor
from tests.unit.scheduler_fixtures import created, launched, parsed, queued, started, state_of, succeeded
from tock_cli.standalone import metrics_ports

EDGES = {"a": [], "b": [], "c": []}


def test_tries_by_executor_counts_queued_and_running_from_the_fold():
    state = state_of(parsed(edges=EDGES), created(), queued("a"), launched("a"), queued("b"), launched("b"),
                     started("b"), queued("c", executor="celery"))
    assert tries_by_executor([state], ["local", "celery", "kubernetes"]) == {
        ("local", "queued"): 0, ("local", "running"): 2, ("celery", "queued"): 1, ("celery", "running"): 0,
        ("kubernetes", "queued"): 0, ("kubernetes", "running"): 0}


def test_tries_by_executor_returns_to_zero_when_the_tries_end():
    state = state_of(parsed(edges={"a": []}), created(), queued("a"), launched("a"), started("a"), succeeded("a"))
    assert tries_by_executor([state], ["local"]) == {("local", "queued"): 0, ("local", "running"): 0}


def test_tries_by_executor_lists_an_executor_the_scheduler_lacks():
    state = state_of(parsed(edges={"a": []}), created(), queued("a", executor="kubernetes"))
    assert tries_by_executor([state], ["local"])[("kubernetes", "queued")] == 1


@pytest.mark.parametrize(("previous", "at", "expected"), [
    (None, 10.0, None),       # nothing to compare with
    (10.0, 10.0, None),       # a repeat
    (10.0, 14.0, 0.0),        # early: not late
    (10.0, 15.0, 0.0),        # on time
    (10.0, 17.5, 2.5),        # 2.5 s late
])
def test_heartbeat_delay(previous, at, expected):
    assert heartbeat_delay(previous, at, 5.0) == expected


def test_lag_sums_partitions_per_logical_topic_and_skips_unknown_ends():
    positions = {("p.tock.events", 0): 10, ("p.tock.events", 1): 5, ("p.tock.dags", 0): 3}
    ends = {("p.tock.events", 0): 12, ("p.tock.events", 1): 5, ("p.tock.dags", 0): 3, ("p.tock.parsing", 0): 4}
    assert lag_by_topic(positions, ends) == {"events": 2, "dags": 0, "parsing": 4}


def test_lag_is_never_negative():
    assert lag_by_topic({("tock.events", 0): 9}, {("tock.events", 0): 7}) == {"events": 0}


ALL = ["dag-processor", "scheduler", "projector", "api", "worker"]


@pytest.mark.parametrize(("environ", "services", "expected"), [
    ({}, ALL, {"scheduler": 9101, "dag-processor": 9102, "projector": 9103}),
    ({"TOCK_STANDALONE_METRICS_PORT": "9200"}, ALL, {"scheduler": 9200, "dag-processor": 9201, "projector": 9202}),
    ({"TOCK_STANDALONE_METRICS_PORT": "0"}, ALL, {}),
    ({"TOCK_PROJECTOR_METRICS_PORT": "7000"}, ALL, {"scheduler": 9101, "dag-processor": 9102, "projector": 7000}),
    ({}, ["dag-processor", "scheduler"], {"scheduler": 9101, "dag-processor": 9102}),
])
def test_standalone_metrics_ports(environ, services, expected):
    assert metrics_ports(load_settings(environ), services) == expected
