"""The authoring side of dynamic task mapping (tock/mapping.py): what ``.partial()``, ``.expand()`` and
``.expand_kwargs()`` put in the definition, the errors a DAG file gets at parse time, and the element
each map index runs with."""

from __future__ import annotations

import json

import pytest

from schemas import MapDefinition, MapInput
from schemas.dags import MAX_MAP_LENGTH
from tock import DAG, DagDefinitionError, EmptyOperator, PythonOperator, task
from tock.mapping import MappingError, apply_element, with_element
from tock.values import decode_value


def _defs(dag):
    return {item.task_id: item for item in dag.to_definition("f.py").tasks}


@task
def add(x, y=0):
    return x + y


@task
def numbers():
    return [1, 2, 3]


@task
def total(values):
    return sum(values)


def test_expand_over_a_literal_list_records_the_literal():
    with DAG("lit") as dag:
        add.expand(x=[1, 2, 3])
    mapped = _defs(dag)["add"].mapped
    assert mapped == MapDefinition(kind="expand", inputs=[MapInput(name="x", literal_json="[1,2,3]")],
                                   max_map_length=MAX_MAP_LENGTH)


def test_expand_over_an_upstream_value_depends_on_it_and_records_where_it_comes_from():
    with DAG("up") as dag:
        total(add.expand(x=numbers()))
    defs = _defs(dag)
    assert defs["add"].mapped.inputs == [MapInput(name="x", task_id="numbers", key="return_value")]
    assert defs["add"].upstream == ["numbers"]
    assert defs["total"].upstream == ["add"] and defs["total"].mapped is None
    assert defs["numbers"].mapped is None


def test_partial_arguments_stay_the_tasks_and_only_expanded_ones_are_inputs():
    with DAG("part") as dag:
        created = add.partial(y=10).expand(x={"a": 1})
    assert created.kwargs == {"y": 10}
    assert _defs(dag)["add"].mapped.inputs == [MapInput(name="x", literal_json='{"a":1}')]


def test_expand_kwargs_over_a_literal_list_of_dicts_and_over_a_value():
    with DAG("kw") as dag:
        add.expand_kwargs([{"x": 1}, {"x": 2, "y": 3}])
        add.expand_kwargs(numbers())
    defs = _defs(dag)
    assert defs["add"].mapped.kind == "expand_kwargs"
    assert decode_value(defs["add"].mapped.inputs[0].literal_json) == [{"x": 1}, {"x": 2, "y": 3}]
    assert defs["add__1"].mapped.inputs == [MapInput(name="", task_id="numbers")]


def test_max_map_length_is_a_task_option():
    with DAG("max") as dag:
        add.override(max_map_length=5).expand(x=[1])
    assert _defs(dag)["add"].mapped.max_map_length == 5


def test_an_operator_maps_with_partial_then_expand():
    with DAG("op") as dag:
        PythonOperator.partial(task_id="py", python_callable=lambda x: x).expand(op_kwargs=[{"x": 1}, {"x": 2}])
    assert _defs(dag)["py"].mapped.inputs[0].name == "op_kwargs"


@pytest.mark.parametrize(("build", "words"), [
    (lambda: add.expand(), "at least one argument"),
    (lambda: add.expand(x=3), "argument 'x' must be a list, a dict or an upstream task's value, got a int"),
    (lambda: add.expand(x="abc"), "got a str"),
    (lambda: add.expand(z=[1]), "unexpected keyword argument 'z'"),
    (lambda: add.partial(z=1), "unexpected keyword argument 'z'"),
    (lambda: add.partial(x=1).expand(x=[2]), "argument 'x' is given to both partial() and expand()"),
    (lambda: add.partial(y=1).expand_kwargs([{"x": 1, "y": 2}]), "'y' is given to both partial() and expand_kwargs()"),
    (lambda: add.expand_kwargs([1, 2]), "item 0 must be a dict of arguments"),
    (lambda: add.expand_kwargs({"x": 1}), "a list of dicts, not a dict"),
    (lambda: add.expand(x=[numbers()]), "holds upstream values inside a literal"),
    (lambda: add.expand(x=[object()]), "cannot be passed through the log"),
    (lambda: PythonOperator.partial(task_id="p", python_callable=print).expand(queue=["a"]),
     "cannot map PythonOperator's argument 'queue'"),
    (lambda: EmptyOperator.partial(task_id="e").expand(x=[1]), "mappable: none"),
    (lambda: PythonOperator.partial(python_callable=print), "needs task_id="),
])
def test_mistakes_are_refused_at_parse_time_naming_the_task_and_argument(build, words):
    with DAG("bad"), pytest.raises(MappingError) as raised:
        build()
    assert words in str(raised.value)


def test_a_bad_max_map_length_is_refused():
    with DAG("bad"), pytest.raises(DagDefinitionError, match="max_map_length must be a positive integer"):
        add.override(max_map_length=0).expand(x=[1])


def test_outside_a_dag_the_function_stays_plain():
    assert add(1, 2) == 3


# -- the element of a map index -------------------------------------------------------------------

def test_with_element_runs_a_copy_with_the_instances_arguments():
    with DAG("copy"):
        created = add.partial(y=1).expand(x=[1, 2])
    instance = with_element(created, '{"x":2}')
    assert instance.kwargs == {"y": 1, "x": 2} and created.kwargs == {"y": 1}


def test_an_expand_kwargs_element_that_is_not_a_dict_fails_the_try():
    with DAG("kwargs"):
        created = add.expand_kwargs(numbers())
    with pytest.raises(TypeError, match="expand_kwargs\\(\\) element is a int, not a dict of arguments"):
        with_element(created, '{"":3}')


def test_apply_element_sets_a_functions_kwargs_or_an_operators_fields():
    with DAG("apply"):
        function_task = add.partial(y=1).expand(x=[1])
        operator = PythonOperator.partial(task_id="op", python_callable=print).expand(op_args=[[1, 2]])
    apply_element(function_task, {"x": 5})
    apply_element(operator, {"op_args": [1, 2]})
    assert function_task.kwargs == {"y": 1, "x": 5}
    assert operator.args == (1, 2)


def test_zip_records_its_values_in_order_and_depends_on_each():
    with DAG("zips") as dag:
        @task
        def a():
            return [1]

        @task
        def b():
            return {"k": [2]}

        @task
        def show(pair):
            return pair

        left, right = a(), b()
        shown = show.expand(pair=left.zip(right["k"], fillvalue={"when": "short"}))
    [item] = _defs(dag)[shown.task_id].mapped.inputs
    assert (item.name, item.zip_task_ids, item.zip_keys) == ("pair", ["a", "b"], ["return_value", "k"])
    assert json.loads(item.zip_fill_json) == {"when": "short"}
    assert shown.upstream_task_ids == {"a", "b"}


def test_zip_refuses_what_it_cannot_zip():
    with DAG("bad_zips"):
        @task
        def a():
            return [1]

        first = a()
        with pytest.raises(TypeError, match="zips tasks' values"):
            first.zip([1, 2])
        with pytest.raises(TypeError, match="map the zip instead"):
            first.map(str).zip(a(), fillvalue=0)
