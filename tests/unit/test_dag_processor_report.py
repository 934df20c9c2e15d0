"""What a parser child sends its parent: plain data, read with limits; anything else is the file's error."""

from __future__ import annotations

import base64
import json
import pickle

import pytest

from schemas import DagDefinition, DagParsed, DagRemoved, TaskDefinition, encode
from services.dag_processor.core import ParseResult
from services.dag_processor.report import (
    LENGTH,
    MAX_DEFINITION,
    MAX_REPORT,
    encode_report,
    read_report,
)

RAN: list[str] = []


def _ran_in_the_reader() -> None:
    RAN.append("code from the pickle ran")


class Smuggler:
    """Unpickling this calls a function: what a DAG file could make the manager run."""

    def __reduce__(self):
        return _ran_in_the_reader, ()


def definition(dag_id: str = "etl", command: str = "echo 1") -> DagDefinition:
    return DagDefinition(dag_id=dag_id, file_path="/dags/etl.py", schedule="@hourly",
                         tasks=[TaskDefinition(task_id="t", kind="bash", command=command)])


def framed(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


def report_json(**fields) -> bytes:
    report = {"file_hash": "h1", "error": None, "traceback": "", "dags": [], "imports": None, **fields}
    return framed(json.dumps(report).encode())


def test_a_report_round_trips_with_its_definitions_and_fingerprints():
    result = ParseResult("h1", dags=((definition("a"), "fa"), (definition("b"), "fb")))
    assert read_report(encode_report(result)) == result


def test_an_error_report_round_trips():
    result = ParseResult("h1", error="SyntaxError: bad", traceback="Traceback ...")
    assert read_report(encode_report(result)) == result


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00", encode_report(ParseResult("h1"))[:-1]])
def test_nothing_or_a_report_cut_short_is_no_report(data):
    assert read_report(data) is None


def test_a_smuggled_pickle_is_never_unpickled_and_is_the_files_error():
    data = framed(pickle.dumps(Smuggler()))
    assert pickle.loads(data[LENGTH.size:]) is None and RAN == ["code from the pickle ran"]  # it would run
    RAN.clear()
    result = read_report(data)
    assert RAN == []
    assert "malformed (not JSON" in result.error and "must not write to the parser's result pipe" in result.error


@pytest.mark.parametrize(("data", "reason"), [
    (framed(b"\xff\xfe garbage \x00"), "not JSON"),
    (encode_report(ParseResult("h1")) + b"more", "4 bytes after the report"),
    (framed(b"[1, 2]"), "not an object with the fields"),
    (report_json(extra=1), "not an object with the fields"),
    (report_json(dags="etl"), "wrong type"),
    (report_json(file_hash="x" * 10_000), "wrong type or size"),
    (report_json(dags=[123]), "not a base64 string"),
    (report_json(dags=["%%%"]), "does not decode"),
    (report_json(dags=[base64.b64encode(b"T\x09DagParsed\x00\x01\xff\xff").decode()]), "does not decode"),
    (report_json(dags=[base64.b64encode(encode(DagRemoved(dag_id="x", file_path="/x", at=1))).decode()]),
     "a DAG is a DagRemoved"),
    (framed(b"[" * 100_000 + b"]" * 100_000), "not JSON"),
])
def test_a_malformed_report_is_the_files_error_saying_why(data, reason):
    result = read_report(data)
    assert result.dags == () and "the parser's report is malformed" in result.error
    assert reason in result.error


def test_a_report_announcing_more_than_the_limit_fails_before_it_is_read():
    result = read_report(LENGTH.pack(MAX_REPORT + 1) + b"{")
    assert f"over the limit of {MAX_REPORT:,}" in result.error


def test_an_error_text_and_traceback_from_a_child_are_clipped():
    result = read_report(report_json(error="E" * 100_000, traceback="T" * 100_000))
    assert len(result.error) < 5_000 and len(result.traceback) <= 20_000


def test_a_dag_too_large_for_one_kafka_record_is_the_files_error_naming_it():
    huge = ParseResult("h1", dags=((definition("small"), "f1"), (definition("huge", "x" * MAX_DEFINITION), "f2")))
    result = read_report(encode_report(huge))
    assert result.dags == () and "DAG 'huge' takes" in result.error and "split it" in result.error


def test_a_forged_report_with_a_dag_too_large_is_refused_by_the_reader_too():
    big = DagParsed(dag_id="huge", file_path="/d", fingerprint="f", at=0.0,
                    definition=definition("huge", "x" * MAX_DEFINITION))
    result = read_report(report_json(dags=[base64.b64encode(encode(big)).decode()]))
    assert result.dags == () and "DAG 'huge' takes" in result.error


def test_a_report_over_the_limit_is_replaced_by_an_error_in_the_child():
    many = tuple((definition(f"d{n}", "x" * 900_000), f"f{n}") for n in range(MAX_REPORT // 1_200_000 + 1))
    # (each 1.2 MB of base64: together over MAX_REPORT, each under MAX_DEFINITION)
    result = read_report(encode_report(ParseResult("h1", dags=many)))
    assert result.dags == () and "over the limit of" in result.error
