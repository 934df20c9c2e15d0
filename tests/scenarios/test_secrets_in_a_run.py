"""A connection given to the scheduler's environment (TOCK_CONN_*) is used by a task through the real
system; its password is masked in the try's log (local file and tock.logs), never in Kafka in clear,
and the read is a SecretAccessed in the log, naming the connection and the backend."""

from __future__ import annotations

import pytest

from schemas import EVENTS, LOGS, SecretAccessed, TaskSucceeded
from tests.integration.test_secret_store_log import raw_values
from tests.scenarios.scheduler_support import LogTail, Processes, create_topics, publish_dags, trigger

pytestmark = pytest.mark.scenario

PASSWORD = "pa55-correct-horse"
DAG = '''
from tock import DAG, Connection, task

with DAG("uses_a_connection") as dag:
    @task
    def connect():
        warehouse = Connection.get("warehouse")
        print(f"connecting to {warehouse.host} as {warehouse.login} with {warehouse.password}")
        return warehouse.host

    connect()
'''


def test_a_connection_from_the_environment_is_used_masked_and_audited(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5)
    create_topics(settings)
    path = tmp_path / "dags" / "conn.py"
    path.parent.mkdir()
    path.write_text(DAG)
    publish_dags(settings, path)
    processes = Processes(settings, tmp_path / "logs",
                          extra_env={"TOCK_CONN_WAREHOUSE": f"postgres://etl:{PASSWORD}@db.internal:5432/dw"})
    tail = LogTail(settings)
    try:
        processes.scheduler("s1")
        run_id = trigger(settings, "uses_a_connection")
        assert tail.run_finished(run_id, 90).state == "success"
    finally:
        processes.close()
        tail.close()
    [access] = tail.of_type(SecretAccessed, run_id=run_id)
    assert (access.kind, access.name, access.backend, access.task_id) == ("connection", "warehouse", "env", "connect")
    [succeeded] = tail.of_type(TaskSucceeded, run_id=run_id)
    assert succeeded.values_json == '{"return_value":"db.internal"}'
    log = (settings.home / "tries" / "uses_a_connection" / run_id / "connect" / "1.log").read_text()
    assert log.strip() == "connecting to db.internal as etl with ***"
    raw = raw_values(settings, EVENTS) + raw_values(settings, LOGS)
    assert raw and not [value for value in raw if PASSWORD.encode() in value]

