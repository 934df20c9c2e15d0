"""The child process of a callable callback: ``python -m infra.run_callable [--context] TARGET``.

TARGET is ``module:function`` (imported) or ``/path/of/a/dag_file.py:function`` (the DAG file is
run again as a module, its folder on the import path, as Tock's loader runs it); the function may
be a dotted name (``Class.function``). Reads a JSON object on stdin and calls ``function(payload)``;
with ``--context`` it calls ``function(context)`` instead, the context Airflow's callbacks get, built
from the payload: its keys, the dates as aware datetimes, ``ds``/``ts``, and ``ti`` /
``task_instance`` and ``dag_run`` objects with their ids, try number, state and conf. An exception
exits non-zero with its traceback on stderr (the caller keeps the last line as the outcome's detail).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

DATE_KEYS = ("logical_date", "data_interval_start", "data_interval_end")


@dataclass(frozen=True)
class CallbackTaskInstance:
    """The task instance a task callback is called for (Airflow's ``context["ti"]``)."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    map_index: int
    state: str


@dataclass(frozen=True)
class CallbackDagRun:
    """The run a callback is called for (Airflow's ``context["dag_run"]``)."""

    dag_id: str
    run_id: str
    run_type: str
    logical_date: datetime | None
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    conf: dict[str, Any] = field(default_factory=dict)
    state: str | None = None  # a run's own callback: its outcome; a task's: None (the run goes on)


def main(argv: list[str]) -> int:
    context = argv[:1] == ["--context"]
    function = resolve(argv[-1])
    payload = json.load(sys.stdin)
    function(as_context(payload) if context else payload)
    return 0


def resolve(target: str) -> Any:
    """The function ``target`` names."""
    home, _, qualname = target.rpartition(":")
    module = _dag_file(home) if home.endswith(".py") and os.path.isabs(home) else importlib.import_module(home)
    found: Any = module
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _dag_file(path: str) -> ModuleType:
    """Run the DAG file at ``path`` as a module (its folder importable, for the helpers beside it)."""
    sys.path.insert(0, os.path.dirname(path))
    name = f"tock_dagfile_{hashlib.sha1(path.encode()).hexdigest()[:12]}_callback"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the DAG file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def as_context(payload: dict[str, Any]) -> dict[str, Any]:
    """The Airflow-style context of a callback's payload."""
    context = dict(payload)
    context.update({key: _moment(payload.get(key)) for key in DATE_KEYS})
    logical_date = context["logical_date"]
    if logical_date is not None:
        ds = logical_date.strftime("%Y-%m-%d")
        context.update(ds=ds, ds_nodash=ds.replace("-", ""), ts=logical_date.isoformat(),
                       ts_nodash=logical_date.strftime("%Y%m%dT%H%M%S"))
    task_id = payload.get("task_id")
    context["dag_run"] = CallbackDagRun(payload["dag_id"], payload["run_id"], payload.get("run_type", ""),
                                        *(context[key] for key in DATE_KEYS), payload.get("conf") or {},
                                        None if task_id else payload.get("state"))
    if task_id:
        ti = CallbackTaskInstance(payload["dag_id"], payload["run_id"], task_id, payload.get("try_number", 0),
                                  payload.get("map_index", -1), payload.get("state", ""))
        context.update(ti=ti, task_instance=ti)
    return context


def _moment(seconds: Any) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if isinstance(seconds, int | float) else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
