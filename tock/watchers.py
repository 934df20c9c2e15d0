"""``AssetWatcher`` and the Kafka message-queue triggers it takes (Airflow 3's names): DAGs scheduled on
an asset run when records arrive on a Kafka topic.

    trigger = MessageQueueTrigger(scheme="kafka", topics=["orders"])
    orders = Asset("orders", watchers=[AssetWatcher(name="orders_topic", trigger=trigger)])

    with DAG("on_orders", schedule=[orders]): ...

In Airflow a triggerer process runs the trigger and each message it accepts becomes an asset event,
at least once. In Tock the ``tock asset-watcher`` service reads the topics as a consumer group and
writes each record's asset event and the record's consumed offset in one Kafka transaction: exactly
one event per record, whatever restarts (services/asset_watcher/). The topics must be on Tock's own
Kafka cluster (a transaction spans one cluster).
"""

from __future__ import annotations

import re
from typing import Any

from schemas.dags import WatcherDefinition

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's rule for topic names
# Settings of Airflow's Kafka trigger that say where and how to connect: Tock's watcher uses its own
# cluster and settings, so these are accepted and have nothing to do (a different cluster is refused).
_CONNECTION = ("kafka_config_id", "poll_timeout", "poll_interval", "bootstrap_servers")


class MessageQueueTrigger:
    """``MessageQueueTrigger(scheme="kafka", topics=[...], apply_function=None, ...)`` (Airflow's common
    messaging trigger), or the older ``MessageQueueTrigger(queue="kafka://host:port/topic")``.
    ``apply_function``: the dotted path of a function called with each record (``.value()``, ``.key()``,
    ``.topic()``, ``.partition()``, ``.offset()``); a record is an event when it returns a truthy value,
    and that value (if JSON) is the event's ``payload``. Only the ``kafka`` scheme is offered."""

    def __init__(self, *, queue: str | None = None, scheme: str | None = None, topics: Any = None,
                 apply_function: str | None = None, **settings: Any) -> None:
        unknown = sorted(set(settings) - set(_CONNECTION))
        if unknown:
            raise ValueError(f"MessageQueueTrigger: {', '.join(map(repr, unknown))} not offered (Tock's Kafka "
                             f"trigger takes topics, apply_function and {', '.join(_CONNECTION)})")
        if queue is not None:
            if scheme is not None or topics is not None:
                raise ValueError("MessageQueueTrigger: give queue='kafka://...' or scheme= and topics=, not both")
            scheme, topics = _from_queue(queue)
        if scheme != "kafka":
            raise ValueError(f"MessageQueueTrigger: scheme {scheme!r} is not offered; Tock watches Kafka topics "
                             "(scheme='kafka')")
        self.topics = _topics(topics)
        if apply_function is not None and (not isinstance(apply_function, str) or not _DOTTED.match(apply_function)):
            raise ValueError(f"MessageQueueTrigger: apply_function must be the dotted path of a function "
                             f"('module.function'), got {apply_function!r}")
        self.apply_function = apply_function or ""
        self.settings = settings

    def __repr__(self) -> str:
        return f"MessageQueueTrigger(scheme='kafka', topics={self.topics!r})"


class KafkaMessageQueueTrigger(MessageQueueTrigger):
    """``KafkaMessageQueueTrigger(topics=[...], apply_function=None, ...)`` (the Kafka provider's)."""

    def __init__(self, *, topics: Any, apply_function: str | None = None, **settings: Any) -> None:
        super().__init__(scheme="kafka", topics=topics, apply_function=apply_function, **settings)


class AssetWatcher:
    """``AssetWatcher(name, trigger)``: each record the trigger accepts is an event of the asset that
    lists this watcher in its ``watchers``."""

    def __init__(self, name: str, trigger: MessageQueueTrigger) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"AssetWatcher: name must be a non-empty string, got {name!r}")
        if not isinstance(trigger, MessageQueueTrigger):
            raise TypeError(f"AssetWatcher {name!r}: trigger must be a MessageQueueTrigger (Tock watches Kafka "
                            f"topics), got {type(trigger).__name__}")
        self.name, self.trigger = name, trigger

    def definition(self) -> WatcherDefinition:
        return WatcherDefinition(name=self.name, topics=list(self.trigger.topics),
                                 apply_function=self.trigger.apply_function)

    def __repr__(self) -> str:
        return f"AssetWatcher({self.name!r}, {self.trigger!r})"


def _from_queue(queue: Any) -> tuple[str, list[str]]:
    if not isinstance(queue, str) or "://" not in queue:
        raise ValueError(f"MessageQueueTrigger: queue must look like 'kafka://host:port/topic', got {queue!r}")
    scheme, rest = queue.split("://", 1)
    _host, _slash, topic = rest.partition("/")
    return scheme, [topic]


def _topics(topics: Any) -> list[str]:
    if isinstance(topics, str) or not isinstance(topics, list | tuple) or not topics:
        raise ValueError(f"MessageQueueTrigger: topics must be a non-empty list of topic names, got {topics!r}")
    names = [name.strip() for item in topics for name in str(item).split(",")]  # Airflow's "a, b" too
    wrong = [name for name in names if not _TOPIC.match(name)]
    if wrong:
        raise ValueError(f"MessageQueueTrigger: {', '.join(map(repr, wrong))} is not a Kafka topic name")
    return sorted(dict.fromkeys(names))
