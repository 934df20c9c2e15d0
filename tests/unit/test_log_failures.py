"""How a failed transactional call is read: librdkafka's fatal / txn_requires_abort / retriable flags."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from infra.log import Fenced, PartitionsLost, TransactionAborted, failure_kind


@pytest.mark.parametrize(("error", "kind"), [
    # a newer producer with the same transactional.id took over (librdkafka raises it as fatal)
    (KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True), Fenced),
    (KafkaError(KafkaError.PRODUCER_FENCED, "old epoch", fatal=True), Fenced),
    # KIP-447: the consumer group moved on; the transaction must be aborted
    (KafkaError(KafkaError.UNKNOWN_MEMBER_ID, "unknown member", txn_requires_abort=True), PartitionsLost),
    (KafkaError(KafkaError.ILLEGAL_GENERATION, "old generation", txn_requires_abort=True), PartitionsLost),
    (KafkaError(KafkaError.FENCED_INSTANCE_ID, "static member replaced", txn_requires_abort=True), PartitionsLost),
    # a record failed delivery inside the transaction
    (KafkaError(KafkaError._MSG_TIMED_OUT, "message timed out", txn_requires_abort=True), TransactionAborted),
    # retriable until the session's timeout, then the transaction is given up
    (KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True), TransactionAborted),
    # anything else is fatal, as librdkafka advises
    (KafkaError(KafkaError._STATE, "wrong state"), Fenced),
])
def test_failure_kind(error: KafkaError, kind: type) -> None:
    assert failure_kind(error) is kind


def test_partitions_lost_is_an_abort() -> None:
    assert issubclass(PartitionsLost, TransactionAborted)
    assert not issubclass(Fenced, TransactionAborted)
