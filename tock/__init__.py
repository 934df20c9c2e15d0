"""Tock: the public authoring API for DAG files (DAG, task, BashTask, Deadline)."""

from tock import macros
from tock.dag import DAG, DagDefinitionError, fingerprint
from tock.deadline import Deadline
from tock.loading import load_dags
from tock.params import Param, ParamsDict, ParamValidationError
from tock.tasks import BashTask, Task, task
from tock.templating import TemplateRenderError, render_template_fields, rendered_for_record

__all__ = ["DAG", "BashTask", "DagDefinitionError", "Deadline", "Param", "ParamValidationError", "ParamsDict",
           "Task", "TemplateRenderError", "fingerprint", "load_dags", "macros", "render_template_fields",
           "rendered_for_record", "task"]
