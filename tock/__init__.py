"""Tock: the public authoring API for DAG files (DAG, task, BashTask, operators, task groups,
setup/teardown, get_current_context, Deadline...)."""

from tock import macros
from tock.assets import Asset, AssetAlias, AssetAll, AssetAny
from tock.base_operator import BaseOperator
from tock.chaining import chain, cross_downstream
from tock.connections import BaseHook, Connection
from tock.context import Context, get_current_context
from tock.dag import DAG, DagDefinitionError, fingerprint
from tock.dag_decorator import dag
from tock.dag_param import DagParam
from tock.deadline import Deadline
from tock.decorators import task
from tock.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSensorTimeout,
    AirflowSkipException,
)
from tock.external import ExternalTaskMarker, ExternalTaskSensor
from tock.loading import load_dags
from tock.operators import (
    BashOperator,
    BranchPythonOperator,
    EmptyOperator,
    ExternalPythonOperator,
    LatestOnlyOperator,
    PythonOperator,
    PythonVirtualenvOperator,
    ShortCircuitOperator,
)
from tock.params import Param, ParamsDict, ParamValidationError
from tock.secrets import AirflowNotFoundException, AirflowRuntimeError, mask_secret
from tock.sensors import (
    BaseSensorOperator,
    DateTimeSensor,
    FileSensor,
    PokeReturnValue,
    PythonSensor,
    TimeDeltaSensor,
)
from tock.setup_teardown import setup, teardown
from tock.states import DagRunState, State, TaskInstanceState
from tock.task_group import TaskGroup, task_group
from tock.tasks import BashTask, Task, XComArg
from tock.templating import TemplateRenderError, render_template_fields, rendered_for_record
from tock.trigger_dagrun import TriggerDagRunOperator
from tock.trigger_rules import TriggerRule
from tock.variables import Variable
from tock.watchers import AssetWatcher, KafkaMessageQueueTrigger, MessageQueueTrigger
from tock.weight_rules import WeightRule

__all__ = ["DAG", "BaseOperator", "ExternalPythonOperator", "PythonVirtualenvOperator",
           "DagParam", "dag", "AirflowException", "AirflowFailException",
           "AirflowNotFoundException", "AirflowRescheduleException", "AirflowRuntimeError", "Asset",
           "AssetAlias", "AssetAll", "AssetAny", "AssetWatcher", "KafkaMessageQueueTrigger", "MessageQueueTrigger",
           "AirflowSensorTimeout", "AirflowSkipException", "BaseHook", "BaseSensorOperator", "DateTimeSensor",
           "FileSensor", "PokeReturnValue", "PythonSensor", "TimeDeltaSensor",
           "BashOperator", "BashTask", "BranchPythonOperator", "Connection", "Context", "DagDefinitionError",
           "DagRunState", "Deadline", "ExternalTaskMarker", "ExternalTaskSensor", "State", "TaskInstanceState",
           "EmptyOperator", "LatestOnlyOperator", "Param", "ParamValidationError", "ParamsDict", "PythonOperator",
           "ShortCircuitOperator", "Task", "TaskGroup", "TemplateRenderError", "TriggerDagRunOperator", "TriggerRule",
           "Variable", "WeightRule",
           "XComArg",
           "chain", "cross_downstream", "fingerprint", "get_current_context", "load_dags", "macros", "mask_secret",
           "render_template_fields", "rendered_for_record", "setup", "task", "task_group", "teardown"]
