"""What a scheduler says about the clocks silence is judged on, from the heartbeats it folds live."""

from __future__ import annotations

import logging

import pytest

from services.scheduler.clock_watch import WINDOW, ClockWatch

T = 1_750_000_000.0


def warnings_after(beats: list[tuple[float | None, float]], caplog) -> list[str]:
    """Feed (appended_at, now) pairs, then one more a window after; the warnings logged."""
    watch = ClockWatch()
    with caplog.at_level(logging.WARNING, logger="tock.scheduler"):
        for appended_at, now in [*beats, (T + 2 * WINDOW, T + 2 * WINDOW)]:
            watch.observe("tock.heartbeats", appended_at, now)
    return [record.getMessage() for record in caplog.records]


def test_clocks_in_step_say_nothing(caplog):
    assert warnings_after([(T + offset, T + offset + 0.05) for offset in range(20)], caplog) == []


@pytest.mark.parametrize(("beats", "says"), [
    ([(T, T), (None, T + 5)], "carry their runners' clocks"),
    ([(T, T), (T + 10, T + 5)], "broker's clock is ahead"),
    ([(T + offset, T + offset + 12) for offset in range(20)], "lags behind the log, or the broker's clock is behind"),
], ids=["CreateTime topic", "broker ahead", "broker behind (or lag)"])
def test_what_is_off_is_said_once_a_window(beats, says, caplog):
    [warning] = warnings_after(beats, caplog)
    assert says in warning
