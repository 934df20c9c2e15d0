"""Airflow's task callbacks through a real monitor (issue 23): functions defined in a DAG file (named in
its DagParsed by the file's path) are called in a child process that loads the file again, with the
context the log holds, once per trigger owed — execute, retry, failure, the DAG's failure — each
ending with its CallbackCalled; a call that fails is retried as the DAG's own callbacks are.

The monitor runs in this process (to stop it at the end); the runs' events are appended by the test,
as a scheduler and a runner would append them."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time

import pytest

from schemas import (
    CallbackCalled,
    DagRunCreated,
    DagRunFinished,
    TaskFailed,
    TaskQueued,
    TaskRetryScheduled,
    TaskStarted,
)
from services.monitor.shell import Monitor
from tests.scenarios.scheduler_support import LogTail, create_topics, publish_dags
from tests.shared_log import shared_event_log

DAG_FILE = '''
import json, os, pathlib

from alerts_beside import OUT  # a helper module next to the DAG file
from tock import DAG, BashTask

def record(context):
    ti = context["ti"]
    with OUT.open("a") as out:
        out.write(json.dumps({"trigger": context["trigger"], "task_id": ti.task_id, "try_number": ti.try_number,
                              "state": ti.state, "ds": context["ds"], "exception": context.get("exception"),
                              "conf": context["dag_run"].conf, "params": context["params"],
                              "pid": os.getpid()}) + "\\n")

def run_failed(context):
    marker = OUT.with_suffix(".first")
    if not marker.exists():
        marker.write_text("")
        raise RuntimeError("the pager is down")
    with OUT.open("a") as out:
        out.write(json.dumps({"trigger": "dag " + context["trigger"], "state": context["dag_run"].state,
                              "run_id": context["dag_run"].run_id, "logical_date": context["logical_date"].isoformat()})
                  + "\\n")

with DAG("called", retries=1, on_failure_callback=run_failed,
         default_args={"on_failure_callback": record, "on_retry_callback": record}) as dag:
    BashTask("work", "exit 1", on_execute_callback=[record])
'''

IDS = {"dag_id": "called", "task_id": "work"}


@pytest.fixture
def dag_file(tmp_path):
    out = tmp_path / "calls.jsonl"
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "alerts_beside.py").write_text(f"import pathlib\nOUT = pathlib.Path({str(out)!r})\n")
    path = folder / "called.py"
    path.write_text(textwrap.dedent(DAG_FILE))
    return path, out


def a_failing_run(run_id: str, start: float) -> list:
    """What a scheduler and a runner append for a run whose only task fails twice (retries=1)."""
    run = {**IDS, "run_id": run_id}
    context = {"run_type": "manual", "logical_date": start, "conf_json": '{"source": "test"}',
               "params_json": '{"rows": 3}'}
    events = [DagRunCreated(dag_id="called", run_id=run_id, logical_date=start, run_type="manual",
                            conf_json='{"source": "test"}', dag_fingerprint="fp", scheduler_id="s", at=start)]
    for number in (1, 2):
        at = start + 10 * number
        events += [TaskQueued(**run, try_number=number, executor="local", queue="default", scheduler_id="s",
                              **context, at=at),
                   TaskStarted(**run, try_number=number, runner_id=f"r{number}", hostname="h", pid=1, at=at + 1),
                   TaskFailed(**run, try_number=number, runner_id=f"r{number}", error=f"exit 1 (try {number})",
                              at=at + 2)]
        if number == 1:
            events.append(TaskRetryScheduled(**run, try_number=1, next_try_number=2, not_before=at + 3, at=at + 2))
    return events + [DagRunFinished(dag_id="called", run_id=run_id, state="failed", at=start + 30)]


def test_a_real_monitor_calls_the_dag_files_functions_with_the_context_and_records_each_call(make_settings,
                                                                                             dag_file):
    path, out = dag_file
    settings = make_settings(monitor_session_timeout=6, monitor_callback_timeout=20)
    create_topics(settings)
    publish_dags(settings, path)
    monitor = Monitor(settings, monitor_id="m1")
    thread = threading.Thread(target=monitor.run, name="monitor-m1", daemon=True)
    thread.start()
    tail = LogTail(settings)
    try:
        log = shared_event_log(settings)
        for event in a_failing_run("manual__1", time.time()):
            log.append(event)
        log.flush()
        calls = tail.wait_for(lambda _events: len(tail.of_type(CallbackCalled)) >= 5 and tail.of_type(CallbackCalled),
                              90, "five CallbackCalled")
        assert sorted((call.trigger, call.task_id, call.try_number, call.target, call.ok, call.attempts)
                      for call in calls) == [
            ("execute", "work", 1, f"{path}:record", True, 1), ("execute", "work", 2, f"{path}:record", True, 1),
            ("failure", "", 0, f"{path}:run_failed", True, 2), ("failure", "work", 2, f"{path}:record", True, 1),
            ("retry", "work", 1, f"{path}:record", True, 1)]
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        task_calls = sorted((line["trigger"], line["try_number"], line["state"], line["exception"])
                            for line in lines if "task_id" in line)
        assert task_calls == [("execute", 1, "running", None), ("execute", 2, "running", None),
                              ("failure", 2, "failed", "exit 1 (try 2)"),
                              ("retry", 1, "up_for_retry", "exit 1 (try 1)")]
        assert all(line["conf"] == {"source": "test"} and line["params"] == {"rows": 3} and len(line["ds"]) == 10
                   and line["pid"] != os.getpid() for line in lines if "task_id" in line)  # never in the monitor
        (run_call,) = [line for line in lines if "task_id" not in line]
        assert (run_call["trigger"], run_call["state"], run_call["run_id"]) == ("dag failure", "failed", "manual__1")
        time.sleep(2)  # settled by the log: nothing more is called
        assert len(tail.of_type(CallbackCalled)) == 5 and monitor.callbacks_called == {"ok": 5, "failed": 0}
    finally:
        monitor.stop()
        thread.join(60)
        tail.close()
    assert not thread.is_alive(), "the monitor did not stop"
