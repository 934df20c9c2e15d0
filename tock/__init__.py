"""Tock: the public authoring API for DAG files (DAG, task, BashTask, Deadline)."""

from tock.dag import DAG, DagDefinitionError, fingerprint
from tock.deadline import Deadline
from tock.loading import load_dags
from tock.params import Param, ParamsDict, ParamValidationError
from tock.tasks import BashTask, Task, task

__all__ = ["DAG", "BashTask", "DagDefinitionError", "Deadline", "Param", "ParamValidationError",
           "ParamsDict", "Task", "fingerprint", "load_dags", "task"]
