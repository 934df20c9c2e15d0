"""Bad CLI input gets a message that says what was wrong, and a non-zero exit."""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.scenarios.scheduler_support import environment


def tock(settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tock_cli", *args], env=environment(settings),
                          capture_output=True, text=True, timeout=120)


def test_triggering_an_unknown_dag_is_refused(kafka_settings):
    result = tock(kafka_settings, "dags", "trigger", "no_such_dag", "--wait")
    assert result.returncode == 1
    assert "no DAG 'no_such_dag' has been published" in result.stderr


def test_triggering_without_topics_names_the_problem(make_settings):
    result = tock(make_settings(topic_prefix="never-created."), "dags", "trigger", "etl")
    assert result.returncode == 1
    assert "tock topics create" in result.stderr and "Traceback" not in result.stderr


def test_a_conf_that_is_not_a_json_object_is_refused(kafka_settings):
    result = tock(kafka_settings, "dags", "trigger", "etl", "--conf", "[1, 2]")
    assert result.returncode == 2
    assert "--conf must be a JSON object" in result.stderr


def test_an_unknown_setting_is_named(make_settings):
    settings = make_settings()
    env = {**environment(settings), "TOCK_PARALELLISM": "4"}
    result = subprocess.run([sys.executable, "-m", "tock_cli", "dags", "list"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "TOCK_PARALELLISM" in result.stderr


def test_a_taken_metrics_port_is_named(make_settings, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = make_settings(dags_folder=tmp_path, dag_processor_metrics_port=port)
        result = tock(settings, "dag-processor")
    assert result.returncode == 2
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
