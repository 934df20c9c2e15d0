"""The TaskFlow authoring API: calls of @task functions make tasks and dependencies; values round-trip."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tock import DAG, task
from tock.tasks import XComArg
from tock.values import ValueNotSerializable, ValueTooLarge, decode_values, encode_values


@task
def extract():
    return {"a": 1}


@task(multiple_outputs=True)
def transform(orders):
    return {"total": sum(orders.values())}


@task
def load(total, other=None):
    return total


def test_a_task_given_another_tasks_value_depends_on_it():
    with DAG("flow") as dag:
        summary = transform(extract())
        load(summary["total"], other=[summary])
    assert dag.tasks["transform"].upstream_task_ids == {"extract"}
    assert dag.tasks["load"].upstream_task_ids == {"transform"}
    [argument] = dag.tasks["load"].args
    assert (argument.operator, argument.key) == (dag.tasks["transform"], "total")
    assert isinstance(argument, XComArg)


def test_outside_a_dag_a_task_function_is_the_plain_function():
    assert load(3) == 3 and extract() == {"a": 1}


def test_calling_a_task_function_twice_numbers_the_second_as_airflow_does():
    with DAG("twice") as dag:
        extract()
        extract()
        extract.override(task_id="named")()
    assert sorted(dag.tasks) == ["extract", "extract__1", "named"]


def test_multiple_outputs_is_inferred_from_a_dict_return_annotation():
    @task
    def annotated() -> dict[str, int]:
        return {}

    @task
    def plain() -> list[int]:
        return []

    with DAG("annotated") as dag:
        annotated()
        plain()
        transform(1)
    assert [dag.tasks[name].multiple_outputs for name in ("annotated", "plain", "transform")] == [True, False, True]


def test_an_xcom_arg_links_like_its_task():
    with DAG("links") as dag:
        first = extract()
        second = load(1)
        first["a"] >> second
    assert dag.tasks["load"].upstream_task_ids == {"extract"}


def test_a_value_from_another_dag_is_refused():
    with DAG("one"):
        other = extract()
    with pytest.raises(ValueError, match="cannot depend on"), DAG("two"):
        load(other)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20)
tagged = st.one_of(
    st.datetimes(timezones=st.just(dt.UTC)), st.dates(), st.timedeltas(), st.decimals(allow_nan=False),
    st.binary(max_size=20), st.tuples(st.integers(), st.text()), st.frozensets(st.integers(), max_size=4),
    st.sets(st.text(max_size=3), max_size=4), st.dictionaries(st.integers(), st.text(), max_size=3),
    st.just(float("inf")), st.dictionaries(st.just("__tock__"), st.integers(), min_size=1))


@given(st.dictionaries(st.text(min_size=1), json_like | tagged, max_size=5))
def test_values_come_back_as_they_were_passed(values):
    assert decode_values(encode_values(values, 1 << 20)) == values


def test_a_value_that_is_not_serializable_is_named_with_its_place():
    with pytest.raises(ValueNotSerializable, match=r"value 'k'\[0\]\['x'\] is a builtins.object"):
        encode_values({"k": [{"x": object()}]}, 1 << 20)


def test_values_over_the_limit_are_refused_with_their_size():
    with pytest.raises(ValueTooLarge, match="more than the 100 allowed"):
        encode_values({"k": "x" * 200}, 100)


def test_no_values_encode_to_nothing():
    assert encode_values({}, 10) == "" and decode_values("") == {}


def test_a_decimal_keeps_its_digits():
    assert decode_values(encode_values({"d": Decimal("1.10")}, 100))["d"].as_tuple() == Decimal("1.10").as_tuple()
