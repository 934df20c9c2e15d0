"""The log client: Tock's only way to write and read its Kafka log.

``KafkaEventLog`` appends (idempotent, acks=all), ``EventReader`` reads read_committed
and dead-letters what it cannot decode, ``TransactionalSession`` commits decisions with
their input offsets (KIP-447), ``KeyedPartitionReader`` reads one key of a partition
from a time on (task logs), ``replay`` reads partitions up to where they ended when it
began. Every record goes to partition ``partition_for(partition key)``, the Java client's
default partitioner on the dag_id.
"""

from infra.log.dead_letter import DeadLetterQueue
from infra.log.keyed_reader import KeyedPartitionReader
from infra.log.partitioner import murmur2, partition_for
from infra.log.producer import DeliveryFailed, KafkaEventLog
from infra.log.reader import EventReader, RawMessage
from infra.log.records import LogRecord, routing_key
from infra.log.replay import replay, settle
from infra.log.transactions import (
                                    ExternalRecord,
                                    Fenced,
                                    PartitionsLost,
                                    RawRecord,
                                    TransactionAborted,
                                    TransactionalSession,
                                    failure_kind,
)

__all__ = [
    "DeadLetterQueue",
    "DeliveryFailed",
    "EventReader",
    "ExternalRecord",
    "Fenced",
    "KafkaEventLog",
    "KeyedPartitionReader",
    "LogRecord",
    "PartitionsLost",
    "RawMessage",
    "RawRecord",
    "TransactionAborted",
    "TransactionalSession",
    "failure_kind",
    "murmur2",
    "partition_for",
    "replay",
    "routing_key",
    "settle",
]
