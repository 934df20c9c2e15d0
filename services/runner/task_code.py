"""Running one try's user code with its context: what the child does once the DAG file is loaded.

The same steps serve a runner's child and ``tock dags test`` (in one process): build the context from
the try's TaskQueued, render the templated fields, call the ``@task`` function with its arguments
(the upstream values its references stand for, resolved) and the context keys it names, or run the
bash command, its last line of output kept; then the values the try passes on, encoded, bounded.
A choosing task's return value also says what it follows (tock/branching.py); a callable that raises
``AirflowSkipException`` ends its try skipped, keeping what it pushed before.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas import TaskQueued
from tock import macros
from tock.base_operator import OPERATOR
from tock.branching import followed
from tock.context import Context, build_context, context_arguments, current, resolve_references
from tock.exceptions import AirflowSkipException
from tock.mapping import with_element
from tock.secrets import masker
from tock.secrets.accessors import ConnectionAccessor, VariableAccessor
from tock.tasks import Task
from tock.templating import render_template_fields, rendered_for_record
from tock.values import RETURN_VALUE, encode_values
from tock.virtualenv import run_in

SKIPPED_WITHOUT_REASON = "the task raised AirflowSkipException"


@dataclass
class TryResult:
    """What a try of user code came to: the values it passes on (encoded) and its rendered fields; for a
    task that chooses, what it follows; for a try that raised the skip exception, why it skipped."""

    values_json: str = ""
    rendered_json: str = ""
    exit_code: int = 0  # a bash command's exit status (non-zero: the try failed)
    signal: int = 0     # the signal that ended a bash command, if one did
    follow: list[str] | None = None  # a branch's or short circuit's choice (TaskSucceeded.follow)
    skipped: bool = False  # it raised AirflowSkipException: the try ends skipped, not failed
    reason: str = ""       # a skipped try's reason: the exception's message, secrets masked
    poked: bool = False    # a sensor's poke found its condition not met (TaskPoked)
    reschedule_at: float | None = None  # when it asked to be poked again (None: after its poke interval)
    timed_out: bool = False  # a sensor in mode "poke" waited in its try until its timeout
    asset_events_json: str = ""  # a success's asset events (its outlets', with their extra: tock/assets.py)
    commands: list[dict[str, Any]] = field(default_factory=list)  # appended before its success (TriggerDagRun)
    output: list[list[str | None]] = field(default_factory=list)  # records written with its success (kafka_output)


@dataclass
class TryProgress:
    """What is known of a try while it runs, for the report if it raises: its rendered fields."""

    rendered_json: str = ""
    extras: dict[str, Any] = field(default_factory=dict)


def run_task_code(task: Task, run_id: str, try_number: int, queued: TaskQueued | None, xcom_max_bytes: int,
                  progress: TryProgress | None = None) -> TryResult:
    """Run the try's user code to its end; raises what the user code raises (or a value that cannot be
    passed on: ValueNotSerializable, ValueTooLarge, with the task named)."""
    progress = progress or TryProgress()
    if queued is not None and queued.map_element_json:  # an instance of a mapped task: its own arguments
        try:
            task = with_element(task, queued.map_element_json)
        except AirflowSkipException as skip:  # a .map() function skipped this element (Airflow's rule)
            return _skipped(task, skip, {}, xcom_max_bytes, "")
    context = build_context(task, run_id, try_number, queued, {"macros": macros, "var": VariableAccessor(),
                                                               "conn": ConnectionAccessor(), **progress.extras})
    with current(context):
        rendered = render_fields(task, context)
        progress.rendered_json = masker().mask(rendered_for_record(rendered))  # a secret a template read
        if task.kind == "bash":
            result = _run_bash(task, rendered, xcom_max_bytes, progress.rendered_json)
        elif task.kind == "sensor":
            result = _run_sensor(task, context, rendered, xcom_max_bytes, progress.rendered_json)
        elif task.kind == OPERATOR:
            result = _run_operator(task, context, rendered, xcom_max_bytes, progress.rendered_json)
        else:
            result = _run_python(task, context, rendered, xcom_max_bytes, progress.rendered_json)
    if not (result.skipped or result.poked or result.exit_code or result.signal):
        result.asset_events_json = context["outlet_events"].events_json()  # they go with the success
        result.commands = list(context["ti"].commands)
        result.output = context["kafka_output"].reported()
    return result


def render_fields(task: Task, context: Context) -> dict[str, Any]:
    """The task's templated fields as they run (tock/templating.py); a python task's ``templates_dict``
    becomes the context's."""
    rendered = render_template_fields(task, context)
    if "templates_dict" in rendered:
        context["templates_dict"] = rendered["templates_dict"]
    return rendered


def _run_python(task: Task, context: Context, rendered: Mapping[str, Any], xcom_max_bytes: int,
                rendered_json: str) -> TryResult:
    ti = context["ti"]
    try:
        returned = call_python(task, context, rendered)
    except AirflowSkipException as skip:
        return _skipped(task, skip, ti.pushed, xcom_max_bytes, rendered_json)
    follow = followed(task, returned)  # before the values: a branch naming no task fails the try
    return TryResult(_encoded(task, _passed_on(task, returned, ti.pushed), xcom_max_bytes), rendered_json,
                     follow=follow)


def call_python(task: Task, context: Context, rendered: Mapping[str, Any]) -> Any:
    """Call the task's function with its rendered arguments (the upstream values they name, resolved) and
    the context keys it names; what it returns."""
    ti = context["ti"]
    args = tuple(resolve_references(value, ti) for value in rendered["op_args"])
    kwargs = {key: resolve_references(value, ti) for key, value in dict(rendered["op_kwargs"]).items()}
    assert task.python_callable is not None  # a python task has its function
    named = context_arguments(task.python_callable, args, kwargs, context)
    if task.interpreter is not None:  # @task.virtualenv, @task.external_python: in that interpreter
        return run_in(task.interpreter, task.python_callable, args, {**kwargs, **named})
    return task.python_callable(*args, **kwargs, **named)


def _skipped(task: Task, skip: AirflowSkipException, pushed: dict[str, Any], xcom_max_bytes: int,
             rendered_json: str) -> TryResult:
    """A try whose callable raised the skip exception: what it pushed before stays with it, and its
    message is the reason (it travels in the log: a secret it quotes is masked)."""
    reason = masker().mask(str(skip)) or SKIPPED_WITHOUT_REASON
    return TryResult(_encoded(task, dict(pushed), xcom_max_bytes), rendered_json, skipped=True, reason=reason)


def _run_sensor(task: Task, context: Context, rendered: Mapping[str, Any], xcom_max_bytes: int,
                rendered_json: str) -> TryResult:
    """A sensor's try (services/runner/poking.py): met, it succeeds with the value its poke gave;
    not met, it ends poked (mode "reschedule") or pokes again in this try until its timeout (mode "poke")."""
    from services.runner.poking import poke_until_done

    ti = context["ti"]
    try:
        poked = poke_until_done(task, lambda: _poke(task, context, rendered))
    except AirflowSkipException as skip:
        return _skipped(task, skip, ti.pushed, xcom_max_bytes, rendered_json)
    if not poked.done:
        return TryResult(rendered_json=rendered_json, poked=True, reschedule_at=poked.reschedule_at,
                         timed_out=poked.timed_out)
    values = _passed_on(task, poked.value, ti.pushed)
    return TryResult(_encoded(task, values, xcom_max_bytes), rendered_json)


def _run_operator(task: Task, context: Context, rendered: Mapping[str, Any], xcom_max_bytes: int,
                  rendered_json: str) -> TryResult:
    """A BaseOperator subclass's try: its ``execute`` on a copy of it with its templated fields rendered."""
    ti = context["ti"]
    operator = copy.copy(task)
    for name, value in rendered.items():
        setattr(operator, name, value)
    try:
        returned = operator.execute(context)  # type: ignore[attr-defined]  # a BaseOperator defines execute
    except AirflowSkipException as skip:
        return _skipped(task, skip, ti.pushed, xcom_max_bytes, rendered_json)
    return TryResult(_encoded(task, _passed_on(task, returned, ti.pushed), xcom_max_bytes), rendered_json)


def _poke(task: Task, context: Context, rendered: Mapping[str, Any]) -> Any:
    """One poke: a sensor function's call (``@task.sensor``, ``PythonSensor``), or the sensor's ``poke``
    with its templated fields rendered onto it (a copy, as Airflow renders onto the operator)."""
    if task.python_callable is not None:
        return call_python(task, context, rendered)
    sensor = copy.copy(task)
    for name, value in rendered.items():
        setattr(sensor, name, value)
    return sensor.poke(context)  # type: ignore[attr-defined]  # a sensor class defines poke


def _passed_on(task: Task, returned: Any, pushed: dict[str, Any]) -> dict[str, Any]:
    """What the try passes on: what it pushed, its return value (unless None or do_xcom_push=False) and,
    with multiple_outputs, each key of the dict it returned."""
    values = dict(pushed)
    if returned is None or not task.do_xcom_push:
        return values
    if task.multiple_outputs:
        if not isinstance(returned, dict) or not all(isinstance(key, str) for key in returned):
            raise TypeError(f"task {task.task_id!r} has multiple_outputs=True but returned a "
                            f"{type(returned).__name__}, not a dict with string keys")
        values.update(returned)
    values[RETURN_VALUE] = returned
    return values


def _encoded(task: Task, values: dict[str, Any], xcom_max_bytes: int) -> str:
    """The values as they travel in the log: a secret the try read is masked in them too (secrets never
    enter Kafka in clear text: pass a connection's id on, not its password)."""
    try:
        return encode_values(_masked(values, masker().mask), xcom_max_bytes)
    except (TypeError, ValueError) as error:
        raise type(error)(f"task {task.task_id!r}: {error}") from None


def _masked(value: Any, mask: Callable[[str], str]) -> Any:
    """``value`` with every string in it masked (containers rebuilt; other values as they are)."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, list | tuple | set | frozenset):
        return type(value)(_masked(item, mask) for item in value)
    if isinstance(value, dict):
        return {key: _masked(item, mask) for key, item in value.items()}
    return value


def _run_bash(task: Task, rendered: Mapping[str, Any], xcom_max_bytes: int, rendered_json: str) -> TryResult:
    """Run the command with bash, its output (stderr merged into stdout, as Airflow's BashOperator does) to
    the try's log as it comes; its last line is its value.

    Bash starts with every signal at its default and an empty mask (the child set both, and
    ``restore_signals`` resets the two Python ignores), in the child's process group."""
    env = rendered.get("env")
    environment = dict(os.environ) if env is None else {**(os.environ if task.append_env else {}), **env}
    process = subprocess.Popen(["/bin/bash", "-c", rendered["bash_command"]], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment,
                               cwd=rendered.get("cwd"), restore_signals=True)
    assert process.stdout is not None  # stdout=PIPE
    last = b""
    for line in process.stdout:
        sys.stdout.write(line.decode(errors="replace"))
        sys.stdout.flush()
        last = line
    status = process.wait()
    if status in task.skip_on_exit_code:  # Airflow's BashOperator: checked before success or failure
        return TryResult(rendered_json=rendered_json, skipped=True,
                         reason=f"the command exited with {status}, one of its skip_on_exit_code")
    if status != 0:
        return TryResult(rendered_json=rendered_json, exit_code=max(status, 0), signal=max(-status, 0))
    value = last.decode(errors="replace").rstrip("\n")
    values = {RETURN_VALUE: value} if task.do_xcom_push and last else {}
    return TryResult(_encoded(task, values, xcom_max_bytes), rendered_json)
