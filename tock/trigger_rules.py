"""Trigger rules: how a task reads its upstream tasks' states (Airflow's ``TriggerRule``)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from schemas.dags import TRIGGER_RULES


class TriggerRule(str, Enum):
    """The rule a task's upstream states are read by (Airflow 3's names and values)."""

    ALL_SUCCESS = "all_success"
    ALL_FAILED = "all_failed"
    ALL_DONE = "all_done"
    ALL_DONE_SETUP_SUCCESS = "all_done_setup_success"
    ALL_DONE_MIN_ONE_SUCCESS = "all_done_min_one_success"
    ALL_SKIPPED = "all_skipped"
    ONE_SUCCESS = "one_success"
    ONE_FAILED = "one_failed"
    ONE_DONE = "one_done"
    NONE_FAILED = "none_failed"
    NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"
    NONE_SKIPPED = "none_skipped"
    ALWAYS = "always"

    @classmethod
    def is_valid(cls, trigger_rule: str) -> bool:
        return trigger_rule in cls.all_triggers()

    @classmethod
    def all_triggers(cls) -> set[str]:
        return {rule.value for rule in cls}

    def __str__(self) -> str:
        return self.value


assert tuple(rule.value for rule in TriggerRule) == TRIGGER_RULES  # the names definitions carry


def trigger_rule_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as a trigger rule (None: it is one, a member or its string)."""
    if isinstance(value, str) and value in TRIGGER_RULES:
        return None
    return f"unknown trigger_rule {value!r} (valid: {', '.join(TRIGGER_RULES)})"


def trigger_rule_value(value: Any) -> str:
    """The plain string of a valid trigger rule (a ``TriggerRule`` member or its value)."""
    return value.value if isinstance(value, TriggerRule) else str(value)
