"""The soak's steady load and its eyes on the log.

``Recorder`` tails tock.events, tock.heartbeats and tock.schedulers (every partition, from the
start) in a thread of its own for the whole soak. Heartbeats must be caught as they come:
tock.heartbeats is compacted by task instance (tock.schedulers by scheduler), so the history the
deadline check (and the report of takeovers) needs would not survive in the topic. ``Load``
triggers the DAGs in turn through `tock dags trigger` and now and then clears a task of a run
through `tock tasks clear`, each with a request id of its own, so a failed call
(the broker or the database restarting) is retried with the same id and applied once.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

from infra.log import EventReader, LogRecord
from infra.settings import Settings
from schemas import (
    EVENTS,
    HEARTBEATS,
    SCHEDULERS,
    DagRunCreated,
    SchedulerHeartbeat,
    TaskDeclaredDead,
    TaskFailed,
    TaskHeartbeat,
    TaskKilled,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from tests.soak.backing import tock
from tests.soak.checks import try_key

ENDED = (TaskSucceeded, TaskFailed, TaskDeclaredDead, TaskKilled)


class Recorder(threading.Thread):
    """Every record of tock.events, tock.heartbeats and tock.schedulers read so far (a thread of its own)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(name="soak-recorder", daemon=True)
        self.reader = EventReader(settings, [], client_id="soak-recorder")
        self.reader.assign([(topic, partition, 0) for topic in (EVENTS, HEARTBEATS, SCHEDULERS)
                            for partition in range(settings.partitions)])
        self._lock = threading.Lock()
        self._events: list[LogRecord] = []
        self._beats: list[LogRecord] = []
        self._schedulers: list[SchedulerHeartbeat] = []
        self._stopping = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    records = self.reader.poll(0.5)
                except Exception as error:  # noqa: BLE001 - a read error is noted and the tail goes on
                    self.errors.append(f"{type(error).__name__}: {error}")
                    continue
                with self._lock:
                    for record in records:
                        if isinstance(record.event, SchedulerHeartbeat):
                            self._schedulers.append(record.event)
                        elif record.topic.endswith(SCHEDULERS):
                            continue  # a SchedulerStopped or a tombstone
                        else:
                            target = self._beats if isinstance(record.event, TaskHeartbeat) else self._events
                            target.append(record)
        finally:
            self.reader.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(60)

    def events(self) -> list[object]:
        with self._lock:
            return [record.event for record in self._events if record.event is not None]

    def heartbeat_records(self) -> list[LogRecord]:
        with self._lock:
            return list(self._beats)

    def scheduler_heartbeats(self) -> list[SchedulerHeartbeat]:
        with self._lock:
            return list(self._schedulers)

    def busy_runners(self) -> dict[int, str]:
        """Runners that started a try the log has seen no end of yet: pid -> the try's executor."""
        started: dict[tuple, TaskStarted] = {}
        for event in self.events():
            if isinstance(event, TaskStarted):
                started[try_key(event)] = event
            elif isinstance(event, ENDED):
                started.pop(try_key(event), None)
        return {event.pid: event.executor or "?" for event in started.values()}

    def runs(self) -> list[tuple[str, str]]:
        return [(event.dag_id, event.run_id) for event in self.events() if isinstance(event, DagRunCreated)]

    def task_ids_of(self, dag_id: str, run_id: str) -> list[str]:
        return sorted({event.task_id for event in self.events()
                       if isinstance(event, TaskQueued) and (event.dag_id, event.run_id) == (dag_id, run_id)})


@dataclass(eq=False)
class Load(threading.Thread):
    """Triggers a DAG every ``trigger_every`` s (in turn) and clears a task every ``clear_every`` s."""

    settings: Settings
    recorder: Recorder
    dag_ids: list[str]
    rng: random.Random
    trigger_every: float = 5.0
    clear_every: float = 15.0
    acknowledged: set[str] = field(default_factory=set)  # trigger request ids the CLI confirmed
    unconfirmed: dict[str, str] = field(default_factory=dict)  # request id -> DAG, to try again
    outcomes: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, name="soak-load", daemon=True)
        self._stopping = threading.Event()

    def run(self) -> None:
        turn, next_clear = 0, time.monotonic() + self.clear_every
        while not self._stopping.wait(self.trigger_every):
            self.trigger(self.dag_ids[turn % len(self.dag_ids)])
            turn += 1
            if time.monotonic() >= next_clear:
                self.clear_one()
                next_clear = time.monotonic() + self.clear_every

    def stop(self) -> None:
        self._stopping.set()
        self.join(300)

    def trigger(self, dag_id: str, request_id: str | None = None) -> bool:
        """`tock dags trigger`; a failure is tried again (same request id) on the next turns."""
        for old_id, old_dag in list(self.unconfirmed.items())[:2]:
            self._trigger_once(old_dag, old_id)
        return self._trigger_once(dag_id, request_id or f"soak{uuid.UUID(int=self.rng.getrandbits(128)).hex}")

    def _trigger_once(self, dag_id: str, request_id: str) -> bool:
        result = tock(self.settings, "dags", "trigger", dag_id, "--request-id", request_id, timeout=90)
        if result.returncode == 0:
            self.acknowledged.add(request_id)
            self.unconfirmed.pop(request_id, None)
            self.outcomes["trigger ok"] += 1
            return True
        self.unconfirmed[request_id] = dag_id
        self.outcomes[f"trigger failed (exit {result.returncode})"] += 1
        return False

    def clear_one(self) -> None:
        """`tock tasks clear` of one task of a random run the log has (running or finished)."""
        runs = self.recorder.runs()
        if not runs:
            return
        dag_id, run_id = self.rng.choice(runs)
        tasks = self.recorder.task_ids_of(dag_id, run_id)
        if not tasks:
            return
        task_id = self.rng.choice(tasks)
        request_id = f"soakclear{uuid.UUID(int=self.rng.getrandbits(128)).hex}"
        result = tock(self.settings, "tasks", "clear", dag_id, run_id, task_id, "--yes", "--request-id", request_id,
                      timeout=90)
        self.outcomes["clear ok" if result.returncode == 0 else f"clear refused (exit {result.returncode})"] += 1

    def final_triggers(self, attempts: int = 5) -> None:
        """One last run of every DAG, and every unconfirmed trigger again: in each DAG's partition they
        come after every command the load appended, so once their runs exist every earlier command
        was folded (a clear that reopened a run shows as a run that has to end again)."""
        for dag_id in self.dag_ids:
            request_id = f"soakfinal{uuid.UUID(int=self.rng.getrandbits(128)).hex}"
            for _attempt in range(attempts):
                if self._trigger_once(dag_id, request_id):
                    break
        for request_id, dag_id in list(self.unconfirmed.items()):
            for _attempt in range(attempts):
                if self._trigger_once(dag_id, request_id):
                    break
