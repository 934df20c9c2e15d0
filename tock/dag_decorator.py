"""``@dag`` (Airflow's TaskFlow DAG decorator): a function whose call builds a DAG.

``@dag(schedule=..., ...)`` (or bare ``@dag``) takes DAG's arguments; the DAG's id is the function's name
unless ``dag_id`` says otherwise. Calling the function (``etl()``, at the file's top level) creates the
DAG and runs the function's body inside it. Each of the function's parameters is a DAG param: its default
(or the value the call passes) is the param's default, a ``Param`` stays one, and one without a default
must be given by the run's conf. Inside the body the parameter is a ``DagParam``: passed to a task (an
argument of a ``@task`` call, a PythonOperator's ``op_args`` / ``op_kwargs``), it is the run's value of
that param when the try runs; a string field (``bash_command``) reads it as ``{{ params.name }}``.
Without ``doc_md``, the function's docstring is the DAG's docs (as in Airflow).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from tock.dag import DAG
from tock.dag_param import DagParam
from tock.params import Param


def dag(dag_id: Any = None, **dag_kwargs: Any) -> Any:
    """``@dag`` or ``@dag(...)`` with DAG's arguments: the decorated function builds the DAG when called."""
    if callable(dag_id) and not dag_kwargs:  # bare @dag
        return dag()(dag_id)

    def decorator(function: Callable[..., Any]) -> Callable[..., DAG]:
        signature = inspect.signature(function)
        named = [parameter for parameter in signature.parameters.values()
                 if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)]

        @functools.wraps(function)
        def build(*args: Any, **kwargs: Any) -> DAG:
            given = signature.bind_partial(*args, **kwargs).arguments
            params = dict(dag_kwargs.get("params") or {})
            for parameter in named:
                default = given.get(parameter.name, parameter.default)
                params[parameter.name] = Param() if default is inspect.Parameter.empty else default
            with DAG(dag_id or function.__name__, **{**dag_kwargs, "params": params}) as made:
                if function.__doc__ and not made.doc_md:  # Airflow's rule: the function's docstring
                    made.doc_md = function.__doc__
                function(**{parameter.name: DagParam(parameter.name) for parameter in named})
            return made

        return build

    return decorator

