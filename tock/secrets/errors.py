"""The errors a missing variable or connection raises, under Airflow's names, so ``except`` clauses
of a ported DAG still catch them (and ``except KeyError`` catches both)."""

from __future__ import annotations


class AirflowRuntimeError(KeyError):
    """What Airflow 3 raises for a variable no backend has (``Variable.get`` without a default)."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0]) if self.args else ""


class VariableNotFound(AirflowRuntimeError):
    """No backend of the chain has the variable."""


class AirflowNotFoundException(KeyError):
    """What Airflow raises for a connection no backend has (``Connection.get``, ``BaseHook.get_connection``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
