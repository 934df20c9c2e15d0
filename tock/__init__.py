"""Tock: the public authoring API for DAG files (DAG, task, BashTask, Deadline)."""

from tock.connections import BaseHook, Connection
from tock.dag import DAG, DagDefinitionError, fingerprint
from tock.deadline import Deadline
from tock.loading import load_dags
from tock.secrets import AirflowNotFoundException, AirflowRuntimeError, mask_secret
from tock.tasks import BashTask, Task, task
from tock.variables import Variable

__all__ = ["DAG", "AirflowNotFoundException", "AirflowRuntimeError", "BaseHook", "BashTask", "Connection",
           "DagDefinitionError", "Deadline", "Task", "Variable", "fingerprint", "load_dags", "mask_secret", "task"]
