"""The claim rule: the first of a try's TaskStarted and TaskKillRequested in log order decides it.
Given these records, in this order, and these tries of ours: which are won, lost (to whom), lost to
a kill request (why) and still pending; and which kill requests a runner of won tries obeys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.log import partition_for
from schemas import TaskDeclaredDead, TaskKillRequested, TaskQueued, TaskStarted
from services.runner.claim_reader import earliest_queued
from services.runner.core.claim import Claims, kill_requests, unanchored, winners

A, B = ("d", "r", "a", 1), ("d", "r", "b", 1)
A2 = ("d", "r", "a", 2)
KILL = "kill:"  # a record written as (key, "kill:<reason>") is a TaskKillRequested
QUEUED = "queued"  # ... and (key, "queued") its TaskQueued


def started(key, runner_id: str) -> TaskStarted:
    dag_id, run_id, task_id, try_number = key
    return TaskStarted(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, runner_id=runner_id,
                       hostname=runner_id.split(":")[0], pid=1, at=0.0)


def kill_requested(key, reason: str) -> TaskKillRequested:
    dag_id, run_id, task_id, try_number = key
    return TaskKillRequested(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, reason=reason,
                             scheduler_id="s1", at=0.0)


def task_queued(key) -> TaskQueued:
    dag_id, run_id, task_id, try_number = key
    return TaskQueued(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, executor="local",
                      queue="default", scheduler_id="s1", at=0.0)


def record(key, who: str):
    if who == QUEUED:
        return task_queued(key)
    return kill_requested(key, who.removeprefix(KILL)) if who.startswith(KILL) else started(key, who)


@pytest.mark.parametrize(("log", "own", "expected"), [
    pytest.param([], {A: "me"}, Claims(pending=frozenset({A})), id="nothing read yet"),
    pytest.param([(A, "me")], {A: "me"}, Claims(won=frozenset({A})), id="ours alone"),
    pytest.param([(A, "me"), (A, "other")], {A: "me"}, Claims(won=frozenset({A})), id="ours first"),
    pytest.param([(A, "other"), (A, "me")], {A: "me"}, Claims(lost={A: "other"}), id="theirs first"),
    pytest.param([(A, "other")], {A: "me"}, Claims(lost={A: "other"}),
                 id="theirs first decides before ours is read"),
    pytest.param([(A, "old"), (A, "other"), (A, "me")], {A: "me"}, Claims(lost={A: "old"}),
                 id="the first of several wins"),
    pytest.param([(A2, "other"), (A, "me")], {A: "me"}, Claims(won=frozenset({A})),
                 id="another try number is another try"),
    pytest.param([(B, "other"), (A, "me")], {A: "me", B: "me-b"}, Claims(won=frozenset({A}), lost={B: "other"}),
                 id="a batch: each try on its own"),
    pytest.param([(A, "me")], {A: "me", B: "me-b"}, Claims(won=frozenset({A}), pending=frozenset({B})),
                 id="a batch: one still pending"),
    pytest.param([(B, "me-b"), (A, "me")], {A: "me", B: "me-b"}, Claims(won=frozenset({A, B})),
                 id="a batch: all won, in any order"),
    pytest.param([(A, KILL + "cleared")], {A: "me"}, Claims(killed={A: "cleared"}),
                 id="a kill request first: nobody runs it"),
    pytest.param([(A, KILL + "cleared"), (A, "me")], {A: "me"}, Claims(killed={A: "cleared"}),
                 id="a kill request before ours: lost to the kill"),
    pytest.param([(A, KILL + "cleared"), (A, "other"), (A, "me")], {A: "me"}, Claims(killed={A: "cleared"}),
                 id="a kill request before every TaskStarted: lost to the kill, not to the first runner"),
    pytest.param([(A, "me"), (A, KILL + "cleared")], {A: "me"}, Claims(won=frozenset({A})),
                 id="a kill request after ours: won, the kill is ours to obey"),
    pytest.param([(A, "other"), (A, KILL + "cleared"), (A, "me")], {A: "me"}, Claims(lost={A: "other"}),
                 id="a kill request after theirs: lost to the first runner"),
    pytest.param([(A2, KILL + "cleared"), (A, "me")], {A: "me"}, Claims(won=frozenset({A})),
                 id="a kill request of another try number is another try's"),
    pytest.param([(B, KILL + "removed"), (A, "me"), (B, "me-b")], {A: "me", B: "me-b"},
                 Claims(won=frozenset({A}), killed={B: "removed"}), id="a batch: one won, one lost to a kill"),
])
def test_the_first_task_started_or_kill_request_in_log_order_decides(log, own, expected):
    claims = winners([record(key, who) for key, who in log], own)
    assert (claims.won, dict(claims.lost), dict(claims.killed), claims.pending) == (
        expected.won, dict(expected.lost), dict(expected.killed), expected.pending)
    assert claims.decided == (not expected.pending)


@pytest.mark.parametrize(("log", "tries", "expected"), [
    pytest.param([(A, "me"), (A, KILL + "cleared")], {A}, {A: "cleared"}, id="a kill of a try we run"),
    pytest.param([(A, "me"), (A, KILL + "cleared"), (A, KILL + "killed")], {A}, {A: "cleared"},
                 id="the first kill request's reason"),
    pytest.param([(A, KILL + "cleared"), (A2, KILL + "marked")], {A2}, {A2: "marked"},
                 id="only the tries asked about"),
    pytest.param([(A, "me"), (B, "other")], {A, B}, {}, id="no kill request"),
])
def test_the_kill_requests_of_a_runner_s_tries(log, tries, expected):
    assert kill_requests([record(key, who) for key, who in log], tries) == expected


RUNNERS = st.sampled_from(["me", "h2:1:x", "h3:2:y"])
WHO = st.sampled_from(["me", "h2:1:x", "h3:2:y", KILL + "cleared"])
KEYS = st.sampled_from([A, B, A2])


@given(st.lists(st.tuples(KEYS, WHO), max_size=12))
def test_every_reader_of_the_same_log_agrees_one_runner_won_each_try_unless_a_kill_came_first(log):
    events = [record(key, who) for key, who in log]
    for key in {key for key, _who in log}:
        records = [who for logged, who in log if logged == key]
        runners = {who for who in records if not who.startswith(KILL)}
        winners_of_key = [runner for runner in runners if key in winners(events, {key: runner}).won]
        assert len(winners_of_key) == (0 if records[0].startswith(KILL) else 1)
        assert all(key in winners(events, {key: runner}).killed for runner in runners) == records[0].startswith(KILL)


@given(st.lists(st.tuples(KEYS, WHO), max_size=12), st.integers(min_value=0, max_value=12))
def test_reading_more_of_the_log_never_changes_a_decision(log, cut):
    events = [record(key, who) for key, who in log]
    own = {A: "me", B: "me"}
    early, late = winners(events[:cut], own), winners(events, own)
    assert early.won <= late.won and dict(early.lost).items() <= dict(late.lost).items()
    assert dict(early.killed).items() <= dict(late.killed).items()


def test_the_claim_reads_each_partition_from_its_earliest_queued_try():
    other = next(f"dag{index}" for index in range(100) if partition_for(f"dag{index}", 3) != partition_for("d", 3))
    queued = {A: 100.0, B: 90.0, (other, "r", "t", 1): 50.0}
    assert earliest_queued(queued, 3) == {partition_for("d", 3): 90.0, partition_for(other, 3): 50.0}


def test_a_try_queued_at_an_unknown_time_reads_its_partition_from_the_beginning():
    assert earliest_queued({A: 100.0, B: 0.0}, 3) == {partition_for("d", 3): 0.0}


def declared_dead(key) -> TaskDeclaredDead:
    dag_id, run_id, task_id, try_number = key
    return TaskDeclaredDead(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number,
                            last_heartbeat_at=None, reason="no heartbeat for 60 s", scheduler_id="s1", at=0.0)


def test_a_try_declared_dead_before_any_start_is_run_by_nobody():
    # A launch delivered long after the try was given up (a redelivered Celery message): its retry runs, not it.
    claims = winners([declared_dead(A), started(A, "me")], {A: "me"})
    assert claims == Claims(killed={A: "declared dead before any runner started it (no heartbeat for 60 s)"})


def test_a_death_declared_after_the_start_does_not_undo_the_claim():
    assert winners([started(A, "me"), declared_dead(A)], {A: "me"}) == Claims(won=frozenset({A}))


@pytest.mark.parametrize(("log", "expected"), [
    pytest.param([(A, QUEUED), (A, "other"), (A, "me")], set(), id="the TaskQueued first: the read began before it"),
    pytest.param([(A, "me")], {A}, id="our TaskStarted without the TaskQueued: the read began past it"),
    pytest.param([(A, "other"), (A, QUEUED), (A, "me")], {A}, id="a claim record read before the TaskQueued"),
    pytest.param([(A, KILL + "cleared"), (A, "me")], {A}, id="a kill request read before any TaskQueued"),
    pytest.param([(A2, QUEUED), (A, "me")], {A}, id="another try's TaskQueued anchors nothing"),
    pytest.param([(B, "other"), (A, QUEUED), (A, "me")], set(), id="only the tries asked about"),
    pytest.param([(A, QUEUED)], set(), id="nothing claimed yet"),
])
def test_a_claim_record_read_before_its_try_s_task_queued_shows_the_read_began_too_late(log, expected):
    assert unanchored([record(key, who) for key, who in log], {A}) == expected


def test_a_task_queued_decides_no_claim():
    assert winners([task_queued(A)], {A: "me"}) == Claims(pending=frozenset({A}))
    assert winners([task_queued(A), started(A, "other"), started(A, "me")], {A: "me"}) == Claims(lost={A: "other"})
