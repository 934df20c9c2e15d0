"""``DagParam``: a ``@dag`` function's parameter inside its body (tock/dag_decorator.py), resolved when a
try renders its task's fields (tock/templating.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class DagParam:
    """A ``@dag`` function's parameter inside its body: the run's value of the DAG param ``name`` when a
    try reads it (Airflow's ``DagParam``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def resolve(self, context: Mapping[str, Any]) -> Any:
        params = context["params"]
        if self.name not in params:
            raise KeyError(f"the DAG has no param {self.name!r}")
        return params[self.name]

    def __repr__(self) -> str:
        return f"DagParam({self.name!r})"
