"""Whole-process helpers for the scheduler scenarios: start services as real processes, publish
DAG definitions, read the log, wait for conditions, kill for real."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient

from infra.log import EventReader, LogRecord
from infra.settings import Settings
from infra.topics import ensure_topics
from schemas import EVENTS, DagDefinition, DagParsed, DagRunFinished, TriggerDagRun
from services.scheduler.core import manual_run_id
from tests.ports import free_port as free_port
from tests.shared_log import shared_event_log
from tock import fingerprint, load_dags

REPO = Path(__file__).resolve().parents[2]


def environment(settings: Settings) -> dict[str, str]:
    """The TOCK_* variables that reproduce ``settings`` in a child process."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOCK_")}
    for name, value in settings.model_dump().items():
        if value is not None:
            env[f"TOCK_{name.upper()}"] = str(value)
    return env


def create_topics(settings: Settings) -> None:
    """Create the test's topics, and open its shared producer now: it gets its producer id while
    the test starts its services, not when the test first appends."""
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap}), settings.topic_prefix, settings.partitions)
    shared_event_log(settings)


class Processes:
    """Services started as real processes; every one left is killed at the end of the test."""

    def __init__(self, settings: Settings, logs: Path, extra_env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.logs = logs
        self.extra_env = extra_env or {}  # beside the settings (e.g. TOCK_CONN_* for the secrets chain)
        self.started: list[subprocess.Popen] = []

    def start(self, *command: str, name: str) -> subprocess.Popen:
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as output:
            process = subprocess.Popen([sys.executable, "-m", "tock_cli", *command],
                                       env={**environment(self.settings), **self.extra_env},
                                       stdout=output, stderr=subprocess.STDOUT, cwd=REPO)
        self.started.append(process)
        return process

    def scheduler(self, scheduler_id: str) -> subprocess.Popen:
        return self.start("scheduler", "--id", scheduler_id, name=f"scheduler-{scheduler_id}")

    def log_of(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def start_with_dags(make_settings: Callable[..., Settings], parts: dict, tmp_path: Path, text: str,
                    **overrides) -> tuple[Settings, Processes, LogTail]:
    """A test's settings (half-second task heartbeats, ``overrides``), its topics, its Processes and LogTail
    (kept in ``parts`` for the test's fixture to close), and the DAG file ``text`` published."""
    settings = make_settings(task_heartbeat_seconds=0.5, **overrides)
    create_topics(settings)
    parts["processes"], parts["tail"] = Processes(settings, tmp_path / "logs"), LogTail(settings)
    path = tmp_path / "dags" / "dags.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    publish_dags(settings, path)
    return settings, parts["processes"], parts["tail"]


def publish_dags(settings: Settings, path: Path,
                 adjusted: Callable[[DagDefinition], DagDefinition] = lambda definition: definition) -> list[str]:
    """Publish the DAGs of a file as the DAG processor would (DagParsed on tock.dags), each definition
    ``adjusted`` first (a test's deployment choice, such as the executor its tasks run on)."""
    ids, event_log = [], shared_event_log(settings)
    for dag in load_dags(path):
        definition = adjusted(dag.to_definition(str(path)))
        event_log.append(DagParsed(dag_id=dag.dag_id, file_path=str(path), fingerprint=fingerprint(definition),
                                   definition=definition, at=time.time()))
        ids.append(dag.dag_id)
    event_log.flush()
    return ids


def wait_until_published(settings: Settings, dag_id: str, timeout: float = 60.0) -> None:
    """Wait for the DAG processor to publish ``dag_id`` (a trigger before that is refused)."""
    from services.scheduler.trigger import dag_is_published

    deadline = time.monotonic() + timeout
    while not dag_is_published(settings, dag_id):
        if time.monotonic() > deadline:
            raise AssertionError(f"the DAG processor did not publish {dag_id} within {timeout:g} s")
        time.sleep(0.2)


def trigger(settings: Settings, dag_id: str, logical_date: float | None = None) -> str:
    """Append a manual run's TriggerDagRun (``logical_date``: the run's; None: when the scheduler takes it)."""
    request_id = uuid.uuid4().hex
    event_log = shared_event_log(settings)
    event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, requested_by="test",
                                   logical_date=logical_date, at=time.time()))
    event_log.flush()
    return manual_run_id(request_id)


class LogTail:
    """Every committed event of tock.events, read as it arrives (all partitions, from the start).

    ``records`` keeps the records too (offset, record timestamp), for tests that ask where or
    when an event was appended."""

    def __init__(self, settings: Settings) -> None:
        self.reader = EventReader(settings, [], client_id="test-tail")
        self.reader.assign([(EVENTS, partition, 0) for partition in range(settings.partitions)])
        self.events: list = []
        self.records: list[LogRecord] = []

    def wait_for(self, condition: Callable[[list], object], timeout: float, what: str):
        """Read until ``condition(events)`` is truthy; fails naming ``what`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            found = condition(self.events)
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; log: "
                                     + ", ".join(_brief(event) for event in self.events[-40:]))
            fresh = [record for record in self.reader.poll(0.2) if record.event is not None]
            self.records += fresh
            self.events += [record.event for record in fresh]

    def of_type(self, kind: type, **fields) -> list:
        return [event for event in self.events if isinstance(event, kind)
                and all(getattr(event, name) == value for name, value in fields.items())]

    def record_of(self, event) -> LogRecord:
        """The record ``event`` was read from."""
        return next(record for record in self.records if record.event is event)

    def run_finished(self, run_id: str, timeout: float) -> DagRunFinished:
        return self.wait_for(lambda _events: next(iter(self.of_type(DagRunFinished, run_id=run_id)), None),
                             timeout, f"run {run_id} to finish")

    def close(self) -> None:
        self.reader.close()


def _brief(event) -> str:
    task = getattr(event, "task_id", "")
    return f"{type(event).__name__}({task}#{getattr(event, 'try_number', '')})" if task else type(event).__name__


def wait_until(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.05):
    """Poll ``condition`` until it returns something truthy (returned); fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(interval)
    return found


def kill_hard(pid: int) -> None:
    """kill -9, for real."""
    os.kill(pid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
