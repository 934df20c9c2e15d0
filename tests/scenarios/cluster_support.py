"""A private three-node Kafka cluster for tests and benchmarks, and what a test reads off it:
partition leaders and in-sync replicas from the metadata, and the log segments as the broker
wrote them (Kafka's own DumpLogSegments), so offsets and transaction markers can be checked."""

from __future__ import annotations

import random
import re
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from infra.broker import LocalKafkaBroker, require_java
from infra.settings import Settings, load_settings
from tests.ports import free_ports


def start_private_cluster(home: Path, nodes: int = 3, heap: str = "384M") -> LocalKafkaBroker:
    """A cluster of ``nodes`` nodes under its own home, on free ports (clients, then controllers)."""
    first = free_ports(2 * nodes)
    broker = LocalKafkaBroker(load_settings({"TOCK_HOME": str(home), "TOCK_BROKER_PORT": str(first),
                                             "TOCK_BROKER_HEAP": heap, "TOCK_BROKER_NODES": str(nodes)}))
    try:
        broker.start(timeout=120)
    except BaseException:
        broker.stop()
        raise
    return broker


def cluster_settings(broker: LocalKafkaBroker, home: Path, **overrides) -> Settings:
    """Settings of a test on ``broker``: its own home and topic prefix, three partitions."""
    values = {"TOCK_HOME": str(home), "TOCK_KAFKA_BOOTSTRAP": broker.address,
              "TOCK_TOPIC_PREFIX": f"c{uuid.uuid4().hex[:10]}.", "TOCK_PARTITIONS": "3"}
    values.update({f"TOCK_{key.upper()}": str(value) for key, value in overrides.items()})
    return load_settings(values)


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    """Broker id leading ``topic``[``partition``], waiting out an election in progress."""
    deadline = time.monotonic() + 30
    while True:
        metadata = admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
        if metadata.leader >= 0:
            return metadata.leader
        assert time.monotonic() < deadline, f"{topic}[{partition}] has no leader after 30 s"
        time.sleep(0.2)


def partitions_missing_from_isr(admin: AdminClient, node_id: int, prefix: str) -> list[str]:
    """Partitions of the topics named ``prefix``* (and Kafka's internal ones) whose ISR lacks ``node_id``."""
    topics = admin.list_topics(timeout=10).topics
    return [f"{name}[{number}] isr={partition.isrs}"
            for name, topic in topics.items() if name.startswith((prefix, "__"))
            for number, partition in topic.partitions.items() if node_id not in partition.isrs]


@dataclass(frozen=True)
class Batch:
    """One record batch of a log segment, as DumpLogSegments prints it."""

    base_offset: int
    last_offset: int
    transactional: bool
    control: bool
    crc: int


_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .*isTransactional: (\w+) isControl: (\w+).* crc: (\d+)")


def dump_batches(broker: LocalKafkaBroker, node_id: int, topic: str, partition: int) -> list[Batch]:
    """Every batch of ``topic``[``partition``] in node ``node_id``'s log segments, in offset order."""
    folder = broker.node(node_id).data_dir / f"{topic}-{partition}"
    segments = sorted(folder.glob("*.log"))
    assert segments, f"no log segment in {folder}"
    command = [require_java(), "-Xmx128M", "-cp", f"{broker.settings.kafka_libs}/*", "kafka.tools.DumpLogSegments",
               "--files", ",".join(map(str, segments))]
    dumped = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr
    return [Batch(int(match[1]), int(match[2]), match[3] == "true", match[4] == "true", int(match[5]))
            for match in _BATCH.finditer(dumped.stdout)]
