"""What the DAG processor knows at start-up: the latest definitions in the compacted ``tock.dags``."""

from __future__ import annotations

from infra.log import replay
from infra.settings import Settings
from schemas import DAGS, DagParsed
from services.dag_processor import core


def latest_definitions(settings: Settings, timeout: float = 30.0) -> dict[str, DagParsed]:
    """dag_id -> its latest DagParsed, tombstoned DAGs left out.

    ``replay`` itself waits out a leader moving or a topic just created (up to ``timeout``)."""
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
