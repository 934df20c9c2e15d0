"""``kafka_output`` (issue 24): records kept with the try, carried in its report, read back by its runner;
a wrong topic, value or too much output refused with a message."""

from __future__ import annotations

import pytest

from services.runner.output import output_records
from tock import DAG, task
from tock.kafka_output import KafkaOutput
from tock_cli.local_run import run_dag


def test_records_are_kept_and_read_back_as_the_runner_writes_them():
    output = KafkaOutput()
    output.produce("orders", "one", key="k1")
    output.produce("orders.v2", b"\x00\x01")
    assert [(record.topic, record.key, record.value) for record in output_records(tuple(output.reported()))] == [
        ("orders", b"k1", b"one"), ("orders.v2", None, b"\x00\x01")]
    assert output.flush() == 0


@pytest.mark.parametrize("topic, value, words", [("bad topic", "v", "topic name"),
                                                 ("__consumer_offsets", "v", "internal"),
                                                 ("t", 3, "bytes or str"), ("", "v", "topic name")])
def test_a_wrong_record_is_refused_saying_what_is_wrong(topic, value, words):
    with pytest.raises((ValueError, TypeError), match=words):
        KafkaOutput().produce(topic, value)


def test_too_much_output_is_refused(monkeypatch):
    monkeypatch.setattr("tock.kafka_output.MOST_RECORDS", 2)
    output = KafkaOutput()
    output.produce("t", "a")
    output.produce("t", "b")
    with pytest.raises(ValueError, match="at most 2 records"):
        output.produce("t", "c")


def test_a_report_that_does_not_read_back_is_an_error():
    with pytest.raises(ValueError, match="does not read back"):
        output_records((["t", None, "not base64!"],))


def test_a_task_gets_kafka_output_in_its_context_and_dags_test_says_what_it_would_write():
    with DAG("writer", schedule=None) as dag:
        @task
        def write(kafka_output=None):
            kafka_output.produce("events", "x")

        write()
    lines: list[str] = []
    assert run_dag(dag, report=lines.append).state == "success"
    assert any("1 Kafka output record(s) (not written by dags test)" in line for line in lines)
