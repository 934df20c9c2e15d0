"""Weight rules: how a task's ``priority_weight`` adds up to its priority (Airflow's ``WeightRule``)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from schemas.dags import WEIGHT_RULES

# The priority weights Airflow stores (a 32-bit integer column): Tock refuses what Airflow could not store.
MINIMUM_PRIORITY_WEIGHT = -(2**31)
MAXIMUM_PRIORITY_WEIGHT = 2**31 - 1


class WeightRule(str, Enum):
    """How a task's priority is computed from the weights (Airflow 3's names and values):
    ``DOWNSTREAM`` its own weight plus every task's downstream of it (the default: what many tasks
    wait for goes first), ``UPSTREAM`` plus every task's upstream of it (runs that are further along
    finish first), ``ABSOLUTE`` its own weight only."""

    DOWNSTREAM = "downstream"
    UPSTREAM = "upstream"
    ABSOLUTE = "absolute"

    @classmethod
    def is_valid(cls, weight_rule: str) -> bool:
        return weight_rule in cls.all_weight_rules()

    @classmethod
    def all_weight_rules(cls) -> set[str]:
        return {rule.value for rule in cls}

    def __str__(self) -> str:
        return self.value


assert tuple(rule.value for rule in WeightRule) == WEIGHT_RULES  # the names definitions carry


def weight_rule_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as a weight rule (None: it is one, a member or its string)."""
    if isinstance(value, str) and value in WEIGHT_RULES:
        return None
    return (f"unknown weight_rule {value!r} (valid: {', '.join(WEIGHT_RULES)}; "
            "custom priority weight strategies are not offered)")


def weight_rule_value(value: Any) -> str:
    """The plain string of a valid weight rule (a ``WeightRule`` member or its value)."""
    return value.value if isinstance(value, WeightRule) else str(value)


def priority_weight_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as a priority weight: an integer Airflow could store (negative
    weights are allowed, as in Airflow: they put a task behind the default weight of 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"priority_weight must be an integer, got {value!r}"
    if not MINIMUM_PRIORITY_WEIGHT <= value <= MAXIMUM_PRIORITY_WEIGHT:
        return (f"priority_weight must be from {MINIMUM_PRIORITY_WEIGHT} to {MAXIMUM_PRIORITY_WEIGHT}, "
                f"got {value!r}")
    return None
