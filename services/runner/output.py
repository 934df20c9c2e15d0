"""A try's Kafka output and its success in one transaction (tock/kafka_output.py): all of it visible to
read_committed consumers with the success, or none of it.

The transactional id is the try's (``tock-output-<dag>|<run>|<task>|<map index>|<try>``): a try runs once
(its claim), so no other producer shares it; a runner that dies inside the transaction leaves it open
until the broker's transaction timeout aborts it, and the try is then declared dead and retried under
another try number, whose records are its own.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from typing import Any

from infra.log import ExternalRecord, Fenced, TransactionAborted, TransactionalSession
from infra.settings import Settings
from schemas import TaskSucceeded

log = logging.getLogger("tock.runner")

COMMIT_SECONDS = 120.0  # attempts to commit an output (a broker away longer fails the try: it is retried)


def output_records(reported: tuple[Any, ...]) -> list[ExternalRecord]:
    """The records of a try's report; ValueError for one that does not read back."""
    try:
        return [ExternalRecord(str(topic), None if key is None else base64.b64decode(key), base64.b64decode(value))
                for topic, key, value in reported]
    except (TypeError, ValueError, binascii.Error) as error:
        raise ValueError(f"the try's output does not read back: {error}") from None


def commit_output(settings: Settings, success: TaskSucceeded, records: list[ExternalRecord]) -> str:
    """Write ``records`` and ``success`` in one transaction: "" once committed, else why it could not be."""
    transactional_id = (f"tock-output-{success.dag_id}|{success.run_id}|{success.task_id}|{success.map_index}|"
                        f"{success.try_number}")
    deadline, error = time.monotonic() + COMMIT_SECONDS, ""
    try:
        session = TransactionalSession(settings, transactional_id, client_id="tock-runner-output")
    except Fenced as failed:
        return str(failed)
    try:
        while time.monotonic() < deadline:
            try:
                session.commit([success], None, external=records)
                return ""
            except TransactionAborted as aborted:
                error = str(aborted)
                log.warning("output of %s not committed (%s); trying again", transactional_id, aborted)
                time.sleep(1.0)
            except Fenced as fenced:
                return str(fenced)
        return error or "the commit did not finish in time"
    finally:
        session.close()
