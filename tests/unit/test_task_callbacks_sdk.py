"""Task and DAG callbacks in the SDK (issue 23): Airflow's argument names on every kind of task, in
default_args and on the DAG; a function or a list of them reaches the definition as a name another
process can find; what cannot be found so is refused at parse time, naming the task and argument."""

from __future__ import annotations

import functools
import os.path
import textwrap

import pytest

from tock import DAG, BashTask, DagDefinitionError, EmptyOperator, PythonOperator, TaskGroup, load_dags, task

HERE = __name__  # callbacks defined at the top of this module are named "tests.unit...:function"


def alert(context):
    return None


def page(context):
    return None


class Notifier:
    @staticmethod
    def send(context):
        return None


class Sender:
    def send(self, context):
        return None


def _noop():
    return None


def _defs(dag):
    return {item.task_id: item for item in dag.to_definition("f.py").tasks}


@pytest.mark.parametrize("argument, trigger", [
    ("on_success_callback", "success"), ("on_failure_callback", "failure"), ("on_retry_callback", "retry"),
    ("on_execute_callback", "execute"), ("on_skipped_callback", "skipped")])
def test_each_task_callback_reaches_the_definition_under_its_trigger(argument, trigger):
    with DAG("cb") as dag:
        BashTask("bash", "true", **{argument: alert})
        task(_noop).override(**{argument: alert})()
        PythonOperator(task_id="python", python_callable=_noop, **{argument: alert})
        EmptyOperator(task_id="empty", **{argument: alert})
    assert {task_id: item.callbacks for task_id, item in _defs(dag).items()} == {
        task_id: {trigger: [f"{HERE}:alert"]} for task_id in ("bash", "_noop", "python", "empty")}


def test_a_list_of_callbacks_keeps_its_order_and_names_each_once():
    with DAG("cb") as dag:
        BashTask("a", "true", on_failure_callback=[page, alert, page, Notifier.send, os.path.join])
        BashTask("none", "true")
    defs = _defs(dag)
    assert defs["a"].callbacks == {"failure": [f"{HERE}:page", f"{HERE}:alert", f"{HERE}:Notifier.send",
                                               f"{os.path.join.__module__}:join"]}
    assert defs["none"].callbacks == {}


def test_default_args_of_the_dag_and_of_a_group_give_callbacks_to_the_tasks_that_set_none():
    with DAG("cb", default_args={"on_failure_callback": alert, "retries": 2}) as dag:
        BashTask("inherits", "true")
        BashTask("own", "true", on_failure_callback=page)
        with TaskGroup("g", default_args={"on_failure_callback": [page], "on_retry_callback": alert}):
            task(_noop)()
    defs = _defs(dag)
    assert (defs["inherits"].callbacks, defs["inherits"].retries) == ({"failure": [f"{HERE}:alert"]}, 2)
    assert defs["own"].callbacks == {"failure": [f"{HERE}:page"]}
    assert defs["g._noop"].callbacks == {"failure": [f"{HERE}:page"], "retry": [f"{HERE}:alert"]}


def test_dag_callbacks_reach_the_definition_beside_tocks_own():
    with DAG("cb", on_failure="http://hooks.example/x", on_success_callback=alert,
             on_failure_callback=[alert, page]) as dag:
        BashTask("a", "true")
    definition = dag.to_definition("f.py")
    assert definition.callbacks == {"success": [f"{HERE}:alert"], "failure": [f"{HERE}:alert", f"{HERE}:page"]}
    assert definition.on_failure == "http://hooks.example/x"


def _nested():
    def inner(context):
        return None
    return inner


@pytest.mark.parametrize("value, message", [
    (lambda context: None, ": a lambda cannot be called from another process"),
    (_nested(), ": _nested.inner is defined inside a function"),
    ("tests.unit:alert", " must be a function or a list of functions"),
    ([alert, 3], " must be a function or a list of functions, got 3"),
    (functools.partial(alert), "is not a function another process can find"),
    (Sender().send, "is not found as 'Sender.send'"),  # a bound method: its object is not in the module
    (object(), " must be a function"),
])
def test_a_callback_another_process_cannot_find_is_refused_naming_the_task_and_argument(value, message):
    with pytest.raises(DagDefinitionError, match=rf"DAG 'bad': task 'a': on_failure_callback.*{message}"):
        with DAG("bad"):
            BashTask("a", "true", on_failure_callback=value)


def test_a_refused_dag_callback_and_default_args_name_the_dag_and_argument():
    with pytest.raises(DagDefinitionError, match="DAG 'bad': on_success_callback: a lambda"):
        DAG("bad", on_success_callback=lambda context: None)
    with pytest.raises(DagDefinitionError, match="DAG 'bad': default_args: on_retry_callback: a lambda"):
        with DAG("bad", default_args={"on_retry_callback": lambda context: None}):
            BashTask("a", "true")
    with pytest.raises(DagDefinitionError, match="DAG 'bad': default_args has 'sla', which is not a task option"):
        DAG("bad", default_args={"sla": 60})


DAG_FILE = '''
from tock import DAG, BashTask

def noted(context):
    pass

with DAG("in_file", on_success_callback=noted) as dag:
    BashTask("a", "true", on_skipped_callback=noted)
'''


def test_a_function_of_the_dag_file_is_named_by_the_files_path(tmp_path):
    path = tmp_path / "in_file.py"
    path.write_text(textwrap.dedent(DAG_FILE))
    (dag,) = load_dags(path)
    definition = dag.to_definition(str(path))
    assert definition.callbacks == {"success": [f"{path}:noted"]}
    assert definition.tasks[0].callbacks == {"skipped": [f"{path}:noted"]}
