"""Warnings about the clocks silence is judged on (services/scheduler/core/heard.py).

A heartbeat is timed by the broker that appended it and judged against this scheduler's clock, so
the two must agree. What a live scheduler can see of their difference, from the heartbeats it reads:
a heartbeat appended "in the future" proves the broker's clock is ahead (tries are declared dead
that much late); heartbeats that are all old on arrival for a whole window mean the scheduler lags
behind the log, or the broker's clock is behind (tries are declared dead that much early). And a
heartbeat without a broker time means its topic still carries the runners' clocks.
"""

from __future__ import annotations

import logging
import math

log = logging.getLogger("tock.scheduler")

WINDOW = 60.0        # seconds of heartbeats each judgement covers
AHEAD = 1.0          # a heartbeat appended this far past our now: the broker's clock is ahead
OLD = 10.0           # every heartbeat of a window at least this old on arrival: lag, or the broker behind
MIN_HEARTBEATS = 10  # fewer in a window say nothing about lag


class ClockWatch:
    """Fed every heartbeat folded live (``appended_at`` None: a CreateTime record); logs what it sees."""

    def __init__(self) -> None:
        self._window_start: float | None = None
        self._youngest = math.inf  # the smallest age on arrival in the window
        self._ahead = 0.0          # how far the broker's time was past ours, at most, in the window
        self._count = 0
        self._runner_clocks = ""   # a topic whose heartbeats carried their runners' clocks in the window

    def observe(self, topic: str, appended_at: float | None, now: float) -> None:
        if self._window_start is None:
            self._window_start = now
        elif now - self._window_start >= WINDOW:
            self._judge()
            self._window_start, self._youngest, self._ahead, self._count = now, math.inf, 0.0, 0
            self._runner_clocks = ""
        if appended_at is None:
            self._runner_clocks = topic
        else:
            self._count += 1
            self._youngest = min(self._youngest, now - appended_at)
            self._ahead = max(self._ahead, appended_at - now)

    def _judge(self) -> None:
        if self._runner_clocks:
            log.warning("heartbeats on %s carry their runners' clocks (a topic created before Tock set "
                        "message.timestamp.type=LogAppendTime): a runner whose clock is off has its tries declared "
                        "dead early or late; run `tock topics create` to bring the topic over", self._runner_clocks)
        if self._ahead > AHEAD:
            log.warning("the broker appended heartbeats %.1f s past this scheduler's clock: the broker's clock is "
                        "ahead, and silent tries are declared dead that much late; keep the clocks in step (NTP)",
                        self._ahead)
        if self._count >= MIN_HEARTBEATS and self._youngest > OLD:
            log.warning("every heartbeat of the last %.0f s arrived at least %.1f s after the broker appended it: "
                        "this scheduler lags behind the log, or the broker's clock is behind this scheduler's (then "
                        "silent tries are declared dead that much early; keep the clocks in step)",
                        WINDOW, self._youngest)
