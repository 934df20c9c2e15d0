"""The fold of every read model: batching, replays and reader interleavings change nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.log import LogRecord
from projections.view import View, apply, fold, touched_keys
from tests.unit.projection_logs import interleavings, logs


def _tables(view: View) -> dict:
    """What the database would hold: live rows per table, history keyed by log position."""
    rows = {table: {key: row for key, row in by_key.items() if row is not None}
            for table, by_key in view.rows.items()}
    rows["task_event"] = {(r["topic"], r["partition"], r["offset"]): r for r in view.history}
    return rows


def _fold_in_batches(records, cuts: list[int]) -> dict:
    """Fold as the writer does: each batch starts from only the rows it touches, loaded from a store."""
    store: dict = {}
    offsets: dict = {}
    history: list = []
    bounds = [0, *sorted(set(cuts)), len(records)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        batch = records[start:end]
        loaded = {table: {key: store[(table, key)] for key in keys if (table, key) in store}
                  for table, keys in touched_keys(batch).items()}
        view = fold(batch, View(rows=loaded, offsets=dict(offsets)))
        for table, by_key in view.rows.items():
            for key, row in by_key.items():
                store.pop((table, key), None) if row is None else store.__setitem__((table, key), row)
        offsets, history = view.offsets, history + view.history
    view = View(offsets=offsets, history=history)
    for (table, key), row in store.items():
        view.rows.setdefault(table, {})[key] = row
    return _tables(view)


@settings(max_examples=150, deadline=None)
@given(log=logs(), cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=8))
def test_folding_in_one_batch_or_many_gives_the_same_rows(log, cuts):
    assert _fold_in_batches(log, cuts) == _tables(fold(log))


@settings(max_examples=150, deadline=None)
@given(log=logs(), data=st.data())
def test_folding_twice_changes_nothing(log, data):
    once = fold(log)
    twice = fold(data.draw(st.permutations(log)), fold(log))
    assert _tables(twice) == _tables(once)


@settings(max_examples=150, deadline=None)
@given(log=logs(), data=st.data())
def test_any_interleaving_of_partitions_gives_the_same_rows(log, data):
    assert _tables(fold(interleavings(log, data))) == _tables(fold(log))


def test_an_event_that_is_not_a_tock_event_is_refused():
    with pytest.raises(TypeError, match="not a Tock event"):
        apply(View(), LogRecord("t0.tock.events", 0, 0, "k", object(), 0.0))
