"""Task log shipping, the pure parts: chunks of whole lines, the budget and its truncation marker,
the final record, and the reader's dedupe and end."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import TaskLogShipped
from services.api.task_logs import ShippedLog, take
from services.runner.log_chunks import Budget, ShipState, plan_chunks

WIDE = Budget(limit=10_000, where="host-a:/home/tries/etl/r1/t/1.log", max_chunk=16)


def ship(pieces: list[bytes], budget: Budget = WIDE, ended_after: bool = True) -> list:
    """Chunks planned tick by tick as the file grows by ``pieces``; the try ends after the last one."""
    state, chunks = ShipState(), []
    for index, piece in enumerate(pieces):
        state, planned = plan_chunks(state, piece, ended_after and index == len(pieces) - 1, budget)
        chunks.extend(planned)
    return chunks


def test_only_whole_lines_ship_until_the_try_ends():
    state, chunks = plan_chunks(ShipState(), b"one\ntw", False, WIDE)
    assert [(chunk.offset, chunk.text) for chunk in chunks] == [(0, "one\n")]
    assert (state.offset, state.pending) == (4, b"tw")
    state, chunks = plan_chunks(state, b"o", True, WIDE)  # the last line has no newline: it goes at the end
    assert [(chunk.offset, chunk.text, chunk.final) for chunk in chunks] == [(4, "two", True)]
    assert state.done and plan_chunks(state, b"more\n", True, WIDE) == (state, [])


def test_chunks_are_bounded_and_cut_after_a_newline():
    chunks = ship([b"aaaa\nbbbb\ncccc\ndddd\n" + b"x" * 40 + b"\n"])
    assert all(len(chunk.text.encode()) <= 16 for chunk in chunks)
    assert [chunk.text for chunk in chunks[:2]] == ["aaaa\nbbbb\ncccc\n", "dddd\n"]
    assert "".join(chunk.text for chunk in chunks) == "aaaa\nbbbb\ncccc\ndddd\n" + "x" * 40 + "\n"
    assert [chunk.final for chunk in chunks] == [False] * (len(chunks) - 1) + [True]


def test_a_long_line_without_newline_ships_in_pieces_before_the_end():
    _state, chunks = plan_chunks(ShipState(), b"y" * 40, False, WIDE)
    assert "".join(chunk.text for chunk in chunks) == "y" * 40


def test_an_empty_log_ends_with_an_empty_final_record():
    assert [(chunk.offset, chunk.text, chunk.final) for chunk in ship([b""])] == [(0, "", True)]


def test_past_the_budget_one_marker_names_the_shipped_bytes_and_the_file():
    budget = Budget(limit=12, where="host-a:/home/tries/etl/r1/t/1.log")
    chunks = ship([b"12345\n", b"67890\nabc\n", b"never\n"], budget)
    assert "".join(chunk.text for chunk in chunks if not chunk.truncated) == "12345\n67890\n"
    marker = chunks[-1]
    assert marker.truncated and not marker.final and marker.offset == 12
    assert "12 bytes shipped" in marker.text and "host-a:/home/tries/etl/r1/t/1.log" in marker.text
    assert sum(chunk.truncated for chunk in chunks) == 1  # nothing more after it


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab\né€𝄞"), max_size=80), st.lists(st.integers(0, 320), max_size=6))
def test_shipping_tick_by_tick_ships_the_text_once_in_order(text, cuts):
    """However the file grows (even mid-character), the chunks join to its text, each under the bound."""
    whole = text.encode()
    bounds = [0, *sorted(min(cut, len(whole)) for cut in cuts), len(whole)]
    chunks = ship([whole[start:end] for start, end in zip(bounds, bounds[1:], strict=False)] + [b""])
    assert "".join(chunk.text for chunk in chunks) == text
    assert all(len(chunk.text.encode()) <= WIDE.max_chunk for chunk in chunks)


def record(offset: int, text: str, **flags) -> TaskLogShipped:
    return TaskLogShipped(dag_id="etl", run_id="r1", task_id="t", try_number=1, runner_id="w", offset=offset,
                          text=text, at=1.0, **flags)


def test_a_redelivered_chunk_prints_once_and_reading_stops_at_the_final_record():
    state, texts = take(ShippedLog(), [record(0, "a\n"), record(2, "b\n"), record(0, "a\n")])
    assert texts == ["a\n", "b\n"] and not state.ended
    state, texts = take(state, [record(2, "b\n"), record(4, "c", final=True), record(5, "late\n")])
    assert texts == ["c"] and state.ended


@pytest.mark.parametrize("flags", [{"final": True}, {"truncated": True}])
def test_the_final_record_or_the_marker_ends_the_log(flags):
    state, texts = take(ShippedLog(), [record(0, "x\n"), record(2, "end\n", **flags)])
    assert (texts, state.ended) == (["x\n", "end\n"], True)
