"""Tock: the public authoring API for DAG files (DAG, task, BashTask, get_current_context, Deadline...)."""

from tock import macros
from tock.connections import BaseHook, Connection
from tock.context import Context, get_current_context
from tock.dag import DAG, DagDefinitionError, fingerprint
from tock.deadline import Deadline
from tock.loading import load_dags
from tock.params import Param, ParamsDict, ParamValidationError
from tock.secrets import AirflowNotFoundException, AirflowRuntimeError, mask_secret
from tock.tasks import BashTask, Task, XComArg, task
from tock.templating import TemplateRenderError, render_template_fields, rendered_for_record
from tock.variables import Variable

__all__ = ["DAG", "AirflowNotFoundException", "AirflowRuntimeError", "BaseHook", "BashTask", "Connection", "Context",
           "DagDefinitionError", "Deadline", "Param", "ParamValidationError", "ParamsDict", "Task",
           "TemplateRenderError", "Variable", "XComArg", "fingerprint",
           "get_current_context", "load_dags", "macros", "mask_secret", "render_template_fields",
           "rendered_for_record", "task"]
