"""Secrets in a real try's child: a connection from the runner's environment (TOCK_CONN_*) reaches the
task, its password is masked in the try's log, in a template's rendering and in a failure's message,
and the try reports what it read (the name and the backend, never the value)."""

from __future__ import annotations

import json

import pytest

from infra.executors.requests import TryRequest
from infra.secrets.env import EnvironmentSecrets
from infra.task_environment import TaskEnvironment
from infra.try_paths import TryPaths
from services.runner.child import ChildSetup
from services.runner.supervise import Outcome, supervise_all

PASSWORD = "s3cr3t-horse-battery"
DAG_FILE = '''
from tock import DAG, BashTask, Connection, Variable, task

with DAG("secrets") as dag:
    @task
    def prints_it():
        warehouse = Connection.get("warehouse")
        print("connecting with", warehouse.login, warehouse.password, "to", warehouse.host)
        return warehouse.host

    @task
    def quotes_it_in_an_error():
        raise RuntimeError("login failed for " + Connection.get("warehouse").password)

    @task
    def reads_a_missing_variable():
        return Variable.get("nope", default="fallback")

    prints_it(); quotes_it_in_an_error(); reads_a_missing_variable()
    BashTask("templated", 'echo "$PASS"', env={"PASS": "{{ conn.warehouse.password }}"})
'''


@pytest.fixture
def dag_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TOCK_CONN_WAREHOUSE", f"postgres://etl:{PASSWORD}@db.internal:5432/dw")
    path = tmp_path / "secrets.py"
    path.write_text(DAG_FILE)
    return path


def run(tmp_path, dag_file, task_id) -> tuple[Outcome, str]:
    request = TryRequest("secrets", "r1", task_id, 1, str(dag_file))
    paths = TryPaths(tmp_path / "home", request)
    paths.folder.mkdir(parents=True)
    outcomes: list[Outcome] = []
    setup = ChildSetup(TaskEnvironment.default(), secrets=lambda environ, _writer: [EnvironmentSecrets(environ)])
    supervise_all([(request, str(paths.log))], 10.0, lambda _running: None,
                  lambda _request, outcome: outcomes.append(outcome), setup=setup)
    return outcomes[0], paths.log.read_text()


def test_a_connection_from_the_environment_is_used_and_its_password_masked_in_the_log(tmp_path, dag_file):
    outcome, log = run(tmp_path, dag_file, "prints_it")
    assert outcome.succeeded, outcome.error
    assert log.strip() == "connecting with etl *** to db.internal"
    assert outcome.accessed == (("connection", "warehouse", "env"),)


def test_a_password_quoted_in_an_error_is_masked_in_what_the_log_records(tmp_path, dag_file):
    outcome, log = run(tmp_path, dag_file, "quotes_it_in_an_error")
    assert outcome.error == "RuntimeError: login failed for ***"
    assert PASSWORD not in outcome.traceback and PASSWORD not in log


def test_a_template_that_reads_a_password_records_its_rendering_masked(tmp_path, dag_file):
    outcome, log = run(tmp_path, dag_file, "templated")
    assert outcome.succeeded, outcome.error
    assert json.loads(outcome.rendered_json)["env"] == {"PASS": "***"}
    assert log.strip() == "***"
    assert json.loads(outcome.values_json) == {"return_value": "***"}  # its last line: never in Kafka in clear


def test_a_miss_is_reported_too(tmp_path, dag_file):
    outcome, _log = run(tmp_path, dag_file, "reads_a_missing_variable")
    assert outcome.accessed == (("variable", "nope", "none"),)
