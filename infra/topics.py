"""Tock's topics: names, partition counts and cleanup policies, created idempotently; the settings
Tock's correctness rests on are brought to existing topics too."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, TopicMetadata

from infra.broker_config import replication_for
from schemas.declare import DAGS, DEAD_LETTER, EVENTS, HEARTBEATS, LOGS, PARSING, SCHEDULERS, SECRETS, SNAPSHOTS, USERS

# Every topic has TOCK_PARTITIONS partitions, so partition p of each concerns the same DAGs.

SNAPSHOT_MAX_BYTES = 64 * 1024 * 1024  # largest snapshot record (topic max.message.bytes, producer message.max.bytes)
# Largest record of tock.events: a try's success carries its values (TOCK_XCOM_MAX_BYTES, at most 8 MiB),
# a queued try its context and upstream values (the scheduler keeps those under 12 MiB).
EVENTS_MAX_BYTES = 16 * 1024 * 1024
# Largest record of tock.dags: one DAG's definition (a 10,000-task DAG encodes to about 1.1 MB, over the
# broker's 1 MB default; the DAG processor refuses one over services/dag_processor/report.py MAX_DEFINITION).
DAGS_MAX_BYTES = 16 * 1024 * 1024


log = logging.getLogger("tock.topics")

# Silence is judged on a clock Tock controls: a runner's TaskStarted, heartbeats and outcomes count
# from when the broker appended them (the record timestamp), never from the runner's own clock.
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


class TopicMismatch(RuntimeError):
    """An existing topic's partition count or cleanup policy differs from Tock's."""


class TopicNotUpgraded(TopicMismatch):
    """An existing topic lacks a setting Tock upholds, and the cluster refused to set it."""


@dataclass(frozen=True)
class TopicSpec:
    logical: str
    cleanup: str
    configs: dict[str, str] = field(default_factory=dict)  # set when the topic is created, never after
    upheld: dict[str, str] = field(default_factory=dict)  # set when created, and on existing topics too


SPECS: tuple[TopicSpec, ...] = (
    TopicSpec(EVENTS, "delete", {"retention.ms": "-1"},
              upheld={**LOG_APPEND_TIME, "max.message.bytes": str(EVENTS_MAX_BYTES)}),
    TopicSpec(HEARTBEATS, "compact,delete", {"retention.ms": str(6 * 3600 * 1000),
                                                   "segment.ms": str(600 * 1000)}, upheld=LOG_APPEND_TIME),
    TopicSpec(DAGS, "compact", upheld={"max.message.bytes": str(DAGS_MAX_BYTES)}),
    TopicSpec(PARSING, "delete", {"retention.ms": str(7 * 24 * 3600 * 1000)}),
    TopicSpec(SCHEDULERS, "compact,delete", {"retention.ms": str(24 * 3600 * 1000)}),
    TopicSpec(DEAD_LETTER, "delete", {"retention.ms": "-1"}),
    TopicSpec(LOGS, "delete", {"retention.ms": str(7 * 24 * 3600 * 1000)}),  # see log_retention_hours
    TopicSpec(USERS, "delete", {"retention.ms": "-1"}),  # accounts: every change kept, like tock.events
    # Variables and connections (values encrypted): compaction keeps the latest record of each.
    TopicSpec(SECRETS, "compact"),
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


def topic_exists(consumer: Consumer, prefix: str, logical: str, service: str) -> bool:
    """Whether the logical topic exists (with partitions); if not, says so for ``service``. A service
    that writes snapshots checks tock.snapshots at start: writing to a missing topic would abort every
    transaction (an upgrade that did not run `tock topics create`)."""
    topic = topic_name(prefix, logical)
    found = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        log.error("topic %s does not exist: the %s writes no snapshots, every takeover replays the full history "
                  "(`tock topics create` creates it)", topic, service)
        return False
    return True


def ensure_topics(admin: AdminClient, prefix: str, partitions: int, timeout: float = 30.0, *,
                  log_retention_hours: float | None = None) -> list[str]:
    """Create missing topics; verify every other one and bring it to the settings Tock upholds
    (``TopicSpec.upheld``: LogAppendTime on tock.events and tock.heartbeats), by an incremental
    alter that changes nothing else. Returns the names it created.
    ``log_retention_hours`` (TOCK_TASK_LOG_RETENTION_HOURS): how long a new tock.logs keeps lines.

    New topics are replicated as the cluster allows (infra/broker_config.replication_for): 3 replicas
    and min.insync.replicas=2 on 3+ brokers, 2/2 on two, 1/1 on one. Brokers are counted from the
    metadata, which lists the live ones: create topics while the whole cluster runs."""
    wanted = {topic_name(prefix, spec.logical): _with_log_retention(spec, log_retention_hours) for spec in SPECS}
    cluster = admin.list_topics(timeout=timeout)
    replicas, min_isr = replication_for(len(cluster.brokers))
    missing = [NewTopic(name, num_partitions=partitions, replication_factor=replicas,
                        config={"cleanup.policy": spec.cleanup, "min.insync.replicas": str(min_isr), **spec.configs,
                                **spec.upheld})
               for name, spec in wanted.items() if name not in cluster.topics]
    created = _create(admin, missing, timeout)
    # Topics we did not create (including ones another client created concurrently) must match.
    to_verify = [name for name in wanted if name not in created]
    metadata = _wait_for_metadata(admin, list(wanted), timeout)
    configs = {name: topic_configs(admin, name, timeout) for name in to_verify}
    problems = [problem for name in to_verify
                for problem in _mismatches(name, wanted[name], partitions, metadata[name], configs[name])]
    if problems:
        raise TopicMismatch("; ".join(problems) + ". Delete and recreate these topics, or set "
                            "TOCK_PARTITIONS / TOCK_TOPIC_PREFIX to match them.")
    _uphold(admin, {name: changes for name in to_verify if (changes := _differing(wanted[name].upheld, configs[name]))},
            timeout)
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


def topic_configs(admin: AdminClient, name: str, timeout: float = 30.0) -> dict[str, str]:
    """A topic's configs. The broker that answers may not know a topic just created yet (its
    metadata lags the controller's on a busy machine or in a cluster: UNKNOWN_TOPIC_OR_PART while
    another broker already lists it): asked again until ``timeout``."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    deadline = time.monotonic() + timeout
    while True:
        try:
            described = admin.describe_configs([resource])[resource].result(timeout=timeout)
            return {key: entry.value for key, entry in described.items()}
        except KafkaException as error:
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _mismatches(name: str, spec: TopicSpec, partitions: int, metadata: TopicMetadata,
                configs: dict[str, str]) -> list[str]:
    problems = []
    if len(metadata.partitions) != partitions:
        problems.append(f"topic {name} has {len(metadata.partitions)} partitions, Tock expects {partitions}")
    actual = configs["cleanup.policy"]
    if sorted(actual.split(",")) != sorted(spec.cleanup.split(",")):
        problems.append(f"topic {name} has cleanup.policy={actual}, Tock expects {spec.cleanup}")
    return problems


def _differing(wanted: dict[str, str], configs: dict[str, str]) -> dict[str, str]:
    """The wanted configs a topic's ``configs`` lack or hold another value of."""
    return {key: value for key, value in wanted.items() if configs.get(key) != value}


def _uphold(admin: AdminClient, changes: dict[str, dict[str, str]], timeout: float) -> None:
    """Set these configs on existing topics (an incremental alter: the topics' other settings stay).
    Records already in a topic keep the timestamps they were written with."""
    if not changes:
        return
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in configs.items()])
        for name, configs in changes.items()]
    for resource, future in admin.incremental_alter_configs(resources, request_timeout=timeout).items():
        settings = " ".join(f"{key}={value}" for key, value in changes[resource.name].items())
        try:
            future.result(timeout=timeout)
        except KafkaException as error:
            raise TopicNotUpgraded(
                f"could not set {settings} on topic {resource.name} ({error.args[0]}); set it with "
                f"kafka-configs.sh --alter --entity-type topics --entity-name {resource.name} "
                f"--add-config {settings.replace(' ', ',')}") from None
        log.info("topic %s: set %s", resource.name, settings)
    _wait_for_configs(admin, changes, timeout)


def _wait_for_configs(admin: AdminClient, changes: dict[str, dict[str, str]], timeout: float) -> None:
    """Until the broker describes the topics with the configs just set (the alter is committed by the
    controller; brokers apply it from the metadata log a moment later)."""
    deadline = time.monotonic() + timeout
    while any(_differing(configs, topic_configs(admin, name, timeout)) for name, configs in changes.items()):
        if time.monotonic() > deadline:
            raise TopicNotUpgraded(f"topics {sorted(changes)} were altered but not described so within {timeout} s")
        time.sleep(0.1)
