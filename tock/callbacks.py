"""Airflow's callbacks in DAG files: ``on_success_callback``, ``on_failure_callback``,
``on_retry_callback``, ``on_execute_callback`` and ``on_skipped_callback`` on a task (or in
``default_args``), ``on_success_callback`` and ``on_failure_callback`` on a DAG. Each takes a function
or a list of functions, which `tock monitor` calls with the context, in a process of its own.

A DAG file passes function objects, but the definition the DAG processor publishes must name them
so that another process finds them again: ``"module:qualname"`` for a function of an importable
module, ``"/path/of/the/dag_file.py:qualname"`` for one defined in the DAG file itself (that process
loads the file again by its path). What cannot be named so (a lambda, a function defined inside
another function, a callable object) is refused when the file is parsed, naming the argument.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

# The argument names (Airflow's) and the trigger each is called for (CallbackCalled.trigger).
TASK_CALLBACKS = {"on_success_callback": "success", "on_failure_callback": "failure",
                  "on_retry_callback": "retry", "on_execute_callback": "execute",
                  "on_skipped_callback": "skipped"}
DAG_CALLBACKS = {"on_success_callback": "success", "on_failure_callback": "failure"}
# tock.loading runs each DAG file as a module of a name with this prefix, not importable by name.
DAG_FILE_MODULE_PREFIX = "tock_dagfile_"


def callbacks_of(given: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, list[str]]:
    """Trigger -> the targets of the callback arguments in ``given`` (argument name -> value) that are
    set; ValueError naming the argument if one cannot be called from another process."""
    found = {names[name]: targets_of(value, name) for name, value in given.items() if name in names}
    return {trigger: targets for trigger, targets in found.items() if targets}


def targets_of(value: Any, name: str) -> list[str]:
    """The targets of one callback argument: None, a function or a list of functions (duplicates once)."""
    if value is None:
        return []
    items = list(value) if isinstance(value, list | tuple) else [value]
    return list(dict.fromkeys(target_of(item, name) for item in items))


def target_of(function: Any, name: str) -> str:
    """``"module:qualname"`` or ``"/path/dag_file.py:qualname"`` of a function another process can find."""
    if isinstance(function, str) or not callable(function):
        raise ValueError(f"{name} must be a function or a list of functions, got {function!r}")
    qualname, module = getattr(function, "__qualname__", None), getattr(function, "__module__", None)
    if not isinstance(qualname, str) or not isinstance(module, str):
        raise ValueError(f"{name}: {function!r} is not a function another process can find by its module and "
                         "name; define the callback with def at the top level of a module or of the DAG file")
    if "<lambda>" in qualname:
        raise ValueError(f"{name}: a lambda cannot be called from another process (`tock monitor` calls "
                         "callbacks); define it with def at the top level of a module or of the DAG file")
    if "<locals>" in qualname:
        raise ValueError(f"{name}: {qualname.replace('.<locals>', '')} is defined inside a function, so another "
                         "process cannot find it; define it at the top level of a module or of the DAG file")
    namespace, home = _home(function, module)
    if _lookup(namespace, qualname) is not function:
        raise ValueError(f"{name}: {function!r} is not found as {qualname!r} in {home}; pass a function "
                         "defined there under that name")
    return f"{home}:{qualname}"


def _home(function: Any, module: str) -> tuple[Mapping[str, Any], str]:
    """The namespace the function is found in, and how another process names it: the DAG file's path
    for a function of the DAG file (or of a script run as ``__main__``), else its module's name."""
    namespace = getattr(function, "__globals__", None)
    in_dag_file = module.startswith(DAG_FILE_MODULE_PREFIX) or module == "__main__"
    if in_dag_file and isinstance(namespace, dict) and isinstance(namespace.get("__file__"), str):
        return namespace, os.path.abspath(namespace["__file__"])
    loaded = sys.modules.get(module)
    return (vars(loaded) if loaded is not None else {}), module


def _lookup(namespace: Mapping[str, Any], qualname: str) -> Any:
    first, *rest = qualname.split(".")
    found = namespace.get(first)
    for part in rest:
        found = getattr(found, part, None)
    return found
