"""The asset watcher's shell: Kafka topics of users' as asset events, exactly once per record.

* The watched topics come from the DAG definitions (tock.dags, read again every ``REFRESH`` seconds):
  each asset a schedule names with ``watchers`` (tock/watchers.py).
* Watchers share one consumer group (``<prefix>tock-asset-watcher``) on those topics, read_committed, so
  each of their partitions has one reader at a time.
* Each batch of records becomes asset events (``AssetEventRecorded`` on the assets' partitions of
  tock.events, core/watching.py), written in one Kafka transaction with the batch's consumed offsets and
  the group's metadata (KIP-447): either both the events and the offsets commit, or neither does and the
  batch is read again. A watcher that lost the partitions in a rebalance cannot commit. So a record is
  one event, however many watchers are killed, restarted or frozen.
* The transactional id is the watcher's name (``--name``, default "0"): a watcher restarted under its
  name aborts what its previous life left open at once, rather than waiting for the broker's
  transaction timeout to release the next reader of those partitions.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from infra.log import EventReader, Fenced, RawMessage, TransactionAborted, TransactionalSession, replay
from infra.settings import Settings
from schemas import DAGS, DagDefinition, DagParsed
from services.asset_watcher.core.watching import Watched, WatchTable, asset_events, watch_table

log = logging.getLogger("tock.asset_watcher")

REFRESH = 10.0  # seconds between reads of the DAG definitions (new or changed watchers)
BATCH = 500     # records per transaction at most
POLL = 0.5      # seconds a poll waits for the first record
GROUP = "tock-asset-watcher"


class WatchError(RuntimeError):
    """A watcher's apply function cannot be imported: its topics wait (nothing is consumed) until it can."""


class AssetWatcherService:
    """Reads the watched topics and writes their asset events, until :meth:`stop`."""

    def __init__(self, settings: Settings, name: str = "0") -> None:
        self.settings, self.name = settings, name
        self._stopping = threading.Event()
        self._table: WatchTable = {}
        self._functions: dict[str, Callable[..., Any]] = {}
        self._reader: EventReader | None = None
        # A watcher silent for its session timeout loses its partitions, and its open transaction is
        # aborted as soon: the next reader of those partitions waits no longer than that.
        self._timeout_ms = int(settings.asset_watcher_session_timeout * 1000)
        self._session = TransactionalSession(settings, f"{settings.topic_prefix}tock-asset-watcher-{name}",
                                             client_id=f"tock-asset-watcher-{name}",
                                             config={"transaction.timeout.ms": self._timeout_ms})
        self.written = 0  # events committed by this instance

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        """Watch until stopped; raises Fenced if another watcher took this one's name."""
        refreshed = 0.0
        try:
            while not self._stopping.is_set():
                if time.monotonic() - refreshed >= REFRESH:
                    self._refresh()
                    refreshed = time.monotonic()
                if self._reader is None:
                    self._stopping.wait(POLL)
                    continue
                self._turn(self._reader)
        finally:
            self._close_reader()
            self._session.close()

    def _turn(self, reader: EventReader) -> None:
        # Only records of partitions still ours: one revoked while they were fetched is the next owner's
        # to read, and its records' events go with no offset of ours.
        fetched = reader.poll_raw(POLL, BATCH)
        assigned = {(part.topic, part.partition) for part in reader.consumer.assignment()}
        messages = [message for message in fetched if (message.topic, message.partition) in assigned]
        if not messages:
            return
        starts: dict[tuple[str, int], int] = {}
        offsets: dict[tuple[str, int], int] = {}
        for message in messages:  # the batch's own offsets: each partition's next after its last record
            starts.setdefault((message.topic, message.partition), message.offset)
            offsets[(message.topic, message.partition)] = message.offset + 1
        try:
            events = asset_events(self._table, messages, self._accepts, time.time())
            self._session.commit(events, reader, offsets)
        except (TransactionAborted, WatchError) as failed:
            log.warning("%d record(s) not committed (%s); reading them again", len(messages), failed)
            reader.rewind(starts)
            self._stopping.wait(1.0)
            return
        except Fenced:
            raise
        self.written += len(events)
        log.info("%d record(s) of %s: %d asset event(s)", len(messages),
                 ", ".join(sorted({message.topic for message in messages})), len(events))

    def _refresh(self) -> None:
        table = watch_table(_definitions(self.settings))
        if table == self._table and (self._reader is not None or not table):
            return
        topics = sorted(table)
        log.info("watching %s", ", ".join(f"{topic} ({', '.join(item.uri for item in table[topic])})"
                                          for topic in topics) or "no topic")
        changed = sorted(self._table) != topics
        self._table = table
        if changed or self._reader is None:
            self._close_reader()
            if topics:
                self._reader = EventReader(self.settings, topics, group_id=f"{self.settings.topic_prefix}{GROUP}",
                                           client_id=f"tock-asset-watcher-{self.name}", foreign=True,
                                           config={"session.timeout.ms": self._timeout_ms})

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _accepts(self, watched: Watched, message: RawMessage) -> tuple[bool, Any]:
        """Whether the record is an event of the asset: always, or as its apply function says (a function
        that raises on a record says no, logged: one bad record never stops the watcher)."""
        if not watched.apply_function:
            return True, None
        function = self._function(watched.apply_function)
        try:
            result = function(_Message(message))
        except Exception as error:  # noqa: BLE001 - user code: logged, the record is not an event
            log.error("%s(%s[%d]@%d) raised %s: %s; not an event", watched.apply_function, message.topic,
                      message.partition, message.offset, type(error).__name__, error)
            return False, None
        return bool(result), result

    def _function(self, path: str) -> Callable[..., Any]:
        found = self._functions.get(path)
        if found is not None:
            return found
        module_name, _dot, attribute = path.rpartition(".")
        folder = str(self.settings.resolved_dags_folder())
        if folder not in sys.path:
            sys.path.insert(0, folder)  # as Airflow's triggerer: DAG-folder modules import
        try:
            function = getattr(importlib.import_module(module_name), attribute)
        except Exception as error:  # noqa: BLE001 - any import failure: the topic waits, saying why
            raise WatchError(f"apply_function {path!r} cannot be imported: {type(error).__name__}: {error}") from None
        if not callable(function):
            raise WatchError(f"apply_function {path!r} is not callable")
        self._functions[path] = function
        return function


class _Message:
    """A record as an apply function sees it (confluent-kafka's ``Message`` methods)."""

    def __init__(self, message: RawMessage) -> None:
        self._message = message

    def value(self) -> bytes | None:
        return self._message.value

    def key(self) -> bytes | None:
        return self._message.key

    def topic(self) -> str:
        return self._message.topic

    def partition(self) -> int:
        return self._message.partition

    def offset(self) -> int:
        return self._message.offset

    def timestamp(self) -> tuple[int, int]:
        return 1, int(self._message.timestamp * 1000)


def _definitions(settings: Settings) -> list[DagDefinition]:
    """The DAG definitions now in tock.dags (the newest of each DAG; a deleted DAG's tombstone removes it)."""
    newest: dict[str, DagDefinition] = {}
    for record in replay(settings, DAGS, client_id="tock-asset-watcher-dags"):
        if record.key is None:
            continue
        if isinstance(record.event, DagParsed):
            newest[record.key] = record.event.definition
        elif record.event is None:
            newest.pop(record.key, None)
    return list(newest.values())
