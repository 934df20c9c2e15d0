"""``pool`` and ``pool_slots`` as DAG files write them (issue 24): recorded in the task's definition,
default_pool meaning no pool, given by default_args too, and a wrong value refused naming it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tock import DAG, BashTask, DagDefinitionError, task


def definitions(dag: DAG) -> dict:
    return {item.task_id: (item.pool, item.pool_slots) for item in dag.to_definition("/dags/x.py").tasks}


def test_the_pool_and_its_slots_are_in_the_definition():
    with DAG("pooled", schedule=None, default_args={"pool": "warehouse"}) as dag:
        @task(pool="db", pool_slots=2)
        def load() -> None: ...

        load()
        BashTask("by_default", "true")
        BashTask("none", "true", pool="default_pool")
    assert definitions(dag) == {"load": ("db", 2), "by_default": ("warehouse", 1), "none": ("", 1)}


@pytest.mark.parametrize("options, words", [({"pool": ".db"}, "pool must be"), ({"pool_slots": 0}, "pool_slots"),
                                            ({"pool_slots": True}, "pool_slots"), ({"pool": 3}, "pool must be")])
def test_a_wrong_pool_is_refused_naming_it(options, words):
    with pytest.raises((DagDefinitionError, ValueError, TypeError), match=words), DAG("pooled", schedule=None):
        BashTask("t", "true", **options)


@given(st.one_of(st.text(max_size=8), st.none(), st.integers()), st.one_of(st.integers(-3, 5), st.booleans()))
def test_any_pool_is_taken_or_refused_with_an_error(pool, slots):
    try:
        with DAG("pooled", schedule=None) as dag:
            BashTask("t", "true", pool=pool, pool_slots=slots)
    except (DagDefinitionError, ValueError, TypeError):
        return
    [(name, count)] = definitions(dag).values()
    assert count >= 1 and (name == "" or name == pool)
