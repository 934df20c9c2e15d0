"""Scenarios of issue 14: `tock monitor` writes exactly one DeadlineMissed per run that passes its
DAG's deadline — with one monitor, when monitors are `kill -9`'d and restarted around the
deadline, and with two monitors — and its windowed durations match the events' timestamps.

A real scheduler, real runners and real monitors against the real broker. A DAG with
``deadline=5`` whose task sleeps 20 s must miss; one whose run ends in ~1 s must not.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from infra.log import partition_for, replay
from schemas import (
    EVENTS,
    CallbackCalled,
    DagRunCreated,
    DagRunFinished,
    DeadlineMissed,
    TaskDeadlineMissed,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from tests.scenarios.scheduler_support import (
    LogTail,
    Processes,
    create_topics,
    free_port,
    kill_hard,
    publish_dags,
    trigger,
    wait_until,
)

pytestmark = pytest.mark.scenario

DAG_FILE = '''
from tock import DAG, BashTask

with DAG("late", deadline=5) as late:
    BashTask("slow", "sleep 20")

with DAG("late_c", deadline=5) as late_c:
    BashTask("slow", "sleep 10")

with DAG("tardy", deadline=5) as tardy:
    BashTask("slow", "sleep 10")

with DAG("quick", deadline=30) as quick:
    BashTask("fast", "sleep 0.5")

with DAG("unwatched", deadline=1) as unwatched:
    BashTask("short", "sleep 2")

with DAG("task_late") as task_late:
    BashTask("fast", "sleep 0.5", deadline=30) >> BashTask("slow", "sleep 8", deadline=3)
'''



def by_its_timer(tail: LogTail, miss, run_id: str, task_id: str) -> bool:
    """Whether the miss was written when its deadline passed, by the monitor's timer: not before it, and while
    the late task still ran (its success was not in the log yet when the miss was read; a monitor that noticed
    only the run's end would write it after). Each late task sleeps 5 s or more past its deadline."""
    return miss.deadline <= miss.at and tail.of_type(TaskSucceeded, run_id=run_id, task_id=task_id) == []


@pytest.fixture
def system(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5, scheduler_session_timeout=6, monitor_session_timeout=6)
    create_topics(settings)
    (tmp_path / "dags").mkdir()
    path = tmp_path / "dags" / "monitored.py"
    path.write_text(DAG_FILE)
    publish_dags(settings, path)
    processes = Processes(settings, tmp_path / "logs")
    tail = LogTail(settings)
    processes.scheduler("s1")
    try:
        yield settings, processes, tail
    finally:
        processes.close()
        tail.close()


def start_monitor(processes: Processes, name: str) -> tuple[object, str]:
    port = free_port()
    settings = processes.settings.model_copy(update={"monitor_port": port})
    process = Processes(settings, processes.logs).start("monitor", "--id", name, name=f"monitor-{name}")
    processes.started.append(process)
    return process, f"http://127.0.0.1:{port}"


def view(base: str, table: str) -> dict | None:
    try:
        return httpx.get(f"{base}/{table}", timeout=2).json()
    except httpx.HTTPError:
        return None


def misses_of(tail: LogTail, run_id: str) -> list[DeadlineMissed]:
    return tail.of_type(DeadlineMissed, run_id=run_id)


def created_at(tail: LogTail, run_id: str) -> float:
    return tail.wait_for(lambda _events: next(iter(tail.of_type(DagRunCreated, run_id=run_id)), None), 30,
                         f"run {run_id} to be created").at


def owns_all(base: str, partitions: int, missed: list[list[str]] = ()) -> bool:
    """The monitor at ``base`` owns every partition and has folded these misses."""
    health, deadlines = view(base, "health"), view(base, "deadlines")
    return (health is not None and deadlines is not None and health["partitions"] == list(range(partitions))
            and all(run in deadlines["missed"] for run in missed))


def test_one_miss_about_the_deadline_after_the_run_started_and_durations_from_timestamps(system):
    settings, processes, tail = system
    _monitor, base = start_monitor(processes, "m1")
    late, quick = trigger(settings, "late"), trigger(settings, "quick")
    start = created_at(tail, late)
    miss = tail.wait_for(lambda _events: misses_of(tail, late), 30, "the late run's DeadlineMissed")[0]
    assert miss.deadline == pytest.approx(start + 5)
    assert by_its_timer(tail, miss, late, "slow")
    # The quick run ended in time: its durations are in the windows, as the events say.
    finished = tail.run_finished(quick, 30)
    quick_started = created_at(tail, quick)
    task_started = tail.of_type(TaskStarted, run_id=quick)[0]
    task_succeeded = tail.of_type(TaskSucceeded, run_id=quick)[0]
    wait_until(lambda: (view(base, "stats?measure=run_duration") or {}).get("rows"), 10, "the run duration table")
    runs = [row for row in view(base, "stats?measure=run_duration")["rows"]
            if row["key"] == ["quick"] and row["window"] == "tumbling"]
    assert [row["sum"] for row in runs] == [pytest.approx(finished.at - quick_started)]
    assert runs[0]["start"] <= finished.at < runs[0]["end"] and runs[0]["end"] - runs[0]["start"] == 300
    tasks = [row for row in view(base, "stats?measure=task_duration")["rows"] if row["key"] == ["quick", "fast"]]
    assert {row["window"] for row in tasks} == {"tumbling", "hopping"} and len(tasks) == 1 + 5
    assert [row["sum"] for row in tasks] == [pytest.approx(task_succeeded.at - task_started.at)] * 6
    latency = view(base, "stats?measure=queue_latency")["rows"]
    assert [row for row in latency if row["key"] == ["local", "default"] and row["count"] >= 2]
    # Once folded (its own decision), never written again; the quick run never misses.
    wait_until(lambda: ["late", late] in (view(base, "deadlines") or {}).get("missed", []), 10, "the miss folded")
    assert view(base, "deadlines")["written_by_this_instance"] == 1
    assert len(misses_of(tail, late)) == 1 and not misses_of(tail, quick)
    metrics = scraped(base)
    assert metrics["tock_monitor_deadline_misses_written_total"] == 1
    assert metrics["tock_monitor_partitions_owned"] == settings.partitions
    assert metrics["tock_monitor_open_runs_with_deadline"] == 1  # the late run goes on


def scraped(base: str) -> dict[str, float]:
    """The monitor's /metrics, parsed by the Prometheus client's own parser (labels dropped)."""
    text = httpx.get(f"{base}/metrics", timeout=5).text
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples}


def test_one_task_miss_about_its_deadline_after_the_task_was_first_queued(system):
    settings, processes, tail = system
    _monitor, base = start_monitor(processes, "m1")
    run = trigger(settings, "task_late")
    first = tail.wait_for(lambda _events: tail.of_type(TaskDeadlineMissed, run_id=run), 30, "the task's miss")[0]
    assert by_its_timer(tail, first, run, "slow")
    tail.run_finished(run, 40)
    queued = tail.of_type(TaskQueued, run_id=run, task_id="slow")[0]
    (miss,) = tail.of_type(TaskDeadlineMissed, run_id=run)  # the fast task ended in time: only slow missed
    assert (miss.dag_id, miss.task_id, miss.deadline) == ("task_late", "slow", pytest.approx(queued.at + 3))
    assert misses_of(tail, run) == []  # the run declares no deadline of its own
    wait_until(lambda: ["task_late", run, "slow"] in (view(base, "deadlines") or {}).get("tasks_missed", []), 10,
               "the monitor's /deadlines to list the task miss")


def test_exactly_one_miss_when_monitors_are_killed_and_restarted_around_the_deadline(system):
    settings, processes, tail = system
    first, base = start_monitor(processes, "m1")
    wait_until(lambda: owns_all(base, settings.partitions), 30, "the first monitor to own every partition")
    late = trigger(settings, "late")
    start = created_at(tail, late)
    wait_until(lambda: [run for run in (view(base, "deadlines") or {}).get("open", []) if run["run_id"] == late],
               10, "the first monitor to fold the run")
    kill_hard(first.pid)  # before the deadline: the next monitor must write the miss
    first.wait()
    second, base = start_monitor(processes, "m2")
    # The dead member keeps its partitions until the group's session timeout (6 s) ends.
    miss = tail.wait_for(lambda _events: misses_of(tail, late), 30, "the DeadlineMissed after the restart")[0]
    assert miss.deadline == pytest.approx(start + 5)
    wait_until(lambda: owns_all(base, settings.partitions, [["late", late]]), 10, "the second monitor to fold it")
    kill_hard(second.pid)  # after the miss: the next one replays it and must not write another
    second.wait()
    _third, base = start_monitor(processes, "m3")
    wait_until(lambda: owns_all(base, settings.partitions, [["late", late]]), 30,
               "the third monitor to replay every partition")
    assert view(base, "deadlines")["written_by_this_instance"] == 0
    assert len(misses_of(tail, late)) == 1


def test_exactly_one_miss_per_run_with_two_monitors(system):
    settings, processes, tail = system
    first, base_one = start_monitor(processes, "m1")
    _second, base_two = start_monitor(processes, "m2")

    def split() -> bool:
        owned = [(view(base, "health") or {}).get("partitions") for base in (base_one, base_two)]
        return all(owned) and sorted(owned[0] + owned[1]) == list(range(settings.partitions))

    wait_until(split, 30, "the two monitors to share the partitions")
    # late, late_c and tardy are in partitions 2, 1 and 0 of 3: each monitor owns some of them.
    assert {partition_for(dag_id, settings.partitions) for dag_id in ("late", "late_c", "tardy")} == {0, 1, 2}
    runs = [trigger(settings, dag_id) for dag_id in ("late", "late_c", "tardy", "late_c")]
    tail.wait_for(lambda _events: all(misses_of(tail, run) for run in runs), 30, "a DeadlineMissed of every run")
    written = [view(base, "deadlines")["written_by_this_instance"] for base in (base_one, base_two)]
    assert sum(written) == 4 and min(written) >= 1
    # One leaves (SIGTERM: it leaves the group at once): the other replays its partitions, writes nothing.
    first.terminate()
    assert first.wait(20) == 0
    missed = [[event.dag_id, event.run_id] for event in tail.of_type(DeadlineMissed)]
    wait_until(lambda: owns_all(base_two, settings.partitions, missed), 30, "the remaining monitor to own all")
    assert view(base_two, "deadlines")["written_by_this_instance"] == written[1]
    assert sorted(event.run_id for event in tail.of_type(DeadlineMissed)) == sorted(runs)


class Receiver:
    """A local webhook receiver: answers 500 to the first POST on each path, 200 afterwards."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict, int]] = []  # (path, payload, status answered)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status = 200 if any(path == self.path for path, _payload, _status in receiver.calls) else 500
                receiver.calls.append((self.path, payload, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


CALLBACK_DAGS = '''
from tock import DAG, BashTask

with DAG("late", deadline=3, on_deadline_missed="{url}/late") as late:
    BashTask("slow", "sleep 8")

with DAG("broken", on_failure="{url}/broken") as broken:
    BashTask("fails", "exit 1")
'''


def test_callbacks_are_called_once_per_miss_and_failure_retried_after_a_500(make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5, scheduler_session_timeout=6, monitor_session_timeout=6)
    create_topics(settings)
    receiver = Receiver()
    path = tmp_path / "callbacks.py"
    path.write_text(CALLBACK_DAGS.format(url=receiver.url))
    publish_dags(settings, path)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        processes.scheduler("s1")
        first, base = start_monitor(processes, "m1")
        late, broken = trigger(settings, "late"), trigger(settings, "broken")
        calls = tail.wait_for(lambda _events: len(tail.of_type(CallbackCalled)) >= 2 and tail.of_type(CallbackCalled),
                              40, "both callbacks to be called")
        assert sorted((call.dag_id, call.run_id, call.trigger, call.ok, call.attempts) for call in calls) == [
            ("broken", broken, "failure", True, 2), ("late", late, "deadline_missed", True, 2)]
        answered = sorted((path, payload["run_id"], status) for path, payload, status in receiver.calls)
        assert answered == [("/broken", broken, 200), ("/broken", broken, 500), ("/late", late, 200),
                            ("/late", late, 500)]
        missed = misses_of(tail, late)[0]
        assert [payload for path, payload, _status in receiver.calls if path == "/late"][-1]["deadline"] == \
            missed.deadline
        # Settled by the events in the log: a monitor replaying them calls nobody again.
        first.terminate()
        assert first.wait(20) == 0
        _second, base = start_monitor(processes, "m2")
        wait_until(lambda: owns_all(base, settings.partitions, [["late", late]]), 30, "the next monitor to replay")
        assert view(base, "deadlines")["callbacks_owed"] == []
        assert scraped(base)["tock_monitor_callbacks_owed"] == 0
        assert len(receiver.calls) == 4 and len(tail.of_type(CallbackCalled)) == 2
    finally:
        processes.close()
        tail.close()
        receiver.close()


CALLABLE_DAGS = '''
from tock import DAG, BashTask

with DAG("broken_called", on_failure="tock_alerts_{suffix}:notify") as broken:
    BashTask("fails", "exit 1")

with DAG("task_late_called", on_deadline_missed="tock_alerts_{suffix}:noted") as task_late:
    BashTask("slow", "sleep 6", deadline=2)
'''

ALERTS = '''
import json, os, pathlib

def notify(payload):
    out = pathlib.Path({out!r})
    with out.open("a") as calls:
        calls.write(json.dumps(dict(payload, pid=os.getpid())) + "\\n")
    if len(out.read_text().splitlines()) < 2:
        raise RuntimeError("first call fails")

def noted(payload):
    pathlib.Path({out!r} + ".task").write_text(json.dumps(payload))
'''


def test_callable_callbacks_run_in_a_subprocess_retried_and_recorded_also_for_a_task_miss(make_settings, tmp_path,
                                                                                            monkeypatch):
    settings = make_settings(task_heartbeat_seconds=0.5, scheduler_session_timeout=6, monitor_session_timeout=6)
    create_topics(settings)
    suffix, out = tmp_path.name.replace("-", "_"), tmp_path / "calls.jsonl"
    (tmp_path / f"tock_alerts_{suffix}.py").write_text(ALERTS.format(out=str(out)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    path = tmp_path / "called.py"
    path.write_text(CALLABLE_DAGS.format(suffix=suffix))
    publish_dags(settings, path)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        processes.scheduler("s1")
        monitor, _base = start_monitor(processes, "m1")
        run = trigger(settings, "broken_called")
        (call,) = tail.wait_for(lambda _events: tail.of_type(CallbackCalled, run_id=run), 40, "the callback's outcome")
        assert (call.dag_id, call.trigger, call.target, call.ok, call.attempts, call.detail) == (
            "broken_called", "failure", f"tock_alerts_{suffix}:notify", True, 2, "returned")
        calls = [json.loads(line) for line in out.read_text().splitlines()]
        assert [(payload["run_id"], payload["trigger"], payload["state"]) for payload in calls] == [
            (run, "failure", "failed")] * 2
        assert all(payload["pid"] != monitor.pid for payload in calls)  # never in the monitor's own process
        # A task instance's miss calls the DAG's on_deadline_missed, naming the task.
        late = trigger(settings, "task_late_called")
        (call,) = tail.wait_for(lambda _events: tail.of_type(CallbackCalled, run_id=late), 40, "the task miss's call")
        (miss,) = tail.of_type(TaskDeadlineMissed, run_id=late)
        assert (call.trigger, call.task_id, call.ok) == ("deadline_missed", "slow", True)
        assert json.loads((tmp_path / "calls.jsonl.task").read_text()) == {
            "dag_id": "task_late_called", "run_id": late, "task_id": "slow", "trigger": "deadline_missed",
            "at": miss.at, "deadline": miss.deadline}
    finally:
        processes.close()
        tail.close()


CRON_DAGS = '''
from datetime import datetime, timedelta
from tock import DAG, BashTask, Deadline

with DAG("every_minute", schedule="* * * * *", start_date=datetime(2026, 1, 1),
         deadline=Deadline.after_logical_date(timedelta(seconds=2))) as every_minute:
    BashTask("slow", "sleep 8")
'''


def test_a_scheduled_run_misses_its_deadline_counted_from_its_logical_date_a_manual_one_from_its_start(
        make_settings, tmp_path):
    settings = make_settings(task_heartbeat_seconds=0.5, scheduler_session_timeout=6, monitor_session_timeout=6)
    create_topics(settings)
    path = tmp_path / "cron.py"
    path.write_text(CRON_DAGS)
    publish_dags(settings, path)
    processes, tail = Processes(settings, tmp_path / "logs"), LogTail(settings)
    try:
        _monitor, base = start_monitor(processes, "m1")
        wait_until(lambda: owns_all(base, settings.partitions), 30, "the monitor to own every partition")
        processes.scheduler("s1")
        scheduled = tail.wait_for(lambda _events: tail.of_type(DagRunCreated, run_type="scheduled"), 30,
                                  "the first scheduled run")[0]
        miss = tail.wait_for(lambda _events: misses_of(tail, scheduled.run_id), 30, "its DeadlineMissed")[0]
        assert miss.deadline == pytest.approx(scheduled.logical_date + 2)  # the cron fire time + 2 s
        assert miss.at >= scheduled.at and by_its_timer(tail, miss, scheduled.run_id, "slow")
        manual = trigger(settings, "every_minute")
        started = created_at(tail, manual)
        miss = tail.wait_for(lambda _events: misses_of(tail, manual), 30, "the manual run's DeadlineMissed")[0]
        assert miss.deadline == pytest.approx(started + 2)  # a manual run counts from its start
    finally:
        processes.close()
        tail.close()


def test_a_monitor_frozen_inside_its_transaction_then_thawed_writes_no_second_miss(system, tmp_path):
    """Monitor m1 freezes (SIGSTOP, fault injection) after sending its offsets and before committing
    the DeadlineMissed. m2 takes the partition over once m1's session times out, waits out m1's
    open transaction (aborted by the coordinator) and writes the miss. Thawed, m1 cannot commit:
    the group moved on (KIP-447) and its transaction is gone."""
    settings, processes, tail = system
    freeze = tmp_path / "freeze"
    freeze.touch()
    frozen = Processes(settings.model_copy(update={"fault_stop_before_commit": freeze,
                                                   "monitor_port": free_port()}), processes.logs)
    first = frozen.start("monitor", "--id", "m1", name="monitor-m1")
    try:
        wait_until(lambda: "assigned partitions [0, 1, 2]" in frozen.log_of("monitor-m1"), 30, "m1 to own all")
        late = trigger(settings, "late")
        wait_until(lambda: psutil.Process(first.pid).status() == psutil.STATUS_STOPPED, 30,
                   "m1 to freeze inside its transaction")
        _second, base = start_monitor(processes, "m2")
        tail.wait_for(lambda _events: misses_of(tail, late), 40, "m2 to write the miss")
        freeze.unlink()
        os.kill(first.pid, signal.SIGCONT)
        wait_until(lambda: first.poll() is not None or "not committed" in frozen.log_of("monitor-m1")
                   or "revoked" in frozen.log_of("monitor-m1"), 30, "m1 to find it lost the partition")
    finally:
        freeze.unlink(missing_ok=True)
        if first.poll() is None:
            os.kill(first.pid, signal.SIGCONT)
        frozen.close()
    assert "fault injection" in frozen.log_of("monitor-m1")
    assert view(base, "deadlines")["written_by_this_instance"] == 1
    partition = partition_for("late", settings.partitions)
    written = [record.event for record in replay(settings, EVENTS, [partition])
               if isinstance(record.event, DeadlineMissed)]
    assert [event.run_id for event in written] == [late]


def test_a_run_that_ended_past_its_deadline_while_no_monitor_ran_gets_its_miss_late_and_once(system):
    settings, processes, tail = system
    run = trigger(settings, "unwatched")
    finished = tail.run_finished(run, 30)
    start = created_at(tail, run)
    assert finished.at > start + 1 and not misses_of(tail, run)
    _first, base = start_monitor(processes, "m1")
    miss = tail.wait_for(lambda _events: misses_of(tail, run), 30, "the late DeadlineMissed")[0]
    assert miss.deadline == pytest.approx(start + 1) and miss.at > finished.at
    wait_until(lambda: owns_all(base, settings.partitions, [["unwatched", run]]), 10, "the miss folded")
    processes.close()  # the next monitor replays it: no second one
    _second, base = start_monitor(processes, "m2")
    wait_until(lambda: owns_all(base, settings.partitions, [["unwatched", run]]), 30, "m2 to replay")
    assert view(base, "deadlines")["written_by_this_instance"] == 0 and len(misses_of(tail, run)) == 1
