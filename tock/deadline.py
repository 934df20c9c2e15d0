"""``Deadline``: when a DAG's run must have finished, counted from its start or its logical date."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from tock.tasks import seconds_of

AFTER_START = "start"
AFTER_LOGICAL_DATE = "logical_date"


@dataclass(frozen=True)
class Deadline:
    """``interval`` (seconds or a timedelta) after the run's start (the default, same as a plain
    ``deadline=3600``) or after its logical date: ``Deadline.after_logical_date(timedelta(hours=1))``
    on a ``0 2 * * *`` DAG means each scheduled run must finish by 03:00 of its logical day.
    Manual and backfill runs, and reopened runs, count from their start either way."""

    interval: float | timedelta
    after: str = AFTER_START

    @classmethod
    def after_start(cls, interval: float | timedelta) -> Deadline:
        return cls(interval, AFTER_START)

    @classmethod
    def after_logical_date(cls, interval: float | timedelta) -> Deadline:
        return cls(interval, AFTER_LOGICAL_DATE)

    def seconds(self) -> float | None:
        """The interval in seconds (None if it has none); raises ValueError naming what is wrong."""
        if self.after not in (AFTER_START, AFTER_LOGICAL_DATE):
            raise ValueError(f"a deadline counts after {AFTER_START!r} or {AFTER_LOGICAL_DATE!r}, not {self.after!r}")
        return seconds_of(self.interval, "deadline")


def deadline_of(value: float | timedelta | Deadline | None) -> tuple[float | None, str]:
    """(seconds, what they count from) of a DAG's ``deadline=``."""
    if value is None:
        return None, AFTER_START
    rule = value if isinstance(value, Deadline) else Deadline.after_start(value)
    seconds = rule.seconds()
    if seconds is None:
        raise ValueError("a Deadline needs an interval")
    return seconds, rule.after
