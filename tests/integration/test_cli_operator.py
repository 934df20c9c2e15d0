"""The operator commands of the CLI against the real broker and a projected SQLite database:
validation (exit 1 unknown, exit 2 bad input), what each appends, and what it prints."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import threading
import time

import pytest
from typer.testing import CliRunner

from infra.log import replay
from schemas import (
    EVENTS,
    BackfillFinished,
    BackfillPlanned,
    CancelBackfill,
    ClearTask,
    CommandRejected,
    DagRunCreated,
    DagRunFinished,
    KillTask,
    MarkTask,
    PauseDag,
    RequestBackfill,
    TaskFailed,
    TaskLogShipped,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TaskUpstreamFailed,
    TriggerDagRun,
)
from services.api.task_logs import log_file
from tests.integration.projection_db import ProjectorThread, log_end, offsets_reached, produce, wait_for
from tests.scenarios.scheduler_support import create_topics, environment
from tests.unit.projection_logs import dag_parsed, example_run
from tock_cli import app, appending

pytestmark = pytest.mark.integration
AT = 1_700_000_000.0
JAN_1, JAN_2 = 1704067200.0, 1704153600.0


def failed_run(run_id: str, logical_date: float) -> list:
    ids = {"dag_id": "etl", "run_id": run_id}
    return [DagRunCreated(**ids, logical_date=logical_date, run_type="scheduled", dag_fingerprint="f",
                          scheduler_id="s1", at=AT + 100),
            TaskQueued(**ids, task_id="extract", try_number=1, executor="local", queue="default", scheduler_id="s1",
                       at=AT + 101),
            TaskFailed(**ids, task_id="extract", try_number=1, runner_id="w", error="boom", at=AT + 102),
            TaskUpstreamFailed(**ids, task_id="transform", at=AT + 103)]


def project(settings, events=()) -> None:
    from projections.db import open_engine

    produce(settings, list(events))
    engine = open_engine(settings)
    try:
        with ProjectorThread(settings):
            wait_for(lambda: offsets_reached(engine, log_end(settings)), what="the projector to catch up")
    finally:
        engine.dispose()


@pytest.fixture
def settings(make_settings, tmp_path):
    settings = make_settings(db_url=f"sqlite:///{tmp_path / 'tock.db'}")
    create_topics(settings)
    project(settings, [*example_run(), *failed_run("scheduled__jan1", JAN_1), *failed_run("scheduled__jan2", JAN_2)])
    return settings


def tock(settings, *args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), env=environment(settings), input=input)


def appended(settings, *types) -> list:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, types)]


@pytest.mark.parametrize(("args", "message"), [
    (["tasks", "clear", "nope", "manual__1", "load"], "no DAG nope"),
    (["tasks", "clear", "etl", "nope", "load"], "no run nope of DAG etl"),
    (["tasks", "clear", "etl", "manual__1", "nope"], "DAG etl has no task nope"),
    (["tasks", "mark", "etl", "nope", "load", "--state", "success"], "no run nope"),
    (["tasks", "kill", "etl", "manual__1", "load"], "task load has no try to kill (its state is success)"),
    (["runs", "clear", "etl", "nope"], "no run nope of DAG etl"),
    (["dags", "pause", "nope"], "no DAG nope"),
    (["dags", "backfill", "nope", "--start-date", "2024-01-01", "--end-date", "2024-01-02"], "no DAG nope"),
    (["dags", "backfill-cancel", "etl", "nope"], "no backfill nope of DAG etl"),
    (["tasks", "logs", "etl", "manual__1", "nope"], "no task nope in DAG etl"),
    (["tasks", "logs", "etl", "manual__1", "load"], "no log of try 1 of load in tock.logs, nor on this host"),
    (["commands", "show", "nope"], "no command with request id nope"),
])
def test_unknown_or_impossible_targets_exit_1_with_a_message(settings, args, message):
    result = tock(settings, *args)
    assert result.exit_code == 1, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert appended(settings, ClearTask, MarkTask, KillTask, PauseDag, RequestBackfill) == []


@pytest.mark.parametrize(("args", "message"), [
    (["tasks", "clear", "etl"], "give DAG RUN TASK, or --state"),
    (["tasks", "clear", "etl", "manual__1", "load", "--start-date", "2024-01-01"], "give DAG RUN TASK"),
    (["tasks", "clear", "etl", "--state", "failed", "--start-date", "yesterday"], "not an ISO 8601 date"),
    (["tasks", "mark", "etl", "manual__1", "load", "--state", "great"], "'great' is not one of"),
    (["tasks", "clear", "etl", "manual__1", "load", "--request-id", "a b"], "bad request id 'a b'"),
    (["dags", "backfill", "etl", "--start-date", "2024-01-02", "--end-date", "2024-01-01"],
     "--end-date (2024-01-01T00:00:00+00:00) is before --start-date"),
    (["dags", "backfill", "etl", "--start-date", "2024-02-30", "--end-date", "2024-03-01"], "not an ISO 8601"),
    (["dags", "backfill", "etl", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--conf", "[1]"],
     "--conf must be a JSON object"),
])
def test_bad_input_exits_2(settings, args, message):
    result = tock(settings, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_clear_one_task_instance(settings):
    result = tock(settings, "tasks", "clear", "etl", "manual__1", "transform", "--downstream",
                  "--request-id", "fix-1")
    assert result.exit_code == 0, result.output
    assert "clearing transform in etl / manual__1: request id fix-1" in result.stdout
    clear, = appended(settings, ClearTask)
    assert (clear.task_id, clear.request_id, clear.downstream, clear.upstream, clear.requested_by) == (
        "transform", "fix-1", True, False, "cli")


def test_clear_by_state_lists_asks_and_clears_each_instance_once(settings):
    refused = tock(settings, "tasks", "clear", "etl", "--state", "failed", input="n\n")
    assert refused.exit_code == 1 and "etl / scheduled__jan1 / extract" in refused.stdout
    assert appended(settings, ClearTask) == []
    args = ["tasks", "clear", "etl", "--state", "failed", "--start-date", "2024-01-02", "--request-id", "night"]
    for _ in range(2):  # the same --request-id again: the same derived request ids
        result = tock(settings, *args, "--yes")
        assert result.exit_code == 0, result.output
        assert "cleared etl / scheduled__jan2 / extract: request id night." in result.stdout
        assert "jan1" not in result.stdout
    clears = appended(settings, ClearTask)
    assert [c.run_id for c in clears] == ["scheduled__jan2"] * 2 and clears[0].request_id == clears[1].request_id
    upstream_failed = tock(settings, "tasks", "clear", "etl", "--state", "upstream_failed", "--end-date",
                           "2024-01-01T12:00:00+00:00", "--yes")
    assert "cleared etl / scheduled__jan1 / transform" in upstream_failed.stdout
    nothing = tock(settings, "tasks", "clear", "etl", "--state", "killed", "--yes")
    assert (nothing.exit_code, nothing.stdout.strip()) == (0, "nothing to clear: no task instance of DAG etl is killed")


def test_clear_a_whole_run_mark_and_kill(settings):
    assert tock(settings, "runs", "clear", "etl", "manual__1", "--request-id", "r").exit_code == 0
    assert tock(settings, "tasks", "mark", "etl", "manual__1", "load", "--state", "skipped").exit_code == 0
    ids = {"dag_id": "etl", "run_id": "manual__1", "task_id": "load", "try_number": 2}
    project(settings, [TaskQueued(**ids, executor="local", queue="default", scheduler_id="s1", at=AT + 200),
                       TaskStarted(**ids, runner_id="w", hostname="h", pid=1, at=AT + 201)])
    killed = tock(settings, "tasks", "kill", "etl", "manual__1", "load", "--request-id", "k")
    assert killed.exit_code == 0 and "killing load in etl / manual__1: request id k" in killed.stdout
    clear, = appended(settings, ClearTask)
    mark, = appended(settings, MarkTask)
    kill, = appended(settings, KillTask)
    assert (clear.task_id, clear.request_id, mark.state, kill.request_id) == ("", "r", "skipped", "k")


def test_pause_and_unpause(settings):
    assert tock(settings, "dags", "pause", "etl").stdout.strip() == "pausing etl"
    assert tock(settings, "dags", "unpause", "etl").exit_code == 0
    assert [event.paused for event in appended(settings, PauseDag)] == [True, False]


def test_a_backfill_prints_its_id_and_a_dag_without_schedule_is_refused(settings):
    result = tock(settings, "dags", "backfill", "etl", "--start-date", "2024-01-01", "--end-date",
                  "2024-01-01T03:00:00Z", "--reprocess-failed", "--request-id", "bf")
    assert (result.exit_code, result.stdout.strip()) == (0, "bf")
    request, = appended(settings, RequestBackfill)
    assert (request.start_date, request.end_date, request.reprocess_failed) == (JAN_1, JAN_1 + 3 * 3600, True)
    manual = dataclasses.replace(dag_parsed("manual", AT), definition=dataclasses.replace(
        dag_parsed("manual", AT).definition, schedule=None))
    project(settings, [manual])
    refused = tock(settings, "dags", "backfill", "manual", "--start-date", "2024-01-01", "--end-date", "2024-01-02")
    assert refused.exit_code == 1 and "DAG manual has no schedule intervals" in refused.stderr


def test_commands_show(settings):
    tock(settings, "tasks", "clear", "etl", "manual__1", "load", "--request-id", "c1")
    project(settings, [CommandRejected(dag_id="etl", request_id="c1", command="ClearTask", reason="not today",
                                       scheduler_id="s1", at=AT)])
    shown = tock(settings, "commands", "show", "c1")
    assert shown.exit_code == 0, shown.output
    assert "status:       rejected" in shown.stdout and "reason:       not today" in shown.stdout


def test_trigger_takes_a_request_id(settings):
    result = tock(settings, "dags", "trigger", "etl", "--request-id", "nightly-2024-01-01")
    assert (result.exit_code, result.stdout.strip()) == (0, "manual__nightly-2024-01-01")
    trigger, = appended(settings, TriggerDagRun)
    assert trigger.request_id == "nightly-2024-01-01"


def test_a_failed_delivery_is_retried_with_the_same_request_id(settings, make_settings, monkeypatch):
    monkeypatch.setattr(appending, "ACK_TIMEOUT", 1.0)
    unreachable = make_settings(db_url=settings.db_url, kafka_bootstrap="127.0.0.1:9")
    result = tock(unreachable, "tasks", "clear", "etl", "manual__1", "load", "--request-id", "again")
    assert result.exit_code == 1
    assert result.stderr.count("retrying with the same request id") == 2
    assert "after 3 attempts" in result.stderr and "run it again with --request-id again" in result.stderr


def test_logs_of_a_try_whole_and_followed(settings):
    # tries with nothing in tock.logs: their files on this host
    path = log_file(settings.home, "etl", "manual__1", "transform", 1)
    path.parent.mkdir(parents=True)
    path.write_text("first try\n")
    log_file(settings.home, "etl", "manual__1", "transform", 2).write_text("second try\n")
    assert tock(settings, "tasks", "logs", "etl", "manual__1", "transform").stdout == "second try\n"
    assert tock(settings, "tasks", "logs", "etl", "manual__1", "transform", "--try", "1").stdout == "first try\n"
    # a try running elsewhere: its lines come from tock.logs as they are shipped
    ids = {"dag_id": "etl", "run_id": "manual__1", "task_id": "load", "try_number": 2}
    project(settings, [TaskQueued(**ids, executor="local", queue="default", scheduler_id="s1", at=AT + 200),
                       TaskStarted(**ids, runner_id="w", hostname="h", pid=1, at=AT + 201)])
    shipped = [TaskLogShipped(**ids, runner_id="w", offset=0, text="step 1\n", at=time.time())]
    produce(settings, shipped)

    def the_try_goes_on():
        time.sleep(1.5)
        produce(settings, [TaskLogShipped(**ids, runner_id="w", offset=7, text="step 2\n", at=time.time()),
                           shipped[0]])  # a chunk delivered twice prints once
        time.sleep(1)
        project(settings, [TaskSucceeded(**ids, runner_id="w", at=AT + 209)])

    writer = threading.Thread(target=the_try_goes_on)
    writer.start()
    followed = tock(settings, "tasks", "logs", "etl", "manual__1", "load", "--follow")
    writer.join()
    assert (followed.exit_code, followed.stdout) == (0, "step 1\nstep 2\n")


class Tock:
    """``tock`` as a child process whose stderr lines are collected as they come."""

    def __init__(self, settings, *args: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "tock_cli", *args], env=environment(settings),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stderr), daemon=True)
        self.reader.start()

    def wait_for_line(self, text: str) -> None:
        wait_for(lambda: any(text in line for line in self.lines), timeout=60, what=f"{text!r} in {self.lines}")

    def finish(self) -> tuple[int, str]:
        stdout = self.process.stdout.read()  # not communicate(): the reader owns stderr
        self.process.wait(60)
        self.reader.join(10)
        return self.process.returncode, stdout


def test_backfill_wait_shows_progress_until_it_ends(settings):
    ids = {"dag_id": "etl"}
    second = JAN_1 + 3600
    runs = [f"backfill__{iso}" for iso in ("2024-01-01T00:00:00+00:00", "2024-01-01T01:00:00+00:00")]
    with ProjectorThread(settings):
        tock_process = Tock(settings, "dags", "backfill", "etl", "--start-date", "2024-01-01", "--end-date",
                            "2024-01-01T01:00:00Z", "--wait", "--request-id", "bw")
        tock_process.wait_for_line("waiting for the scheduler to plan the backfill")
        produce(settings, [BackfillPlanned(**ids, backfill_id="bw", logical_dates=[JAN_1, second], scheduler_id="s1",
                                           at=AT + 300), _created(runs[0], JAN_1, AT + 301)])
        tock_process.wait_for_line("created 1 / finished 0 of 2")
        produce(settings, [DagRunFinished(**ids, run_id=runs[0], state="success", at=AT + 302),
                           _created(runs[1], second, AT + 303)])
        tock_process.wait_for_line("created 2 / finished 1 of 2")
        produce(settings, [DagRunFinished(**ids, run_id=runs[1], state="failed", at=AT + 304),
                           BackfillFinished(**ids, backfill_id="bw", state="failed", at=AT + 305)])
        code, stdout = tock_process.finish()
    assert (code, stdout) == (1, "bw\nbackfill bw: failed\n"), tock_process.lines


def _created(run_id: str, logical_date: float, at: float) -> DagRunCreated:
    return DagRunCreated(dag_id="etl", run_id=run_id, logical_date=logical_date, run_type="backfill",
                         dag_fingerprint="f", scheduler_id="s1", at=at)


def test_ctrl_c_while_waiting_cancels_the_backfill(settings):
    with ProjectorThread(settings):
        tock_process = Tock(settings, "dags", "backfill", "etl", "--start-date", "2024-01-01", "--end-date",
                            "2024-01-02", "--wait", "--request-id", "bc")
        tock_process.wait_for_line("waiting for the scheduler to plan the backfill")
        tock_process.process.send_signal(signal.SIGINT)
        code, stdout = tock_process.finish()
    assert (code, stdout) == (130, "bc\n")
    assert any("interrupted: cancelled backfill bc" in line for line in tock_process.lines)
    cancel, = appended(settings, CancelBackfill)
    assert (cancel.dag_id, cancel.backfill_id, cancel.requested_by) == ("etl", "bc", "cli")
