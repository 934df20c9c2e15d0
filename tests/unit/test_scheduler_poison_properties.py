"""Over the whole input space (Hypothesis): every DAG the authoring API accepts, and every command the
API's request models accept, is folded and decided by the scheduler core without raising, at any
``now``, and without quarantining anything (quarantine is the net for what is left, never the
answer for an input the edge let in)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone

import hypothesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import (
    CancelBackfill,
    ClearTask,
    DagParsed,
    DagQuarantined,
    KillTask,
    MarkTask,
    PauseDag,
    RequestBackfill,
    TaskFailed,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TriggerDagRun,
    decode,
    encode,
)
from schemas import schedule as cron
from services.scheduler.core import Evidence, SchedulerState, decide, evolve, fold
from tests.unit.scheduler_fixtures import POLICY, parsed
from tock import DAG, BashTask, DagDefinitionError, fingerprint
from tock.dag import SCHEDULE_PRESETS

FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# -- DAGs ----------------------------------------------------------------------------------------


def _field(low: int, high: int, extra: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    number = st.integers(low, high).map(str)
    pair = st.tuples(st.integers(low, high), st.integers(low, high)).map(lambda ends: f"{min(ends)}-{max(ends)}")
    return st.one_of(st.just("*"), number, pair,
                     st.integers(1, max(high, 2)).map(lambda step: f"*/{step}"),
                     st.lists(number, min_size=2, max_size=3).map(",".join),
                     st.tuples(pair, st.integers(1, 12)).map(lambda parts: f"{parts[0]}/{parts[1]}"),
                     st.sampled_from(extra) if extra else st.just("*"))


CRON = st.one_of(
    st.tuples(_field(0, 59), _field(0, 23), _field(1, 31, ("L", "29", "30", "31")), _field(1, 12, ("2",)),
              _field(0, 7, ("5#5", "1L", "mon-fri"))).map(" ".join),
    st.tuples(_field(0, 59), _field(0, 23), _field(1, 31), _field(1, 12), _field(0, 6),
              _field(0, 59)).map(" ".join),  # with seconds
    st.sampled_from(["0 0 30 2 *", "0 0 31 4 *", "0 0 29 2 *", "0 0 1 1 * 0 2020", "0 0 1 1 * 0 2999"]),
)
SCHEDULES = st.one_of(st.none(), st.sampled_from(SCHEDULE_PRESETS), CRON)
ZONES = st.one_of(st.none(), st.just(UTC),
                  st.integers(-23, 23).map(lambda hours: timezone(timedelta(hours=hours))))
START_DATES = st.one_of(st.none(), st.dates(), st.datetimes(timezones=ZONES),
                        st.sampled_from([datetime(1, 1, 1), datetime(1, 1, 2), datetime(9999, 12, 30),
                                         datetime(9999, 12, 31), datetime(9999, 6, 1)]))
DURATIONS = st.one_of(st.floats(min_value=0, max_value=1e9), st.floats(), st.integers(-5, 10**6))


@st.composite
def dag_arguments(draw: st.DrawFn) -> dict:
    """Arguments of a DAG and its tasks: mostly valid, sometimes not (the SDK refuses those)."""
    count = draw(st.integers(1, 4))
    upstream = {i: draw(st.sets(st.integers(0, i - 1), max_size=2)) if i else set() for i in range(count)}
    if draw(st.sampled_from([False, False, False, True])):
        upstream[0] = {count - 1}  # a cycle
    return {"schedule": draw(SCHEDULES), "start_date": draw(START_DATES), "catchup": draw(st.booleans()),
            "max_active_runs": draw(st.sampled_from([1, 2, 3, 16, 10**6, 0, -1])),  # 2 in 7 refused
            "retries": draw(st.sampled_from([0, 1, 2, 3, 4, 5, -1])),
            "retry_delay": draw(st.one_of(st.just(0.0), DURATIONS)), "upstream": upstream,
            "task_retries": [draw(st.sampled_from([None, 0, 1, 2, 3, 4, -1])) for _ in range(count)]}


def accepted(arguments: dict) -> DagParsed | None:
    """The DagParsed the DAG processor would publish (as read back from the log), or None if the SDK
    refuses the DAG."""
    try:
        with DAG("drawn", schedule=arguments["schedule"], start_date=arguments["start_date"],
                 catchup=arguments["catchup"], max_active_runs=arguments["max_active_runs"],
                 retries=arguments["retries"], retry_delay=arguments["retry_delay"]) as dag:
            tasks = [BashTask(f"t{i}", "true", retries=retries)
                     for i, retries in enumerate(arguments["task_retries"])]
            for i, ups in arguments["upstream"].items():
                for up in ups:
                    tasks[up] >> tasks[i]  # noqa: B015
        definition = dag.to_definition("/dags/drawn.py")
    except DagDefinitionError:
        return None
    event = DagParsed(dag_id="drawn", file_path="/dags/drawn.py", fingerprint=fingerprint(definition),
                      definition=definition, at=1_700_000_000.0)
    read_back = decode(encode(event))
    assert isinstance(read_back, DagParsed)
    return read_back


# -- time ----------------------------------------------------------------------------------------

NOWS = st.one_of(st.floats(min_value=cron.CALENDAR_START, max_value=cron.CALENDAR_END),
                 st.floats(min_value=1.6e9, max_value=1.9e9),
                 st.floats(allow_nan=False), st.sampled_from([cron.CALENDAR_END - 1.0, cron.LATEST, 0.0]))
STEPS = st.one_of(st.floats(min_value=0, max_value=1e6), st.sampled_from([3600.0, 86_400.0 * 366]))

# -- commands, as the API's request models accept them -------------------------------------------

FLOATS = st.one_of(st.none(), st.floats(), st.floats(min_value=cron.CALENDAR_START, max_value=cron.CALENDAR_END))
CONF = st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=3)
REQUEST_IDS = st.sampled_from(["q1", "q2", "q3", "b1", "b2"])


def commands(state: SchedulerState, dag_ids: list[str], span: float) -> st.SearchStrategy:
    """Any command of the API's request models, naming the partition's runs and tasks (and others);
    backfills over any dates, and over in-calendar spans of up to ``span`` seconds (planning a
    span costs a croniter step per fire time: a wide one on a busy schedule is slow, not different)."""
    runs = sorted({key[1] for key in state.runs} | {key[1] for key in state.finished}) or ["manual__q1"]
    tasks = sorted({task for dag in state.dags.values() for task in dag.tasks}) or ["t0"]
    dags, run_ids, task_ids = st.sampled_from(dag_ids), st.sampled_from([*runs, "nope"]), st.sampled_from(
        [*tasks, "", "nope"])
    at = st.floats(min_value=1.6e9, max_value=1.9e9)
    return st.one_of(
        st.builds(lambda dag, request, conf, logical, when: TriggerDagRun(
            dag_id=dag, request_id=request, conf_json=json.dumps(conf), logical_date=logical, at=when),
            dags, REQUEST_IDS, CONF, FLOATS, at),
        st.builds(lambda dag, request, start, end, again, when: RequestBackfill(
            dag_id=dag, request_id=request, start_date=start, end_date=end, reprocess_failed=again, at=when),
            dags, REQUEST_IDS, st.floats(), st.floats(), st.booleans(), at),
        st.builds(lambda dag, request, start, seconds, when: RequestBackfill(
            dag_id=dag, request_id=request, start_date=start, end_date=start + seconds, at=when),
            dags, REQUEST_IDS, st.floats(min_value=cron.CALENDAR_START, max_value=cron.CALENDAR_END),
            st.floats(min_value=-60, max_value=span), at),
        st.builds(lambda dag, run, task, request, down, up, when: ClearTask(
            dag_id=dag, run_id=run, task_id=task, request_id=request, downstream=down, upstream=up, at=when),
            dags, run_ids, task_ids, REQUEST_IDS, st.booleans(), st.booleans(), at),
        st.builds(lambda dag, run, task, mark, request, when: MarkTask(
            dag_id=dag, run_id=run, task_id=task, state=mark, request_id=request, at=when),
            dags, run_ids, task_ids, st.one_of(st.sampled_from(["success", "failed", "skipped"]), st.text(max_size=8)),
            REQUEST_IDS, at),
        st.builds(lambda dag, run, task, request, when: KillTask(
            dag_id=dag, run_id=run, task_id=task, request_id=request, at=when), dags, run_ids, task_ids,
            REQUEST_IDS, at),
        st.builds(lambda dag, paused, when: PauseDag(dag_id=dag, paused=paused, at=when), dags, st.booleans(), at),
        st.builds(lambda dag, request, when: CancelBackfill(dag_id=dag, backfill_id=request, at=when),
                  dags, REQUEST_IDS, at),
    )


# -- the simulation ------------------------------------------------------------------------------

def outcomes(decisions: list, succeed: bool, now: float) -> list:
    """Each queued try starts, then succeeds or fails, as its runner would report it."""
    reported: list = []
    for event in decisions:
        if isinstance(event, TaskQueued):
            ids = {"dag_id": event.dag_id, "run_id": event.run_id, "task_id": event.task_id,
                   "try_number": event.try_number, "runner_id": "r"}
            reported.append(TaskStarted(**ids, hostname="h", pid=1, at=now))
            reported.append(TaskSucceeded(**ids, at=now) if succeed else TaskFailed(**ids, error="boom", at=now))
    return reported


def run_partition(state: SchedulerState, data: st.DataObject, dag_ids: list[str], span: float,
                  turns: int = 4) -> list:
    """Turns of commands, decisions and runner outcomes; every event in log order."""
    log: list = []
    now = data.draw(NOWS, label="now")
    for _ in range(turns):
        arrived = data.draw(st.lists(commands(state, dag_ids, span), max_size=3), label="commands")
        fold(state, arrived)
        evidence = Evidence(heard_until=now, reachable_since=-math.inf) if math.isfinite(now) else None
        decisions = decide(state, now, POLICY, evidence=evidence)
        assert not [event for event in decisions if isinstance(event, DagQuarantined)], decisions
        for event in [*decisions, *outcomes(decisions, data.draw(st.booleans(), label="succeed"), now)]:
            evolve(state, event)
        log += [*arrived, *decisions]
        now += data.draw(STEPS, label="step")
    assert not state.quarantined
    return log


HEALTHY = parsed("healthy", {"a": [], "b": ["a"]}, schedule="@hourly", start_date=1_700_000_000.0, retries=1)


@FAST
@given(dag_arguments(), st.data())
def test_every_dag_the_sdk_accepts_is_folded_and_decided_without_raising(arguments, data):
    published = accepted(arguments)
    hypothesis.event("the SDK accepts the DAG" if published else "the SDK refuses the DAG")
    state = fold(SchedulerState(), [HEALTHY] + ([published] if published is not None else []))
    log = run_partition(state, data, ["drawn", "healthy", "unknown"], span=600.0)  # a schedule may fire each second
    replayed = fold(fold(SchedulerState(), [HEALTHY] + ([published] if published is not None else [])), log)
    assert not replayed.quarantined


@FAST
@given(st.data())
def test_every_command_the_api_accepts_is_folded_and_decided_without_raising(data):
    yearly = parsed("yearly", {"a": [], "b": ["a"]}, schedule="@yearly", start_date=cron.EARLIEST)
    once = parsed("once", schedule="@once", start_date=1_700_000_000.0)
    state = fold(SchedulerState(), [HEALTHY, yearly, once, parsed("manual")])
    run_partition(state, data, ["healthy", "yearly", "once", "manual", "unknown"], span=20 * 86_400.0, turns=5)


# -- one plannability rule for the API and the scheduler ----------------------------------------------

MOMENTS = st.floats(min_value=cron.CALENDAR_START, max_value=253402300799.0)


@FAST
@given(st.one_of(st.sampled_from([p for p in SCHEDULE_PRESETS if p != "@once"]), CRON), MOMENTS, MOMENTS)
def test_a_range_the_api_lets_through_is_one_the_scheduler_can_walk(schedule, start, end):
    """``plannable`` (what the API refuses a backfill by) says the same as walking the fire times
    (what the scheduler plans by) whenever the walk gets to the end of the range."""
    hypothesis.assume(cron.valid(schedule) and start <= end)
    since = max(start - 1e-3, cron.CALENDAR_START)
    dates, past_calendar = cron.fire_times(schedule, since, end, 500)
    hypothesis.assume(len(dates) < 500)
    assert cron.plannable(schedule, start, end) == (not past_calendar)
