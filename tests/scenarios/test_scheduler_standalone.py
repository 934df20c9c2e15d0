"""Scenario: `tock standalone` runs every service; `tock dags trigger --wait` works against it;
SIGTERM stops it cleanly (every child gone, exit code 0)."""

from __future__ import annotations

import random
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack

import httpx
import psutil
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from prometheus_client.parser import text_string_to_metric_families

from infra.topics import topic_name
from tests.ports import free_port, free_ports
from tests.scenarios.scheduler_support import REPO, create_topics, environment, wait_until, wait_until_published
from tests.scenarios.web_ui_support import wait_for_http

pytestmark = pytest.mark.scenario



def test_standalone_runs_the_examples_and_stops_cleanly(make_settings, tmp_path):
    settings = make_settings(api_port=free_port(), monitor_port=free_port(), task_heartbeat_seconds=0.5,
                             scheduler_session_timeout=6, standalone_metrics_port=free_ports(3))
    create_topics(settings)
    env = environment(settings)
    with open(tmp_path / "standalone.log", "wb") as output:
        standalone = subprocess.Popen([sys.executable, "-m", "tock_cli", "standalone", "--dags-folder",
                                       str(REPO / "examples" / "dags")], env=env, stdout=output,
                                      stderr=subprocess.STDOUT)
    try:
        children = _wait_for_children(standalone.pid, 2)
        password = _admin_password(tmp_path / "standalone.log")
        assert (settings.home / "standalone_admin_password.txt").read_text().strip() == password
        assert oct((settings.home / "standalone_admin_password.txt").stat().st_mode & 0o777) == "0o600"
        base = f"http://127.0.0.1:{settings.api_port}"
        wait_for_http(base + "/health")
        assert httpx.get(base + "/api/v1/dags").status_code == 401  # locked by default
        wait_until(lambda: _logs_in(base, "admin", password), 60, "the admin to log in to the web UI")
        for dag_id in ("example_etl", "example_flaky"):
            wait_until_published(settings, dag_id)
            result = subprocess.run([sys.executable, "-m", "tock_cli", "dags", "trigger", dag_id, "--wait",
                                     "--timeout", "90"], env=env, capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, (dag_id, result.stderr, (tmp_path / "standalone.log").read_text()[-3000:])
        _assert_metrics_served(tmp_path / "standalone.log", settings.standalone_metrics_port)
        _assert_an_outsider_reads_every_event(settings)
        standalone.send_signal(signal.SIGTERM)
        assert standalone.wait(60) == 0
    finally:
        if standalone.poll() is None:
            standalone.kill()
    log = (tmp_path / "standalone.log").read_text()
    assert "stopping the services" in log
    for service in ("dag-processor", "scheduler", "projector", "api", "monitor"):
        assert f"{service} stopped (exit code 0)" in log, service
    assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]


def _assert_metrics_served(log_path, first_port: int) -> None:
    """Standalone logs where each service's metrics are, and each answers in Prometheus' format."""
    log = log_path.read_text()
    for offset, service in enumerate(("scheduler", "dag-processor", "projector")):
        url = f"http://127.0.0.1:{first_port + offset}/metrics"
        assert f"{service} metrics: {url}" in log
        names = {family.name for family in text_string_to_metric_families(httpx.get(url, timeout=5).text)}
        assert any(name.startswith(f"tock_{service.replace('-', '_')}_") for name in names), (service, names)


def _assert_an_outsider_reads_every_event(settings) -> None:
    """Every record the services wrote to tock.events (DAG runs, tries, commands from the CLI, outcomes from
    runners) is in the Schema Registry wire format, and confluent-kafka's AvroDeserializer reads it."""
    topic = topic_name(settings.topic_prefix, "events")
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "outsider",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": settings.schema_registry_url}),
                                   return_record_name=True)
    try:
        ends = {partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
                for partition in range(settings.partitions)}
        consumer.assign([TopicPartition(topic, partition, 0) for partition in ends])
        names: set[str] = set()
        read = {partition: 0 for partition in ends}
        deadline = time.monotonic() + 120
        while any(read[partition] < end for partition, end in ends.items()) and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is not None:
                    continue
                read[message.partition()] = message.offset() + 1
                assert message.value()[0] == 0, (message.offset(), message.value()[:20])
                name, _record = deserialize(message.value(), SerializationContext(topic, MessageField.VALUE))
                names.add(name.rsplit(".", 1)[-1])
    finally:
        consumer.close()
    assert {"DagRunCreated", "TriggerDagRun", "TaskQueued", "TaskStarted", "TaskSucceeded", "TaskFailed",
            "DagRunFinished"} <= names, names


def _admin_password(log_path, timeout: float = 60) -> str:
    """The password standalone prints once, on the line with the UI's address."""
    found = wait_until(lambda: re.search(r"Tock web UI: http://\S+ +user: admin +password: (\S+)",
                                         log_path.read_text()), timeout, "standalone to print the admin's password")
    return found.group(1)


def _logs_in(base: str, username: str, password: str) -> bool:
    with httpx.Client(base_url=base) as client:
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
        answer = client.post("/login", data={"username": username, "password": password, "csrf": csrf})
        return answer.status_code == 303 and answer.headers["location"] == "/" and client.get("/").status_code == 200


def _wait_for_children(pid: int, count: int, timeout: float = 30) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children()
        if len(children) >= count:
            return children
        time.sleep(0.2)
    raise AssertionError(f"standalone started {len(psutil.Process(pid).children())} services, expected {count}+")
