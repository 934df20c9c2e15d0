"""ExternalTaskSensor in the scheduler's core (issue 24): given these events on the sensor's partition
and on the awaited DAG's, these decisions. The sensor runs no try: it is deferred, the awaited side
answers when what it awaits is done, and the answer, a timeout or a clear end the wait, each once."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from schemas import (
    ClearTask,
    DagDefinition,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    ExternalTaskReported,
    ExternalWaitAccepted,
    ExternalWaitAnswered,
    ExternalWaitCancelled,
    ExternalWaitDefinition,
    ExternalWaitRequested,
    MarkTask,
    SensorDefinition,
    SensorTimedOut,
    TaskCleared,
    TaskDeferred,
    TaskDefinition,
    TaskQueued,
    TaskRetryScheduled,
    TaskSkipped,
)
from services.scheduler.core import SchedulerState, decide, fold
from services.scheduler.core.model import DEFERRED
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from tests.unit.scheduler_fixtures import POLICY, RUN, failed, parsed, ran

HOUR = 3600.0
DAY = 86_400.0


def sensor_dag(wait: ExternalWaitDefinition, *, timeout: float = DAY, soft_fail: bool = False,
               retries: int = 0) -> DagParsed:
    tasks = [TaskDefinition(task_id="wait", kind="external_sensor", retries=retries, retry_delay=0.0, external=wait,
                            sensor=SensorDefinition(timeout=timeout, soft_fail=soft_fail)),
             TaskDefinition(task_id="report", kind="bash", command="true", upstream=["wait"])]
    definition = DagDefinition(dag_id="report", file_path="/dags/report.py", tasks=tasks)
    return DagParsed(dag_id="report", file_path=definition.file_path, fingerprint="fp-report", definition=definition,
                     at=0.0)


def sensor_run(logical_date: float = 2 * DAY, run_id: str = "scheduled__r") -> DagRunCreated:
    return DagRunCreated(dag_id="report", run_id=run_id, logical_date=logical_date, run_type="scheduled",
                         dag_fingerprint="fp-report", scheduler_id="sched-a", at=10.0)


def awaited_run(logical_date: float = 2 * DAY - HOUR) -> DagRunCreated:
    return DagRunCreated(dag_id="etl", run_id=RUN, logical_date=logical_date, run_type="scheduled",
                         dag_fingerprint="fp", scheduler_id="sched-a", at=11.0)


def waiting_on(task_ids: tuple[str, ...] = ("a",), **more: Any) -> ExternalWaitDefinition:
    return ExternalWaitDefinition(external_dag_id="etl", task_ids=list(task_ids), delta=HOUR, **more)


class Two:
    """Two partitions: the sensor's and the awaited DAG's, each its own fold; a decision crosses to the
    partition its DAG is on, as the scheduler's shell writes it."""

    def __init__(self, sensor: DagParsed, *awaited: Any) -> None:
        self.sensor = fold(SchedulerState(), [sensor, sensor_run()])
        self.awaited = fold(SchedulerState(), [parsed("etl", {"a": [], "b": ["a"]}), *awaited])

    def turn(self, side: str, now: float, touched: Any = None) -> list[Any]:
        state = self.sensor if side == "sensor" else self.awaited
        decided = decide(state, now, POLICY, touched)
        for event in decided:
            fold(self.sensor if event.dag_id == "report" else self.awaited, [event])
        return decided

    def give(self, *events: Any) -> None:
        fold(self.awaited, events)


def kinds(events: list[Any]) -> list[str]:
    """The names of the waits' events among ``events`` (the awaited DAG's own runs go on beside them)."""
    return [type(event).__name__ for event in events if isinstance(event, _OF_WAITS)]


_OF_WAITS = (ExternalWaitRequested, TaskDeferred, ExternalTaskReported, ExternalWaitAccepted, ExternalWaitAnswered,
             ExternalWaitCancelled, SensorTimedOut, TaskCleared)


def sensor_state(two: Two) -> str:
    key = ("report", "scheduled__r")
    run = two.sensor.runs.get(key) or two.sensor.finished[key]
    return run.tasks["wait"].state


def of(kind: type, events: list[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def test_the_sensor_runs_no_try_it_is_deferred_with_a_wait_on_the_awaited_dags_partition():
    two = Two(sensor_dag(waiting_on(), timeout=600.0))
    decided = two.turn("sensor", 20.0)
    assert kinds(decided) == ["ExternalWaitRequested", "TaskDeferred"]
    request, deferral = decided
    assert (request.dag_id, request.logical_date, request.task_ids, request.allowed_states) == (
        "etl", 2 * DAY - HOUR, ["a"], ["success"])
    assert (request.sensor_dag_id, request.sensor_task_id, request.sensor_try_number) == ("report", "wait", 1)
    assert (deferral.try_number, deferral.until, deferral.wait_id) == (1, 620.0, request.wait_id)
    assert sensor_state(two) == DEFERRED
    assert of(TaskQueued, two.turn("sensor", 30.0)) == []  # deferred: nothing more until an answer


def test_the_awaited_side_accepts_a_wait_not_met_then_answers_once_the_task_succeeds():
    two = Two(sensor_dag(waiting_on()))
    two.turn("sensor", 20.0)
    assert kinds(two.turn("awaited", 21.0)) == ["ExternalWaitAccepted"]
    assert two.turn("awaited", 22.0, touched=[]) == []  # read once: nothing of its DAG changed
    two.give(awaited_run(), *ran("a"))
    answer = [event for event in two.turn("awaited", 23.0, touched=[("etl", RUN)])
              if isinstance(event, ExternalTaskReported | ExternalWaitAnswered)]
    assert kinds(answer) == ["ExternalTaskReported", "ExternalWaitAnswered"]
    report = answer[0]
    assert (report.dag_id, report.run_id, report.task_id, report.outcome, report.states, report.external_run_id) == (
        "report", "scheduled__r", "wait", "success", {"a": "success"}, RUN)
    assert two.awaited.external_waits == {}
    assert sensor_state(two) == "success"
    assert [event.task_id for event in of(TaskQueued, two.turn("sensor", 24.0))] == ["report"]


def test_a_wait_for_a_run_already_finished_is_answered_at_once():
    two = Two(sensor_dag(ExternalWaitDefinition(external_dag_id="etl", delta=HOUR)),
              awaited_run(), *ran("a"), *ran("b"), DagRunFinished(dag_id="etl", run_id=RUN, state="success", at=9.0))
    two.turn("sensor", 20.0)
    [report] = of(ExternalTaskReported, two.turn("awaited", 21.0, touched=[]))
    assert (report.outcome, report.states) == ("success", {"": "success"})


def test_another_logical_date_does_not_answer_the_wait():
    two = Two(sensor_dag(waiting_on()), awaited_run(logical_date=2 * DAY), *ran("a"))  # delta: it awaits 2 DAY - HOUR
    two.turn("sensor", 20.0)
    assert kinds(two.turn("awaited", 21.0)) == ["ExternalWaitAccepted"]


def test_failed_states_fail_the_sensor_and_its_retry_waits_again_with_a_new_wait():
    two = Two(sensor_dag(waiting_on(failed_states=["failed"]), retries=1), awaited_run())
    two.turn("sensor", 20.0)
    two.give(*ran("a")[:3], failed("a"))
    [report] = of(ExternalTaskReported, two.turn("awaited", 21.0))
    assert report.outcome == "failed" and "a of 'etl'" in report.reason
    [retry] = of(TaskRetryScheduled, two.turn("sensor", 22.0))
    decided = two.turn("sensor", 23.0)
    assert kinds(decided) == ["ExternalWaitRequested", "TaskDeferred"]
    assert decided[1].try_number == 2 and decided[0].wait_id != report.wait_id and retry.next_try_number == 2


def test_without_failed_states_a_failure_keeps_it_waiting_as_airflows_does():
    two = Two(sensor_dag(waiting_on()), awaited_run())
    two.turn("sensor", 20.0)
    two.give(*ran("a")[:3], failed("a"))
    assert kinds(two.turn("awaited", 21.0)) == ["ExternalWaitAccepted"]


def test_skipped_states_skip_the_sensor_and_what_follows_it():
    two = Two(sensor_dag(waiting_on(allowed_states=["success"], skipped_states=["skipped"])), awaited_run(),
              TaskSkipped(dag_id="etl", run_id=RUN, task_id="a", reason="branch", at=5.0))
    two.turn("sensor", 20.0)
    [report] = of(ExternalTaskReported, two.turn("awaited", 21.0))
    assert report.outcome == "skipped"
    assert [event.task_id for event in of(TaskSkipped, two.turn("sensor", 22.0))] == ["report"]


def test_the_timeout_ends_the_sensor_cancels_the_wait_and_a_late_answer_changes_nothing():
    two = Two(sensor_dag(waiting_on(), timeout=600.0, soft_fail=True), awaited_run())
    two.turn("sensor", 20.0)
    two.turn("awaited", 21.0)
    assert two.turn("sensor", 619.0, touched=[]) == []
    decided = two.turn("sensor", 620.0, touched=[])  # the deferral's own timer walks its run
    assert kinds(decided)[:2] == ["SensorTimedOut", "ExternalWaitCancelled"]
    assert decided[0].state == "skipped" and two.awaited.external_waits == {}
    late = ExternalTaskReported(dag_id="report", run_id="scheduled__r", task_id="wait", try_number=1,
                                wait_id="x", external_dag_id="etl", outcome="success", reason="late", states={},
                                at=700.0)
    fold(two.sensor, [late])
    assert sensor_state(two) == "skipped"


def test_check_existence_fails_a_wait_on_a_dag_or_task_that_does_not_exist():
    missing_dag = Two(sensor_dag(ExternalWaitDefinition(external_dag_id="nope", check_existence=True)))
    missing_dag.turn("sensor", 20.0)
    [report] = of(ExternalTaskReported, decide(missing_dag.awaited, 21.0, POLICY, None))
    assert report.outcome == "failed" and "'nope' does not exist" in report.reason
    missing_task = Two(sensor_dag(waiting_on(("a", "zzz"), check_existence=True)))
    missing_task.turn("sensor", 20.0)
    [report] = of(ExternalTaskReported, missing_task.turn("awaited", 21.0))
    assert report.outcome == "failed" and "zzz do not exist" in report.reason


def test_a_task_group_is_waited_on_through_all_its_tasks():
    grouped = DagParsed(dag_id="etl", file_path="/dags/etl.py", fingerprint="fp-g", at=0.0, definition=DagDefinition(
        dag_id="etl", file_path="/dags/etl.py", tasks=[
            TaskDefinition(task_id="load.a", kind="bash", command="true", task_group="load"),
            TaskDefinition(task_id="load.inner.b", kind="bash", command="true", task_group="load.inner"),
            TaskDefinition(task_id="other", kind="bash", command="true")]))
    two = Two(sensor_dag(ExternalWaitDefinition(external_dag_id="etl", task_group_id="load", delta=HOUR)))
    two.give(grouped, awaited_run(), *[_in_etl(event, "load.a") for event in ran("a")])
    two.turn("sensor", 20.0)
    assert kinds(two.turn("awaited", 21.0)) == ["ExternalWaitAccepted"]
    two.give(*[_in_etl(event, "load.inner.b") for event in ran("a")])
    [report] = of(ExternalTaskReported, two.turn("awaited", 22.0, touched=[("etl", RUN)]))
    assert report.states == {"load.a": "success", "load.inner.b": "success"}


def test_a_cleared_deferred_sensor_cancels_its_wait_and_waits_anew():
    two = Two(sensor_dag(waiting_on()))
    two.turn("sensor", 20.0)
    two.turn("awaited", 21.0)
    fold(two.sensor, [ClearTask(dag_id="report", run_id="scheduled__r", task_id="wait", request_id="c1", at=30.0)])
    decided = two.turn("sensor", 31.0)
    assert kinds(decided) == ["ExternalWaitCancelled", "TaskCleared", "ExternalWaitRequested", "TaskDeferred"]
    assert of(TaskCleared, decided)[0].try_number == 1 and of(TaskDeferred, decided)[0].try_number == 2
    [waiting] = two.awaited.external_waits.values()
    assert waiting.sensor_try_number == 2


def test_an_answer_folded_twice_ends_the_sensor_once():
    two = Two(sensor_dag(waiting_on()), awaited_run(), *ran("a"))
    two.turn("sensor", 20.0)
    [report] = of(ExternalTaskReported, two.turn("awaited", 21.0))
    fold(two.sensor, [report])  # a replay of the same record
    assert sensor_state(two) == "success"
    assert [event.task_id for event in of(TaskQueued, two.turn("sensor", 22.0))] == ["report"]


def test_both_sides_decide_the_same_after_a_snapshot():
    two = Two(sensor_dag(waiting_on(), timeout=600.0), awaited_run())
    two.turn("sensor", 20.0)
    for side in ("sensor", "awaited"):
        state = getattr(two, side)
        restored = decode_snapshot(encode_snapshot(Snapshot(0, state, {}))).state
        assert restored.external_waits == state.external_waits and restored.fresh_waits == state.fresh_waits
        assert decide(restored, 620.0, POLICY) == decide(state, 620.0, POLICY)
    assert of(SensorTimedOut, decide(two.sensor, 620.0, POLICY))
    assert of(ExternalWaitAccepted, decide(two.awaited, 21.0, POLICY))


def test_the_wait_and_the_deferral_carry_what_the_definition_says():
    two = Two(sensor_dag(waiting_on(("a", "b"), allowed_states=["success", "skipped"], failed_states=["failed"],
                                    check_existence=True)))
    [request] = of(ExternalWaitRequested, two.turn("sensor", 20.0))
    assert (request.task_ids, request.allowed_states, request.failed_states, request.skipped_states,
            request.check_existence) == (["a", "b"], ["success", "skipped"], ["failed"], [], True)
    assert of(ExternalWaitCancelled, two.turn("sensor", 21.0)) == []
    assert of(ExternalWaitAnswered, two.turn("awaited", 22.0)) == []


def _in_etl(event: Any, task_id: str) -> Any:
    return replace(event, task_id=task_id)


# -- TriggerDagRunOperator(wait_for_completion=True): the wait follows the try's success --------------

def kicker_dag(retries: int = 0) -> DagParsed:
    wait = ExternalWaitDefinition(external_dag_id="etl", failed_states=["failed"], after_success=True)
    tasks = [TaskDefinition(task_id="wait", kind="python", command="", retries=retries, retry_delay=0.0,
                            external=wait),
             TaskDefinition(task_id="report", kind="bash", command="true", upstream=["wait"])]
    definition = DagDefinition(dag_id="report", file_path="/dags/report.py", tasks=tasks)
    return DagParsed(dag_id="report", file_path=definition.file_path, fingerprint="fp-kick", definition=definition,
                     at=0.0)


def kicked(two: Two, try_number: int = 1) -> None:
    """The trigger's try ran and succeeded, pushing the run it triggered (as tock/trigger_dagrun.py does)."""
    [queued] = of(TaskQueued, two.turn("sensor", 20.0 + try_number))
    pushed = '{"trigger_dag_id": "etl", "trigger_run_id": "manual__kick"}'
    for event in ran("wait", try_number):
        fold(two.sensor, [replace(event, dag_id="report", run_id="scheduled__r")
                          if not hasattr(event, "values_json") else
                          replace(event, dag_id="report", run_id="scheduled__r", values_json=pushed)])
    assert queued.task_id == "wait"


def triggered_run(state: str | None = None) -> list[Any]:
    created = DagRunCreated(dag_id="etl", run_id="manual__kick", logical_date=50.0, run_type="manual",
                            dag_fingerprint="fp", scheduler_id="sched-a", at=30.0)
    return [created] + ([DagRunFinished(dag_id="etl", run_id="manual__kick", state=state, at=40.0)] if state else [])


def test_a_trigger_that_waits_is_deferred_after_its_success_until_the_run_it_triggered_ends():
    two = Two(kicker_dag())
    kicked(two)
    decided = two.turn("sensor", 25.0)
    assert kinds(decided) == ["ExternalWaitRequested", "TaskDeferred"]
    request, deferral = decided
    assert (request.dag_id, request.awaited_run_id, request.allowed_states, request.failed_states) == (
        "etl", "manual__kick", ["success"], ["failed"])
    assert deferral.try_number == 1 and sensor_state(two) == DEFERRED  # the same try: none queued again
    assert kinds(two.turn("awaited", 26.0)) == ["ExternalWaitAccepted"]  # the run is not there yet
    two.give(*triggered_run())
    assert kinds(two.turn("awaited", 31.0, touched=[("etl", "manual__kick")])) == []  # running: not ended
    two.give(*triggered_run("success")[1:])
    [report] = of(ExternalTaskReported, two.turn("awaited", 41.0, touched=[("etl", "manual__kick")]))
    assert (report.outcome, report.external_run_id, report.states) == ("success", "manual__kick", {"": "success"})
    assert sensor_state(two) == "success"
    assert [event.task_id for event in of(TaskQueued, two.turn("sensor", 42.0))] == ["report"]


def test_a_triggered_run_that_failed_fails_the_waiting_trigger_and_its_retry_triggers_and_waits_again():
    two = Two(kicker_dag(retries=1), *triggered_run("failed"))
    kicked(two)
    two.turn("sensor", 25.0)
    [report] = of(ExternalTaskReported, two.turn("awaited", 26.0))
    assert report.outcome == "failed" and "failed states" in report.reason
    [retry] = of(TaskRetryScheduled, two.turn("sensor", 27.0))
    assert retry.next_try_number == 2
    assert [event.try_number for event in of(TaskQueued, two.turn("sensor", 28.0))] == [2]  # a try, not a wait


# -- review mends ------------------------------------------------------------------------------

def test_soft_fail_skips_a_sensor_whose_answer_is_a_failure_as_airflows_does():
    two = Two(sensor_dag(waiting_on(failed_states=["failed"]), soft_fail=True, retries=2), awaited_run())
    two.turn("sensor", 20.0)
    two.give(*ran("a")[:3], failed("a"))
    [report] = of(ExternalTaskReported, two.turn("awaited", 21.0))
    assert report.outcome == "failed" and sensor_state(two) == "skipped"
    assert of(TaskRetryScheduled, two.turn("sensor", 22.0)) == []  # skipped for good, not retried


def test_a_run_that_times_out_skips_its_deferred_sensor_and_cancels_its_wait():
    parsed_sensor = sensor_dag(waiting_on())
    timed = replace(parsed_sensor, definition=replace(parsed_sensor.definition, dagrun_timeout=60.0))
    two = Two(timed)
    two.turn("sensor", 20.0)
    two.turn("awaited", 21.0)
    decided = two.turn("sensor", 200.0)
    assert [event.task_id for event in of(TaskSkipped, decided)] == ["wait", "report"]
    assert [event.dag_id for event in of(ExternalWaitCancelled, decided)] == ["etl"]
    assert two.awaited.external_waits == {} and sensor_state(two) == "skipped"


def test_a_waiting_triggers_deferral_folds_the_same_when_the_definition_is_read_after_the_success():
    """A replay may fold the success before the DAG's definition (tock.dags and tock.events are read in no
    fixed order): the deferral in the log decides, not the definition at fold time."""
    first = Two(kicker_dag())
    kicked(first)
    decided = first.turn("sensor", 25.0)
    replayed = fold(SchedulerState(), [sensor_run()])  # no definition yet
    for event in ran("wait"):
        pushed = '{"trigger_dag_id": "etl", "trigger_run_id": "manual__kick"}'
        fold(replayed, [replace(event, dag_id="report", run_id="scheduled__r",
                                **({"values_json": pushed} if hasattr(event, "values_json") else {}))])
    fold(replayed, [kicker_dag(), *of(TaskDeferred, decided)])
    assert replayed.runs[("report", "scheduled__r")].tasks["wait"].state == DEFERRED
    assert of(ExternalWaitRequested, decide(replayed, 26.0, POLICY)) == []  # not asked twice


def test_a_waiting_trigger_marked_success_is_not_deferred_again():
    two = Two(kicker_dag())
    kicked(two)
    assert of(TaskDeferred, two.turn("sensor", 25.0))
    fold(two.sensor, [MarkTask(dag_id="report", run_id="scheduled__r", task_id="wait", state="success",
                               request_id="m1", at=26.0)])
    decided = two.turn("sensor", 27.0)
    assert sensor_state(two) == "success" and of(ExternalWaitRequested, decided) == []
    assert [event.task_id for event in of(TaskQueued, decided)] == ["report"]
