"""`tock topics create` is idempotent and refuses topics that differ from Tock's definition (bringing
existing ones to what it upholds: tests/integration/test_topics_log_append_time.py)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from infra.topics import SPECS, TopicMismatch, TopicNames, ensure_topics


@pytest.fixture
def admin(kafka_bootstrap):
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


def test_creates_every_topic_with_its_policy_then_is_idempotent(admin, topic_prefix):
    created = ensure_topics(admin, topic_prefix, 4)
    assert sorted(created) == sorted(TopicNames(topic_prefix).all)
    assert ensure_topics(admin, topic_prefix, 4) == []
    metadata = admin.list_topics(timeout=10).topics
    for spec in SPECS:
        name = TopicNames(topic_prefix)[spec.logical]
        assert len(metadata[name].partitions) == 4
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["cleanup.policy"].value == spec.cleanup
        assert {key: configs[key].value for key in spec.upheld} == spec.upheld


def test_a_different_partition_count_is_an_error(admin, topic_prefix):
    ensure_topics(admin, topic_prefix, 4)
    with pytest.raises(TopicMismatch, match=r"tock.events has 4 partitions, Tock expects 6"):
        ensure_topics(admin, topic_prefix, 6)


def test_a_different_cleanup_policy_is_an_error(admin, topic_prefix):
    name = TopicNames(topic_prefix)["dags"]
    admin.create_topics([NewTopic(name, 4, 1, config={"cleanup.policy": "delete"})])[name].result(30)
    with pytest.raises(TopicMismatch, match=r"tock.dags has cleanup.policy=delete, Tock expects compact"):
        ensure_topics(admin, topic_prefix, 4)
