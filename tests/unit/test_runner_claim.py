"""The claim rule: the first TaskStarted of a try in log order wins. Given these TaskStarted, in
this order, and these tries of ours: which are won, lost (to whom) and still pending."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.log import partition_for
from schemas import TaskStarted
from services.runner.claim import Claims, winners
from services.runner.claim_reader import earliest_queued

A, B = ("d", "r", "a", 1), ("d", "r", "b", 1)
A2 = ("d", "r", "a", 2)


def started(key, runner_id: str) -> TaskStarted:
    dag_id, run_id, task_id, try_number = key
    return TaskStarted(dag_id=dag_id, run_id=run_id, task_id=task_id, try_number=try_number, runner_id=runner_id,
                       hostname=runner_id.split(":")[0], pid=1, at=0.0)


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
])
def test_first_task_started_in_log_order_wins(log, own, expected):
    claims = winners([started(key, runner_id) for key, runner_id in log], own)
    assert (claims.won, dict(claims.lost), claims.pending) == (expected.won, dict(expected.lost), expected.pending)
    assert claims.decided == (not expected.pending)


RUNNERS = st.sampled_from(["me", "h2:1:x", "h3:2:y"])
KEYS = st.sampled_from([A, B, A2])


@given(st.lists(st.tuples(KEYS, RUNNERS), max_size=12))
def test_every_reader_of_the_same_log_agrees_exactly_one_runner_won_each_try(log):
    events = [started(key, runner_id) for key, runner_id in log]
    for key in {key for key, _runner in log}:
        runners = {runner_id for logged, runner_id in log if logged == key}
        winners_of_key = [runner for runner in runners if key in winners(events, {key: runner}).won]
        assert len(winners_of_key) == 1


@given(st.lists(st.tuples(KEYS, RUNNERS), max_size=12), st.integers(min_value=0, max_value=12))
def test_reading_more_of_the_log_never_changes_a_decision(log, cut):
    events = [started(key, runner_id) for key, runner_id in log]
    own = {A: "me", B: "me"}
    early, late = winners(events[:cut], own), winners(events, own)
    assert early.won <= late.won and dict(early.lost).items() <= dict(late.lost).items()


def test_the_claim_reads_each_partition_from_its_earliest_queued_try():
    other = next(f"dag{index}" for index in range(100) if partition_for(f"dag{index}", 3) != partition_for("d", 3))
    queued = {A: 100.0, B: 90.0, (other, "r", "t", 1): 50.0}
    assert earliest_queued(queued, 3) == {partition_for("d", 3): 90.0, partition_for(other, 3): 50.0}


def test_a_try_queued_at_an_unknown_time_reads_its_partition_from_the_beginning():
    assert earliest_queued({A: 100.0, B: 0.0}, 3) == {partition_for("d", 3): 0.0}
