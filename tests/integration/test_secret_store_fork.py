"""A runner holds a live Kafka producer when it forks a try's child; the child's chain then reads Tock's
store with clients of its own (never the parent's). This checks that such a fork reads and writes the
store on the real broker."""

from __future__ import annotations

import json
import os

import pytest
from cryptography.fernet import Fernet

from infra.log import KafkaEventLog
from infra.secrets import secrets_backends
from infra.secrets.store import read_store
from tock import Connection, Variable
from tock.secrets import SecretsChain, install

pytestmark = pytest.mark.integration


def test_a_forked_child_of_a_process_with_a_live_producer_reads_and_writes_the_store(make_settings):
    from confluent_kafka.admin import AdminClient

    from infra.topics import ensure_topics

    settings = make_settings(fernet_key=Fernet.generate_key().decode())
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap}), settings.topic_prefix, settings.partitions)
    install(SecretsChain(secrets_backends(settings, {}, writer="parent")))
    Variable.set("region", "eu-west-1")
    read_fd, write_fd = os.pipe()
    with KafkaEventLog(settings, client_id="parent-producer") as parent_log:
        parent_log.producer.poll(0.5)  # connected, its threads running, as a runner's heartbeat producer
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(read_fd)
                install(SecretsChain(secrets_backends(settings, {"TOCK_CONN_DB": "postgres://u:p@h/d"})))
                Variable.set("set_by_child", "yes")
                answer = {"region": Variable.get("region"), "db": Connection.get("db").host}
                os.write(write_fd, json.dumps(answer).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        _, status = os.waitpid(pid, 0)
        answer = json.loads(os.read(read_fd, 10_000) or b"{}")
        os.close(read_fd)
    install(SecretsChain(backends=()))
    assert os.waitstatus_to_exitcode(status) == 0
    assert answer == {"region": "eu-west-1", "db": "h"}
    assert set(read_store(settings).variables) == {"region", "set_by_child"}
