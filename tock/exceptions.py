"""Exceptions task code raises to tell the runner how its try ended (Airflow's names)."""

from __future__ import annotations


class AirflowSkipException(Exception):
    """Raised in task code: the try ends *skipped*, not failed (no retry), and its downstream tasks
    are decided by their trigger rules, as in Airflow."""
