"""Partition ownership (infra/log/ownership.py), without a broker: given these assignments,
takeover failures and times, then these parks, retries and owned partitions."""

from __future__ import annotations

import pytest

from infra.log.ownership import (
    RETRY_FIRST,
    RETRY_MOST,
    OwnershipBook,
    Retry,
    side_assignments,
    to_park,
    to_unpark,
)


def test_an_assigned_partition_is_parked_until_it_is_taken_over():
    book = OwnershipBook()
    book.park([1, 2])
    assert book.parked == {1, 2} and book.owned == set() and book.unreplayed == {}
    book.taken_over([1, 2])
    assert book.parked == set() and book.owned == {1, 2}


def test_a_failed_takeover_parks_the_partitions_and_retries_them_after_the_first_backoff():
    book = OwnershipBook()
    book.park([3])
    assert book.takeover_failed([3], now=100.0) == RETRY_FIRST
    assert book.parked == {3} and book.unreplayed == {3: Retry(100.0 + RETRY_FIRST, RETRY_FIRST)}
    assert book.retry_due(100.0 + RETRY_FIRST - 0.01) == []
    assert book.retry_due(100.0 + RETRY_FIRST) == [3]


@pytest.mark.parametrize(("failures", "backoff"), [(1, 1.0), (2, 2.0), (3, 4.0), (5, 16.0), (6, 30.0), (9, 30.0)])
def test_the_backoff_doubles_with_each_failure_up_to_its_ceiling(failures, backoff):
    book, now = OwnershipBook(), 0.0
    for _ in range(failures):
        shortest = book.takeover_failed([0], now)
        now = book.unreplayed[0].due
    assert shortest == backoff == book.unreplayed[0].backoff
    assert backoff <= RETRY_MOST


def test_the_shortest_backoff_of_the_partitions_failing_together_is_returned():
    book = OwnershipBook()
    book.takeover_failed([1], 0.0)
    book.takeover_failed([1], 1.0)  # partition 1 now waits 2 s
    assert book.takeover_failed([1, 2], 3.0) == 1.0  # partition 2 fails for the first time
    assert book.unreplayed == {1: Retry(7.0, 4.0), 2: Retry(4.0, 1.0)}


def test_a_retry_under_way_is_not_due_again_and_due_partitions_come_in_order():
    book = OwnershipBook()
    book.takeover_failed([5, 2, 7], 0.0)
    assert book.retry_due(10.0) == [2, 5, 7]
    assert book.retry_due(10.0, under_way={5}) == [2, 7]


def test_a_successful_retry_forgets_the_backoff():
    book = OwnershipBook()
    book.takeover_failed([4], 0.0)
    book.takeover_failed([4], 1.0)
    book.taken_over([4])
    assert book.owned == {4} and book.parked == set() and book.unreplayed == {}
    assert book.retry_due(1e9) == []
    book.revoked([4])
    assert book.takeover_failed([4], 10.0) == RETRY_FIRST  # a later failure starts from the first backoff


def test_a_revoked_partition_is_forgotten_whatever_its_state():
    book = OwnershipBook()
    book.park([1])
    book.takeover_failed([2], 0.0)
    book.taken_over([3])
    book.revoked([1, 2, 3, 9])
    assert book.owned == book.parked == set() and book.unreplayed == {}
    assert book.retry_due(1e9) == []


def test_parking_assigns_only_what_the_consumer_does_not_hold_and_unparking_only_what_it_does():
    assigned = {("t", 1), ("other", 2)}
    assert to_park([1, 2, 3], assigned, "t") == [2, 3]
    assert to_unpark([1, 2, 3], assigned, "t") == [1]


def test_the_side_reader_follows_every_owned_partition_from_its_next_offsets():
    positions = {2: {"dags": 5, "heartbeats": 7, "events": 9}, 0: {"dags": 1, "heartbeats": 0, "events": 3}}
    assert side_assignments(positions, ("dags", "heartbeats")) == [
        ("dags", 0, 1), ("heartbeats", 0, 0), ("dags", 2, 5), ("heartbeats", 2, 7)]
    assert side_assignments({}, ("dags",)) == []
