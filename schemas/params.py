"""A DAG's params as a try sees them: the DAG's (and its task's) params, then the run's conf over them.

The one rule the API (a trigger's conf, 422), the CLI and the scheduler (a command that reaches the
log invalid is rejected, and each try's params are recorded in its TaskQueued) apply alike.
"""

from __future__ import annotations

import json
from typing import Any


def for_task(dag_params_json: str, task_params_json: str, conf_json: str) -> dict[str, Any]:
    """The params' values a try of a task sees: the DAG's, the task's over them, then the conf's keys
    over both (Airflow's dag_run_conf_overrides_params)."""
    values = dict(json.loads(dag_params_json or "{}"))
    values.update(json.loads(task_params_json or "{}"))
    values.update(json.loads(conf_json or "{}"))
    return values
