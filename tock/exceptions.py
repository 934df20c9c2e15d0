"""Exceptions task code raises to tell the runner how its try ended (Airflow's names)."""

from __future__ import annotations

from datetime import datetime


class AirflowSkipException(Exception):
    """Raised in task code: the try ends *skipped*, not failed (no retry), and its downstream tasks
    are decided by their trigger rules, as in Airflow."""


class AirflowRescheduleException(Exception):
    """Raised in a sensor's poke: the condition is not met, poke again at ``reschedule_date`` (an aware
    datetime) rather than after the poke interval."""

    def __init__(self, reschedule_date: datetime) -> None:
        super().__init__(f"poke again at {reschedule_date.isoformat()}")
        self.reschedule_date = reschedule_date


class AirflowSensorTimeout(Exception):
    """A sensor waited past its timeout (Airflow's name). In Tock the owner of the run decides it from the
    log (``SensorTimedOut``); ``tock dags test`` raises it."""
