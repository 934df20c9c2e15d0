"""``BaseOperator`` (Airflow's): a user's own operator. Subclass it, pass ``task_id`` and the task options
on to ``super().__init__(**kwargs)``, and write ``execute(self, context)``:

    class Greet(BaseOperator):
        template_fields = ("name",)

        def __init__(self, name, **kwargs):
            super().__init__(**kwargs)
            self.name = name

        def execute(self, context):
            return f"hello {self.name}"

A try renders the class's ``template_fields`` onto a copy of the operator (as Airflow renders onto the
operator) and calls ``execute``; its return value is passed on as a ``@task``'s is (``do_xcom_push``,
``multiple_outputs``), ``AirflowSkipException`` skips it and any other exception fails it. Upstream
values reach it through ``context["ti"].xcom_pull`` or an ``XComArg`` in a templated field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from tock.tasks import Task, init_task

if TYPE_CHECKING:
    from tock.context import Context
    from tock.dag import DAG

OPERATOR = "operator"  # the task kind of a BaseOperator subclass: a try that calls its execute


class BaseOperator(Task):
    """Airflow's base of operators: subclass it and write ``execute(self, context)`` (see the module)."""

    template_fields: tuple[str, ...] = ()  # a class's own, as Airflow's operators have
    template_ext: tuple[str, ...] = ()
    task_kind: ClassVar[str] = OPERATOR

    def __init__(self, *, task_id: str, dag: DAG | None = None, **options: Any) -> None:
        init_task(self, dag, task_id, self.task_kind, options)

    def execute(self, context: Context) -> Any:
        """What a try of the operator does; its return value is passed on. Subclasses write it."""
        raise NotImplementedError(f"{type(self).__name__} must define execute(self, context)")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.dag.dag_id}.{self.task_id}>"
