"""Tock's topics: names, partition counts and cleanup policies, created idempotently."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, TopicMetadata

from infra.broker_config import replication_for
from schemas.declare import DAGS, DEAD_LETTER, EVENTS, HEARTBEATS, LOGS, PARSING, SCHEDULERS, SNAPSHOTS, USERS

# Every topic has TOCK_PARTITIONS partitions, so partition p of each concerns the same DAGs.

SNAPSHOT_MAX_BYTES = 64 * 1024 * 1024  # largest snapshot record (topic max.message.bytes, producer message.max.bytes)


class TopicMismatch(RuntimeError):
    """An existing topic's partition count or cleanup policy differs from Tock's."""


@dataclass(frozen=True)
class TopicSpec:
    logical: str
    cleanup: str
    configs: dict[str, str] = field(default_factory=dict)


SPECS: tuple[TopicSpec, ...] = (
    TopicSpec(EVENTS, "delete", {"retention.ms": "-1"}),
    TopicSpec(HEARTBEATS, "compact,delete", {"retention.ms": str(6 * 3600 * 1000),
                                                   "segment.ms": str(600 * 1000)}),
    TopicSpec(DAGS, "compact"),
    TopicSpec(PARSING, "delete", {"retention.ms": str(7 * 24 * 3600 * 1000)}),
    TopicSpec(SCHEDULERS, "compact,delete", {"retention.ms": str(24 * 3600 * 1000)}),
    TopicSpec(DEAD_LETTER, "delete", {"retention.ms": "-1"}),
    TopicSpec(LOGS, "delete", {"retention.ms": str(7 * 24 * 3600 * 1000)}),  # see log_retention_hours
    TopicSpec(USERS, "delete", {"retention.ms": "-1"}),  # accounts: every change kept, like tock.events
    # One key per partition (the partition number), in that partition: compaction keeps the latest.
    # A big partition's snapshot is megabytes (compressed), beyond the broker's 1 MB default.
    TopicSpec(SNAPSHOTS, "compact", {"max.message.bytes": str(SNAPSHOT_MAX_BYTES),
                                     "segment.ms": str(3600 * 1000), "min.cleanable.dirty.ratio": "0.1"}),
)


def topic_name(prefix: str, logical: str) -> str:
    """The real topic name of a logical one, e.g. ``tock.events`` or ``t17.tock.events``."""
    return f"{prefix}tock.{logical}"


@dataclass(frozen=True)
class TopicNames:
    """Every real topic name under one prefix."""

    prefix: str = ""

    def __getitem__(self, logical: str) -> str:
        return topic_name(self.prefix, logical)

    @property
    def all(self) -> list[str]:
        return [topic_name(self.prefix, spec.logical) for spec in SPECS]


def ensure_topics(admin: AdminClient, prefix: str, partitions: int, timeout: float = 30.0, *,
                  log_retention_hours: float | None = None) -> list[str]:
    """Create missing topics; verify every other one. Returns the names it created.
    ``log_retention_hours`` (TOCK_TASK_LOG_RETENTION_HOURS): how long a new tock.logs keeps lines.

    New topics are replicated as the cluster allows (infra/broker_config.replication_for): 3 replicas
    and min.insync.replicas=2 on 3+ brokers, 2/2 on two, 1/1 on one. Brokers are counted from the
    metadata, which lists the live ones: create topics while the whole cluster runs."""
    wanted = {topic_name(prefix, spec.logical): _with_log_retention(spec, log_retention_hours) for spec in SPECS}
    cluster = admin.list_topics(timeout=timeout)
    replicas, min_isr = replication_for(len(cluster.brokers))
    missing = [NewTopic(name, num_partitions=partitions, replication_factor=replicas,
                        config={"cleanup.policy": spec.cleanup, "min.insync.replicas": str(min_isr), **spec.configs})
               for name, spec in wanted.items() if name not in cluster.topics]
    created = _create(admin, missing, timeout)
    # Topics we did not create (including ones another client created concurrently) must match.
    to_verify = [name for name in wanted if name not in created]
    metadata = _wait_for_metadata(admin, list(wanted), timeout)
    problems = [problem for name in to_verify
                for problem in _mismatches(admin, name, wanted[name], partitions, metadata[name], timeout)]
    if problems:
        raise TopicMismatch("; ".join(problems) + ". Delete and recreate these topics, or set "
                            "TOCK_PARTITIONS / TOCK_TOPIC_PREFIX to match them.")
    return created


def _with_log_retention(spec: TopicSpec, hours: float | None) -> TopicSpec:
    if spec.logical != LOGS or hours is None:
        return spec
    return TopicSpec(spec.logical, spec.cleanup, {**spec.configs, "retention.ms": str(round(hours * 3600 * 1000))})


def _wait_for_metadata(admin: AdminClient, names: list[str], timeout: float) -> dict[str, TopicMetadata]:
    """Topic metadata of ``names``, waiting out the broker's metadata lag after a creation and
    leader elections (a partition without a leader, or an error, on a busy or partly down cluster)."""
    deadline = time.monotonic() + timeout
    while True:
        topics = admin.list_topics(timeout=timeout).topics
        if all(name in topics and _settled(topics[name]) for name in names):
            return topics
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {names} did not appear in the broker's metadata within {timeout} s")
        time.sleep(0.1)


def _settled(metadata: TopicMetadata) -> bool:
    return (metadata.error is None and bool(metadata.partitions)
            and all(partition.leader >= 0 and partition.error is None for partition in metadata.partitions.values()))


def _create(admin: AdminClient, topics: list[NewTopic], timeout: float) -> list[str]:
    if not topics:
        return []
    created = []
    for name, future in admin.create_topics(topics, operation_timeout=timeout).items():
        try:
            future.result()
            created.append(name)
        except Exception as error:  # noqa: BLE001 - a concurrent creator is fine
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise RuntimeError(f"could not create topic {name}: {error}") from error
    return created


def _mismatches(admin: AdminClient, name: str, spec: TopicSpec, partitions: int, metadata: TopicMetadata,
                timeout: float) -> list[str]:
    problems = []
    if len(metadata.partitions) != partitions:
        problems.append(f"topic {name} has {len(metadata.partitions)} partitions, Tock expects {partitions}")
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(timeout=timeout)
    actual = configs["cleanup.policy"].value
    if sorted(actual.split(",")) != sorted(spec.cleanup.split(",")):
        problems.append(f"topic {name} has cleanup.policy={actual}, Tock expects {spec.cleanup}")
    return problems
