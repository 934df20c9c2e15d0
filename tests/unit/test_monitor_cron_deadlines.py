"""Run deadlines counted from the logical date (``Deadline.after_logical_date``): given these
events, at this time, then these DeadlineMissed. A scheduled run of a ``0 2 * * *`` DAG with
``Deadline.after_logical_date(1 h)`` must be finished by 03:00 of its logical day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from schemas import (
    DagDefinition,
    DagParsed,
    DagRunCreated,
    DagRunFinished,
    DagRunReopened,
    DeadlineMissed,
    TaskDefinition,
)
from services.monitor.core import decide, fold, next_deadline
from tock import DAG, BashTask, DagDefinitionError, Deadline

LOGICAL = datetime(2026, 11, 30, 2, 0, tzinfo=UTC).timestamp()  # 02:00, the cron fire time
CREATED = LOGICAL + 40  # the scheduler created the run 40 s after the fire time
HOUR = 3600.0


def parsed(after: str = "logical_date", deadline: float = HOUR) -> DagParsed:
    definition = DagDefinition(dag_id="nightly", file_path="/dags/n.py", schedule="0 2 * * *", deadline=deadline,
                               deadline_from=after, tasks=[TaskDefinition(task_id="a", kind="bash", command="x")])
    return DagParsed(dag_id="nightly", file_path="/dags/n.py", fingerprint="fp", definition=definition, at=0.0)


def created(run_type: str = "scheduled", run_id: str = "scheduled__1", logical: float = LOGICAL) -> DagRunCreated:
    return DagRunCreated(dag_id="nightly", run_id=run_id, logical_date=logical, run_type=run_type,
                         dag_fingerprint="fp", scheduler_id="s", at=CREATED)


def missed(deadline: float, at: float, run_id: str = "scheduled__1") -> DeadlineMissed:
    return DeadlineMissed(dag_id="nightly", run_id=run_id, deadline=deadline, at=at)


@pytest.mark.parametrize("events, now, expected", [
    ([parsed(), created()], LOGICAL + HOUR - 0.1, []),
    ([parsed(), created()], LOGICAL + HOUR, [missed(LOGICAL + HOUR, LOGICAL + HOUR)]),  # 03:00 sharp
    ([parsed(after="start"), created()], LOGICAL + HOUR, []),  # the default counts from the start...
    ([parsed(after="start"), created()], CREATED + HOUR, [missed(CREATED + HOUR, CREATED + HOUR)]),  # ...40 s on
    # Manual and backfill runs count from their start: a backfill's logical date is long past.
    ([parsed(), created("manual", "manual__1")], LOGICAL + HOUR, []),
    ([parsed(), created("backfill", "backfill__1", LOGICAL - 30 * 86400)], CREATED + 60, []),
    ([parsed(), created("backfill", "backfill__1", LOGICAL - 30 * 86400)], CREATED + HOUR,
     [missed(CREATED + HOUR, CREATED + HOUR, "backfill__1")]),
    # Ended at 03:10 with no monitor to see it: the late miss names 03:00.
    ([parsed(), created(), DagRunFinished(dag_id="nightly", run_id="scheduled__1", state="success",
                                          at=LOGICAL + HOUR + 600)], LOGICAL + HOUR + 700,
     [missed(LOGICAL + HOUR, LOGICAL + HOUR + 700)]),
    # Reopened (cleared) days later: timed from the reopening, not from its old logical date.
    ([parsed(), created(), DagRunFinished(dag_id="nightly", run_id="scheduled__1", state="success", at=CREATED + 9),
      DagRunReopened(dag_id="nightly", run_id="scheduled__1", at=LOGICAL + 86400)], LOGICAL + 86400 + 10, []),
])
def test_cron_relative_deadline_misses(events, now, expected):
    assert decide(fold(events), now) == expected


def test_the_monitor_wakes_up_at_the_logical_deadline():
    assert next_deadline(fold([parsed(), created()])) == LOGICAL + HOUR


def test_the_authoring_api_spells_where_a_deadline_counts_from():
    with DAG("nightly", schedule="0 2 * * *", deadline=Deadline.after_logical_date(timedelta(hours=1))) as dag:
        BashTask("a", "x")
    definition = dag.to_definition("/dags/n.py")
    assert (definition.deadline, definition.deadline_from) == (HOUR, "logical_date")
    for plain in (90, timedelta(seconds=90), Deadline.after_start(90)):
        with DAG("plain", deadline=plain) as dag:
            BashTask("a", "x")
        assert (dag.to_definition("/p.py").deadline, dag.to_definition("/p.py").deadline_from) == (90.0, "start")
    with pytest.raises(DagDefinitionError, match="deadline must not be negative"):
        DAG("neg", deadline=Deadline.after_logical_date(-1))
    with pytest.raises(DagDefinitionError, match="counts after 'start' or 'logical_date', not 'end'"):
        DAG("odd", deadline=Deadline(60, after="end"))
