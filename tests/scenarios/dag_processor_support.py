"""Helpers for the DAG processor scenarios: run `tock dag-processor`, read what it wrote, inspect /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.log import replay
from infra.settings import Settings
from schemas import PARSING, DagFileProcessed, DagParseFailed, ProcessorFinished, ProcessorKilled, ProcessorStarted
from services.dag_processor.recovery import latest_definitions
from tests.scenarios.scheduler_support import environment  # noqa: F401 - re-exported for the scenarios

TOCK = Path(sys.executable).with_name("tock")
# Settings under which a file is parsed once per content within a test's time.
NO_REPARSE = {"dag_reparse_interval": 3600, "parse_retry_backoff": 3600}


def good_dag_source(dag_id: str, tasks: int = 2) -> str:
    lines = ["from tock import DAG, BashTask", f"with DAG({dag_id!r}, schedule='@hourly'):"]
    lines += [f"    BashTask('t{n}', 'echo {n}')" for n in range(tasks)]
    return "\n".join(lines) + "\n"


def write_file(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


class ProcessorProcess:
    """`tock dag-processor` as a real process; its log goes to a file beside the DAGs."""

    def __init__(self, settings: Settings, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([str(TOCK), "dag-processor"], env=environment(settings),
                                        stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Signal the processor and return its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def parsing_events(settings: Settings) -> list[Any]:
    return [record.event for record in replay(settings, PARSING) if record.event is not None]


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def of_file(events: list[Any], path: Path, *kinds: type) -> list[Any]:
    return [event for event in events
            if getattr(event, "file_path", None) == str(path) and (not kinds or isinstance(event, kinds))]


def outcomes(events: list[Any], path: Path) -> list[Any]:
    return of_file(events, path, DagFileProcessed, DagParseFailed)


def check_one_parse(events: list[Any], path: Path) -> tuple[Any, Any]:
    """The file was parsed once: one start, one end, one outcome, all of the same processor."""
    [start] = of_file(events, path, ProcessorStarted)
    [end] = of_file(events, path, ProcessorFinished, ProcessorKilled)
    [outcome] = outcomes(events, path)
    assert end.processor_id == outcome.processor_id == start.processor_id
    return end, outcome


def process_state(pid: int) -> str | None:
    """The state letter of a process (R, S, Z, ...), or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[0]


def children_of(pid: int) -> dict[int, str]:
    """pid -> state letter of every process whose parent is ``pid`` (from /proc)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found[int(entry)] = fields[0]
    return found


def zombies_of(pid: int) -> list[int]:
    return [child for child, state in children_of(pid).items() if state == "Z"]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def dags_published(settings: Settings, *dag_ids: str) -> Callable[[], Any]:
    """A check for ``wait_for``: every one of ``dag_ids`` has a definition in ``tock.dags``."""
    def check():
        latest = latest_definitions(settings)
        return latest if all(dag_id in latest for dag_id in dag_ids) else None
    return check


def still_serves_good_files(settings: Settings, folder: Path) -> None:
    """A change to the good file good_a.py is published (after whatever a bad file did)."""
    before = latest_definitions(settings)["good_a"].fingerprint
    source = good_dag_source("good_a", tasks=len(latest_definitions(settings)["good_a"].definition.tasks) + 1)
    write_file(folder, "good_a.py", source)
    wait_for(lambda: latest_definitions(settings)["good_a"].fingerprint != before, 20, "good_a re-published")


def stop_cleanly(processor: ProcessorProcess) -> None:
    """No zombie child, a clean exit on SIGTERM, no child left."""
    wait_for(lambda: not zombies_of(processor.pid), 5, "no zombie children")
    assert processor.stop() == 0, processor.output()[-3000:]
    assert not children_of(processor.pid)
