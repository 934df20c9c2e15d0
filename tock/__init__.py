"""Tock: the public authoring API for DAG files (DAG, task, BashTask)."""

from tock.dag import DAG, DagDefinitionError, fingerprint
from tock.loading import load_dags
from tock.tasks import BashTask, Task, task

__all__ = ["DAG", "BashTask", "DagDefinitionError", "Task", "fingerprint", "load_dags", "task"]
