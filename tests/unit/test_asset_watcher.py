"""AssetWatcher (issue 24): the SDK's Airflow names become watcher definitions, and the watcher's core
makes each accepted record one event per asset watching its topic, with an id that is the record's place."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.log import RawMessage
from schemas import DagDefinition, TaskDefinition
from services.asset_watcher.core.watching import VALUE_KEPT, asset_events, record_extra, watch_table
from tock import DAG, Asset, AssetWatcher, KafkaMessageQueueTrigger, MessageQueueTrigger, task


def watched_dag(*assets: Asset) -> DagDefinition:
    with DAG("on_orders", schedule=list(assets)) as dag:
        @task
        def use():
            pass

        use()
    return dag.to_definition("/dags/on_orders.py")


def message(offset: int = 7, value: bytes | None = b'{"id": 1}', topic: str = "orders") -> RawMessage:
    return RawMessage(topic, 2, offset, b"k", value, 100.0)


def always(_watched, _message):
    return True, None


def test_airflows_spellings_of_a_kafka_trigger_give_the_same_watcher():
    spellings = [MessageQueueTrigger(scheme="kafka", topics=["orders"], apply_function="pkg.mod.fn"),
                 KafkaMessageQueueTrigger(topics=["orders"], apply_function="pkg.mod.fn", kafka_config_id="x"),
                 MessageQueueTrigger(queue="kafka://localhost:9092/orders", apply_function="pkg.mod.fn")]
    definitions = {str(AssetWatcher("w", trigger).definition()) for trigger in spellings}
    assert len(definitions) == 1
    assert MessageQueueTrigger(scheme="kafka", topics=["a, b", "a"]).topics == ["a", "b"]  # Airflow's "a, b" too


@pytest.mark.parametrize(("arguments", "says"), [
    ({"scheme": "sqs", "topics": ["q"]}, "scheme 'sqs' is not offered"),
    ({"scheme": "kafka", "topics": "orders"}, "non-empty list"),
    ({"scheme": "kafka", "topics": ["bad topic!"]}, "not a Kafka topic name"),
    ({"scheme": "kafka", "topics": ["o"], "apply_function": "nodots"}, "dotted path"),
    ({"scheme": "kafka", "topics": ["o"], "group_id": "g"}, "'group_id' not offered"),
    ({"scheme": "kafka", "topics": ["o"], "apply_function": "m.f", "apply_function_args": [1]},
     "'apply_function_args' not offered"),
    ({"queue": "kafka://h/o", "topics": ["o"]}, "not both"),
])
def test_a_trigger_tock_cannot_honour_is_refused_saying_why(arguments, says):
    with pytest.raises(ValueError, match=says):
        MessageQueueTrigger(**arguments)


def test_an_asset_needs_watchers_that_are_watchers_and_named_apart():
    trigger = MessageQueueTrigger(scheme="kafka", topics=["orders"])
    with pytest.raises(TypeError, match="must be AssetWatchers"):
        Asset("orders", watchers=[trigger])
    with pytest.raises(ValueError, match="named alike"):
        Asset("orders", watchers=[AssetWatcher("w", trigger), AssetWatcher("w", trigger)])


def test_the_table_lists_each_watched_topic_with_its_assets_once():
    orders = Asset("orders", watchers=[AssetWatcher("w", MessageQueueTrigger(scheme="kafka", topics=["o1", "o2"]))])
    plain = Asset("plain")
    table = watch_table([watched_dag(orders, plain), watched_dag(orders)])
    assert sorted(table) == ["o1", "o2"]
    assert [(item.uri, item.watcher) for item in table["o1"]] == [("orders", "w")]
    unwatched = DagDefinition(dag_id="x", file_path="/x.py", tasks=[TaskDefinition(task_id="t", kind="empty")])
    assert watch_table([unwatched]) == {}


def test_each_accepted_record_is_one_event_per_asset_with_the_records_place_as_its_id():
    a = Asset("a", watchers=[AssetWatcher("w1", MessageQueueTrigger(scheme="kafka", topics=["orders"])),
                             AssetWatcher("w2", MessageQueueTrigger(scheme="kafka", topics=["orders"]))])
    b = Asset("b", watchers=[AssetWatcher("w", MessageQueueTrigger(scheme="kafka", topics=["orders"]))])
    table = watch_table([watched_dag(a, b)])
    events = asset_events(table, [message(7), message(8)], always, now=5.0)
    assert [(event.uri, event.event_id) for event in events] == [
        ("a", "watch/orders/2/7/a"), ("b", "watch/orders/2/7/b"), ("a", "watch/orders/2/8/a"),
        ("b", "watch/orders/2/8/b")]
    extra = json.loads(events[0].extra_json)
    assert (extra["topic"], extra["partition"], extra["offset"], extra["key"], extra["value"]) == (
        "orders", 2, 7, "k", '{"id": 1}')
    assert asset_events(table, [message(topic="other")], always, 5.0) == []


def test_an_apply_function_decides_which_records_are_events_and_what_they_carry():
    a = Asset("a", watchers=[AssetWatcher("w", MessageQueueTrigger(scheme="kafka", topics=["orders"],
                                                                   apply_function="m.f"))])
    table = watch_table([watched_dag(a)])
    events = asset_events(table, [message(1), message(2)],
                          lambda _w, found: (found.offset == 2, {"seen": found.offset}), 5.0)
    assert [json.loads(event.extra_json)["payload"] for event in events] == [{"seen": 2}]


def test_values_that_are_not_text_or_too_long_are_kept_as_base64_or_cut():
    assert record_extra(message(value=b"\xff\xfe"), "w")["value_base64"] == "//4="
    long = record_extra(message(value=b"x" * (VALUE_KEPT + 10)), "w")
    assert (long["value_truncated"], len(long["value"])) == (VALUE_KEPT + 10, VALUE_KEPT)
    assert record_extra(message(value=None), "w")["value"] is None


@given(offsets=st.lists(st.integers(min_value=0, max_value=10**9), unique=True, max_size=50))
def test_distinct_records_make_distinct_events_and_the_same_record_the_same_event(offsets):
    a = Asset("a", watchers=[AssetWatcher("w", MessageQueueTrigger(scheme="kafka", topics=["orders"]))])
    table = watch_table([watched_dag(a)])
    first = asset_events(table, [message(offset) for offset in offsets], always, 1.0)
    again = asset_events(table, [message(offset) for offset in offsets], always, 2.0)
    assert len({event.event_id for event in first}) == len(offsets)
    assert [event.event_id for event in first] == [event.event_id for event in again]


def test_a_payload_the_event_cannot_carry_as_json_is_kept_as_its_repr():
    mixed = record_extra(message(), "w", {1: "a", "b": 2})  # json.dumps(sort_keys=True) refuses it
    assert mixed["payload"] == repr({1: "a", "b": 2})
    json.dumps(mixed, sort_keys=True)  # and the extra itself always encodes
    huge = record_extra(message(), "w", {"rows": "x" * (VALUE_KEPT + 1)})
    assert isinstance(huge["payload"], str) and len(huge["payload"]) <= 1000
