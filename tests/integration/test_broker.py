"""The local broker: start, status, stop, and data kept across a restart.

Uses its own TOCK_HOME and ports so the session's shared broker is never touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from infra.broker import LocalKafkaBroker
from infra.settings import load_settings
from tests.scenarios.scheduler_support import free_port


@pytest.fixture
def private_env(tmp_path):
    # Free ports drawn at random: fixed ones collided with the same test run from another checkout.
    port = free_port()
    env = {"TOCK_HOME": str(tmp_path / "home"), "TOCK_BROKER_PORT": str(port),
           "TOCK_CONTROLLER_PORT": str(free_port(port, port + 1)), "TOCK_BROKER_HEAP": "256M"}
    yield env
    LocalKafkaBroker(load_settings(env)).stop()


def tock(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TOCK_")}
    return subprocess.run([sys.executable, "-m", "tock_cli", *args], env={**clean, **env},
                          capture_output=True, text=True, timeout=180)


def produce_and_read(address: str, topic: str, value: bytes | None = None) -> list[bytes]:
    if value is not None:
        producer = Producer({"bootstrap.servers": address})
        producer.produce(topic, value)
        assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": address, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = [message.value() for message in consumer.consume(10, timeout=10) if not message.error()]
    consumer.close()
    return values


def test_status_start_stop_and_data_survives_a_restart(private_env):
    assert tock(private_env, "broker", "status").returncode == 3
    started = tock(private_env, "broker", "start")
    assert started.returncode == 0, started.stderr
    address = f"127.0.0.1:{private_env['TOCK_BROKER_PORT']}"
    assert f"ready at {address}" in started.stdout
    assert "ready" in tock(private_env, "broker", "status").stdout
    # One node keeps the layout it always had: everything right under <home>/broker.
    broker_root = Path(private_env["TOCK_HOME"]) / "broker"
    assert (broker_root / "data" / "meta.properties").exists() and (broker_root / "broker.pid").exists()
    assert (broker_root / "nodes").read_text() == "1\n"

    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(30)
    assert produce_and_read(address, "kept", b"before restart") == [b"before restart"]

    assert "broker stopped" in tock(private_env, "broker", "stop").stdout
    status = tock(private_env, "broker", "status")
    assert status.returncode == 3 and "stopped" in status.stdout
    assert tock(private_env, "broker", "start").returncode == 0
    assert produce_and_read(address, "kept") == [b"before restart"]


def test_start_refuses_a_port_taken_by_something_else(private_env, kafka_bootstrap):
    env = {**private_env, "TOCK_BROKER_PORT": kafka_bootstrap.rsplit(":", 1)[1]}
    result = tock(env, "broker", "start")
    assert result.returncode == 1
    assert "is taken by a process that is not Tock's broker" in result.stderr


def test_a_configured_cluster_skips_the_local_broker(private_env):
    result = tock({**private_env, "TOCK_KAFKA_BOOTSTRAP": "127.0.0.1:1"}, "broker", "start")
    assert result.returncode == 0 and "no local broker is used" in result.stdout
