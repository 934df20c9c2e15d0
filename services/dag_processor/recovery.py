"""What the DAG processor knows at start-up: the latest definitions in the compacted ``tock.dags``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from infra.log import replay
from infra.settings import Settings
from schemas import DAGS, DagParsed
from services.dag_processor import core

log = logging.getLogger("tock.dag_processor")
ATTEMPTS = 5


T = TypeVar("T")
# Errors a live broker answers with for a moment (a leader moving, a topic just created);
# an unreachable broker is not retried here: the replay's own timeout already waited.
TRANSIENT = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}


def with_retries(read: Callable[[], T], what: str) -> T:
    """Call ``read``, again a few times while it fails with a transient broker error."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return read()
        except KafkaException as exception:
            error = exception.args[0]
            if attempt == ATTEMPTS or error.code() not in TRANSIENT:
                raise
            log.warning("%s failed (%s); retrying", what, error.str())
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def latest_definitions(settings: Settings, timeout: float = 30.0) -> dict[str, DagParsed]:
    """dag_id -> its latest DagParsed, tombstoned DAGs left out."""
    return with_retries(lambda: _read_latest(settings, timeout), "reading tock.dags")


def _read_latest(settings: Settings, timeout: float) -> dict[str, DagParsed]:
    latest: dict[str, DagParsed] = {}
    for record in replay(settings, DAGS, client_id="tock-dags-replay", timeout=timeout):
        if record.event is None:
            latest.pop(record.key, None)
        elif isinstance(record.event, DagParsed):
            latest[record.event.dag_id] = record.event
    return latest


def known_dags(settings: Settings) -> core.ProcessorState:
    """The processor's starting state, so unchanged DAGs are not re-published after a restart
    and DAGs whose files vanished while it was down are removed."""
    return core.recovered_state(latest_definitions(settings).items())
