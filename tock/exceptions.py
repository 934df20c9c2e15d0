"""Exceptions task code raises to tell the runner how its try ended (Airflow's names)."""

from __future__ import annotations

from datetime import datetime


class AirflowException(Exception):  # noqa: N818 - Airflow's name
    """The base of the exceptions task code raises to say how its try ends (Airflow's): raised itself, the
    try fails (and is retried if the task has retries left)."""


class AirflowFailException(AirflowException):
    """Raised in task code: the try fails and is not retried, whatever retries the task has left (Airflow's).
    Its TaskFailed says so (``retryable`` false), so the decision not to retry is the log's."""


class AirflowSkipException(AirflowException):
    """Raised in task code: the try ends *skipped*, not failed (no retry), and its downstream tasks
    are decided by their trigger rules, as in Airflow."""


class AirflowRescheduleException(AirflowException):
    """Raised in a sensor's poke: the condition is not met, poke again at ``reschedule_date`` (an aware
    datetime) rather than after the poke interval."""

    def __init__(self, reschedule_date: datetime) -> None:
        super().__init__(f"poke again at {reschedule_date.isoformat()}")
        self.reschedule_date = reschedule_date


class AirflowSensorTimeout(AirflowException):
    """A sensor waited past its timeout (Airflow's name). In Tock the owner of the run decides it from the
    log (``SensorTimedOut``); ``tock dags test`` raises it. Raised by task code, it fails the try without
    a retry, as in Airflow."""


def retryable(error: BaseException) -> bool:
    """Whether a try that raised ``error`` may be retried: not after AirflowFailException or AirflowSensorTimeout."""
    return not isinstance(error, AirflowFailException | AirflowSensorTimeout)
