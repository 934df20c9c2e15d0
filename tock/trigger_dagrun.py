"""``TriggerDagRunOperator`` (Airflow's, from ``airflow.providers.standard.operators.trigger_dagrun``): a task
that starts a run of another DAG, exactly once whatever retries and restarts happen.

The try renders its fields (``trigger_dag_id``, ``trigger_run_id``, ``conf``, ``logical_date`` are templates),
and its runner appends the ``TriggerDagRun`` command to the target DAG's partition before the try's success.
The command's request id is derived from the triggering task instance (or is ``trigger_run_id``), and the
target's owner applies a request id once (the run id is ``manual__<request id>``, kept even after the run
is forgotten), so a retry, a runner resending its spool or a replay never makes a second run.

With ``wait_for_completion`` the task then waits for that run to end, as Airflow's deferrable operator
does but with no triggerer and no poke: its try ends at once, the task is ``deferred``, and the owner of
the target's partition writes the run's end back to the task's (services/scheduler/core/external.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from schemas.dags import ExternalWaitDefinition
from tock.context import get_current_context
from tock.operators import PythonOperator
from tock.states import DagRunState

REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{0,127}$")
_NOT_YET = ("skip_when_already_exists", "fail_when_dag_is_paused")


class TriggerDagRunOperator(PythonOperator):
    """``TriggerDagRunOperator(task_id, trigger_dag_id, trigger_run_id=None, conf=None, logical_date=None,
    reset_dag_run=False, ...)``: start a run of ``trigger_dag_id`` with ``conf``. Pushes the run's id as
    ``trigger_run_id``. ``reset_dag_run``: a later try of this task clears the run its first try started.
    ``wait_for_completion``: the task ends when the run does, success when in ``allowed_states`` (default
    success), failed when in ``failed_states`` (default failed); ``poke_interval`` and ``deferrable`` are
    accepted and have nothing to do (no poke). ``skip_when_already_exists`` and ``fail_when_dag_is_paused``
    are not offered yet (a DAG that sets them is refused, saying so)."""

    def __init__(self, *, task_id: str, trigger_dag_id: str, trigger_run_id: str | None = None,
                 conf: dict[str, Any] | None = None, logical_date: str | datetime | None = None,
                 reset_dag_run: bool = False, wait_for_completion: bool = False, poke_interval: float = 60,
                 allowed_states: Any = None, failed_states: Any = None, skip_when_already_exists: bool = False,
                 fail_when_dag_is_paused: bool = False, deferrable: bool = False, **kwargs: Any) -> None:
        asked = {"skip_when_already_exists": skip_when_already_exists,
                 "fail_when_dag_is_paused": fail_when_dag_is_paused}
        for name in _NOT_YET:
            if asked[name]:
                raise ValueError(f"TriggerDagRunOperator {task_id!r}: {name} is not offered yet")
        if not isinstance(trigger_dag_id, str) or not trigger_dag_id:
            raise ValueError(f"TriggerDagRunOperator {task_id!r}: trigger_dag_id must be a DAG id, got "
                             f"{trigger_dag_id!r}")
        if conf is not None and not isinstance(conf, dict):
            raise TypeError(f"TriggerDagRunOperator {task_id!r}: conf must be a dict, got {conf!r:.200}")
        if not isinstance(reset_dag_run, bool):
            raise TypeError(f"TriggerDagRunOperator {task_id!r}: reset_dag_run must be True or False")
        if not isinstance(wait_for_completion, bool) or not isinstance(deferrable, bool):
            raise TypeError(f"TriggerDagRunOperator {task_id!r}: wait_for_completion and deferrable must be True "
                            "or False")
        wait = _completion_wait(task_id, trigger_dag_id, allowed_states, failed_states) if wait_for_completion \
            else None
        self.trigger_dag_id, self.trigger_run_id, self.conf = trigger_dag_id, trigger_run_id, conf or {}
        self.wait_for_completion, self.poke_interval = wait_for_completion, poke_interval
        super().__init__(task_id=task_id, python_callable=_trigger,
                         op_kwargs={"trigger_dag_id": trigger_dag_id, "trigger_run_id": trigger_run_id,
                                    "conf": conf or {}, "logical_date": logical_date, "reset_dag_run": reset_dag_run},
                         **kwargs)
        self.external = wait


def _trigger(trigger_dag_id: str, trigger_run_id: str | None, conf: dict[str, Any], logical_date: Any,
             reset_dag_run: bool) -> None:
    """The try: the command its runner appends before its success, and the run id pushed."""
    ti = get_current_context()["ti"]
    request_id = trigger_run_id or derived_request_id(ti.dag_id, ti.run_id, ti.task_id, ti.map_index, trigger_dag_id)
    if not isinstance(request_id, str) or not REQUEST_ID.match(request_id):
        raise ValueError(f"trigger_run_id must be 1 to 128 letters, digits, '.', '_', '~', '-', got {request_id!r}")
    try:
        conf_json = json.dumps(conf, sort_keys=True)
    except (TypeError, ValueError) as error:
        raise TypeError(f"conf must be JSON (it travels in the log): {error}") from None
    ti.commands.append({"command": "TriggerDagRun", "dag_id": trigger_dag_id, "request_id": request_id,
                        "conf_json": conf_json, "logical_date": _moment(logical_date)})
    if reset_dag_run and ti.try_number > 1:
        ti.commands.append({"command": "ClearTask", "dag_id": trigger_dag_id, "run_id": f"manual__{request_id}",
                            "request_id": f"{request_id}.reset.{ti.try_number}"[:128]})
    ti.xcom_push(key="trigger_run_id", value=f"manual__{request_id}")
    ti.xcom_push(key="trigger_dag_id", value=trigger_dag_id)  # as rendered: what wait_for_completion waits on
    print(f"triggered {trigger_dag_id} run manual__{request_id} (a retry triggers the same run)")


def _completion_wait(task_id: str, dag_id: str, allowed: Any, failed: Any) -> ExternalWaitDefinition:
    """What ``wait_for_completion`` waits for: the triggered run in one of the states (DagRunState's names)."""
    where = f"TriggerDagRunOperator {task_id!r}"
    states = [_run_states(where, name, given, default) for name, given, default in
              (("allowed_states", allowed, ["success"]), ("failed_states", failed, ["failed"]))]
    if set(states[0]) & set(states[1]):
        raise ValueError(f"{where}: a state is both allowed and failed: {sorted(set(states[0]) & set(states[1]))}")
    return ExternalWaitDefinition(external_dag_id=dag_id, allowed_states=states[0], failed_states=states[1],
                                  after_success=True)


def _run_states(where: str, name: str, given: Any, default: list[str]) -> list[str]:
    if given is None:
        return default
    if isinstance(given, str) or not isinstance(given, list | tuple | set | frozenset):
        raise ValueError(f"{where}: {name} must be a list of DAG run states, got {given!r}")
    values = [str(state.value if isinstance(state, Enum) else state) for state in given]
    valid = {state.value for state in DagRunState}
    wrong = sorted(set(values) - valid)
    if wrong:
        raise ValueError(f"{where}: {name} names {', '.join(map(repr, wrong))}, not one of {', '.join(sorted(valid))}")
    return values


def derived_request_id(dag_id: str, run_id: str, task_id: str, map_index: int, target: str) -> str:
    """The request id of the run a task instance triggers: the same for every try of it."""
    digest = hashlib.sha256(f"{dag_id}\x00{run_id}\x00{task_id}\x00{map_index}\x00{target}".encode()).hexdigest()
    return f"triggered-{digest[:40]}"


def _moment(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise TypeError(f"logical_date must be a datetime, an ISO 8601 string or None, got {value!r:.80}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return float(value.timestamp())
