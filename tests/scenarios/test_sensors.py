"""Sensors through the real system (issue 24): 200 sensors waiting at once hold no worker slot and no
process (counted: the local executor's launcher has no child while they wait, and the log has no try
in flight), then all fire; and a file sensor waiting across a restart of every service (the scheduler
killed with -9, the projector and the monitor stopped) fires once the file appears, each poke a try of
its own, run once."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from schemas import DagRunFinished, TaskPoked, TaskQueued, TaskRescheduled, TaskStarted, TaskSucceeded
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    kill_hard,
    start_with_dags,
    trigger,
    wait_until,
)

pytestmark = pytest.mark.scenario

MANY = 200

MANY_SENSORS = '''
from tock import DAG, FileSensor, task

with DAG("sensing_many") as dag:
    waits = [FileSensor(task_id=f"wait_{{number}}", filepath={flag!r}, poke_interval={interval}, timeout=900)
             for number in range({count})]

    @task
    def after():
        return "all there"

    waits >> after()
'''

ONE_SENSOR = '''
from tock import DAG, FileSensor, task

with DAG("sensing_restart") as dag:
    @task
    def report():
        return open({flag!r}).read()

    FileSensor(task_id="wait", filepath={flag!r}, poke_interval=4, timeout=900) >> report()
'''


def _in_flight(tail: LogTail, run_id: str) -> set[tuple[str, int]]:
    """The tries of the run queued and not yet ended, as the log says."""
    ended = (TaskPoked, TaskSucceeded)
    queued = {(event.task_id, event.try_number) for event in tail.of_type(TaskQueued, run_id=run_id)}
    return queued - {(event.task_id, event.try_number) for event in tail.events
                     if isinstance(event, ended) and event.run_id == run_id}


def _launcher(scheduler: psutil.Process) -> psutil.Process:
    [launcher] = [child for child in scheduler.children() if "services.runner.launcher" in " ".join(child.cmdline())]
    return launcher


def _held(launcher: psutil.Process) -> list[psutil.Process]:
    """The launcher's descendants that tries hold: not the launcher of the DAG file (services/runner/
    file_launchers.py), a direct child in the launcher's own session that holds the file, no try (each
    runner leads a session of its own)."""
    held = []
    for process in launcher.children(recursive=True):
        try:
            if not (process.ppid() == launcher.pid and os.getsid(process.pid) != process.pid):
                held.append(process)
        except (psutil.NoSuchProcess, ProcessLookupError):
            pass
    return held


def test_two_hundred_waiting_sensors_hold_no_slot_and_no_process(make_settings, system, tmp_path):
    flag = tmp_path / "go"
    interval = 90  # long enough that every sensor's first poke is over before any second one is due
    # No warm spare runners (TOCK_WARM_RUNNERS=0): every runner process is one that took tries, so the
    # launcher's descendants but the launcher of the DAG file are exactly the processes the tries hold.
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path,
                                       MANY_SENSORS.format(flag=str(flag), interval=interval, count=MANY),
                                       warm_runners=0)
    scheduler = psutil.Process(processes.scheduler("s1").pid)
    run_id = trigger(settings, "sensing_many")
    tail.wait_for(lambda _events: len(tail.of_type(TaskRescheduled, run_id=run_id)) >= MANY
                  and not _in_flight(tail, run_id), 240, "every sensor's first poke to be over")
    launcher = _launcher(scheduler)
    started = time.monotonic()
    wait_until(lambda: not _held(launcher), 60, "the runners of the first pokes to exit")
    settled = time.monotonic() - started
    assert not tail.of_type(TaskStarted, run_id=run_id, try_number=2)  # no second poke yet: all are waiting
    assert {event.task_id for event in tail.of_type(TaskRescheduled, run_id=run_id)} \
        == {f"wait_{number}" for number in range(MANY)}
    print(f"\n{MANY} sensors waiting: 0 runner processes (the last exited {settled:.1f} s after the last poke "
          f"was decided), 0 tries in flight; Tock's processes: the scheduler and its launcher "
          f"({1 + len(scheduler.children(recursive=True))})")
    for _ in range(20):  # and it stays so while they wait
        assert _held(launcher) == [] and not _in_flight(tail, run_id)
        tail.wait_for(lambda _events: True, 1, "")
        time.sleep(0.25)
    flag.write_text("go")
    assert tail.run_finished(run_id, interval + 300).state == "success"
    succeeded = Counter(event.task_id for event in tail.of_type(TaskSucceeded, run_id=run_id))
    assert succeeded == {**{f"wait_{number}": 1 for number in range(MANY)}, "after": 1}


def test_a_file_sensor_fires_after_every_service_restarts(make_settings, system, tmp_path):
    flag = tmp_path / "arrived"
    settings, processes, tail = start_with_dags(make_settings, system, tmp_path, ONE_SENSOR.format(flag=str(flag)),
                                       scheduler_session_timeout=6)
    first = processes.scheduler("s1")
    others = [processes.start("projector", name="projector"), processes.start("monitor", name="monitor")]
    run_id = trigger(settings, "sensing_restart")
    # Stop everything right after a poke was decided not met: the sensor waits on the log's timer only.
    tail.wait_for(lambda _events: tail.of_type(TaskRescheduled, run_id=run_id, task_id="wait"), 120,
                  "the sensor's first poke to be rescheduled")
    kill_hard(first.pid)
    for process in others:
        process.terminate()
    for process in [first, *others]:
        process.wait(30)
    pokes_before = len(tail.of_type(TaskPoked, run_id=run_id, task_id="wait"))
    flag.write_text("it came")
    time.sleep(0.5)  # nothing runs now: no service is up to see the file
    assert not tail.of_type(TaskSucceeded, run_id=run_id, task_id="wait")
    processes.scheduler("s2")
    processes.start("projector", name="projector-2")
    processes.start("monitor", name="monitor-2")
    finished = tail.run_finished(run_id, 180)
    assert finished.state == "success"
    [met] = tail.of_type(TaskSucceeded, run_id=run_id, task_id="wait")
    poke_tries = [event.try_number for event in tail.of_type(TaskPoked, run_id=run_id, task_id="wait")]
    assert pokes_before >= 1 and poke_tries == list(range(1, len(poke_tries) + 1))  # one try per poke, in order
    assert met.try_number == len(poke_tries) + 1
    started = Counter(event.try_number for event in tail.of_type(TaskStarted, run_id=run_id, task_id="wait"))
    assert set(started.values()) == {1}  # each poke ran once
    assert len(tail.of_type(DagRunFinished, run_id=run_id)) == 1
