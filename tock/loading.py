"""Load a DAG file: run it in a fresh module namespace and collect the DAGs it defines."""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import types
from pathlib import Path

from tock.callbacks import DAG_FILE_MODULE_PREFIX
from tock.dag import DAG, DagDefinitionError, _collectors

_counter = itertools.count()


def load_dags(path: str | os.PathLike[str]) -> list[DAG]:
    """Import the DAG file at ``path`` afresh and return the DAGs it defines, validated.

    Errors in the file propagate (SyntaxError, the file's own exceptions);
    an invalid DAG raises DagDefinitionError naming the file, the DAG and the problem.
    """
    file_path = os.path.abspath(path)
    return load_dags_from_source(file_path, Path(file_path).read_bytes())


def load_dags_from_source(file_path: str, source: bytes) -> list[DAG]:
    """Like :func:`load_dags`, for source already read (so a caller can hash the same bytes)."""
    code = compile(source, file_path, "exec", dont_inherit=True)
    _importable_beside(file_path)
    module = types.ModuleType(_module_name(file_path))
    module.__file__ = file_path
    collected: list[DAG] = []
    _collectors.append(collected)
    sys.modules[module.__name__] = module  # for code that looks itself up (dataclasses, typing)
    try:
        exec(code, module.__dict__)  # noqa: S102 - running DAG files is the point
    finally:
        sys.modules.pop(module.__name__, None)
        _collectors.remove(collected)
    return _validated(file_path, collected)


def _importable_beside(file_path: str) -> None:
    """Let a DAG file import helper modules kept next to it, as a script can.

    Wherever the file is loaded (a parse child, a task runner) is a process of its own
    for that purpose, so its import path may grow."""
    directory = os.path.dirname(file_path)
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _module_name(file_path: str) -> str:
    # A unique name per load: two loads of one file never share module state.
    digest = hashlib.sha1(file_path.encode()).hexdigest()[:12]
    return f"{DAG_FILE_MODULE_PREFIX}{digest}_{next(_counter)}"


def _validated(file_path: str, dags: list[DAG]) -> list[DAG]:
    seen: set[str] = set()
    for dag in dags:
        if dag.dag_id in seen:
            raise DagDefinitionError(file_path, dag.dag_id, "defined twice in this file")
        seen.add(dag.dag_id)
        dag.fileloc = file_path
        dag.validate()
    return dags
