"""Tock: the public authoring API for DAG files (DAG, task, BashTask, get_current_context, Deadline...)."""

from tock import macros
from tock.context import Context, get_current_context
from tock.dag import DAG, DagDefinitionError, fingerprint
from tock.deadline import Deadline
from tock.loading import load_dags
from tock.tasks import BashTask, Task, XComArg, task
from tock.templating import TemplateRenderError, render_template_fields, rendered_for_record

__all__ = ["DAG", "BashTask", "Context", "DagDefinitionError", "Deadline", "Task", "TemplateRenderError", "XComArg",
           "fingerprint", "get_current_context", "load_dags", "macros", "render_template_fields",
           "rendered_for_record", "task"]
