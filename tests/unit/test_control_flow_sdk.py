"""The authoring side of control flow: what the SDK puts in the definition for trigger rules, the
operators that choose, task groups, setup/teardown and chains; its errors; and ``followed``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tock import (
    DAG,
    AirflowSkipException,
    BashTask,
    BranchPythonOperator,
    DagDefinitionError,
    EmptyOperator,
    LatestOnlyOperator,
    PythonOperator,
    ShortCircuitOperator,
    TaskGroup,
    TriggerRule,
    chain,
    cross_downstream,
    setup,
    task,
    task_group,
    teardown,
)
from tock.branching import followed
from tock.exceptions import AirflowSkipException as SkipFromModule
from tock.operators import is_latest_run
from tock.tasks import ID_PATTERN


def _defs(dag):
    return {item.task_id: item for item in dag.to_definition("f.py").tasks}


def _noop():
    return None


# -- trigger rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rule", list(TriggerRule) + [rule.value for rule in TriggerRule])
def test_every_trigger_rule_member_or_string_reaches_the_definition(rule):
    with DAG("rules") as dag:
        EmptyOperator(task_id="e", trigger_rule=rule)
        BashTask("b", "true", trigger_rule=rule)
        task(trigger_rule=rule)(_noop)()
    defs = _defs(dag)
    assert {defs[key].trigger_rule for key in ("e", "b", "_noop")} == {str(rule)}


def test_the_default_trigger_rule_is_all_success_and_the_enum_is_airflows():
    with DAG("default") as dag:
        EmptyOperator(task_id="e")
    assert _defs(dag)["e"].trigger_rule == "all_success"
    assert TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS == "none_failed_min_one_success"
    assert len(TriggerRule) == 13 and TriggerRule.is_valid("always") and not TriggerRule.is_valid("dummy")


@pytest.mark.parametrize("rule", ["dummy", "ALL_SUCCESS", "", 3, None.__class__])
def test_an_unknown_trigger_rule_is_refused_listing_the_valid_ones(rule):
    with pytest.raises(DagDefinitionError, match=r"task 'e': unknown trigger_rule .* \(valid: all_success, "
                                                 r"all_failed.*always\)"):
        with DAG("bad"):
            EmptyOperator(task_id="e", trigger_rule=rule)


def test_the_skip_exception_is_one_class_from_tock_and_its_module():
    assert AirflowSkipException is SkipFromModule and issubclass(AirflowSkipException, Exception)


# -- operators that choose, and EmptyOperator ------------------------------------------------------

def test_python_operators_carry_callable_arguments_and_what_they_choose():
    with DAG("ops") as dag:
        plain = PythonOperator(task_id="plain", python_callable=_noop, op_args=[1], op_kwargs={"a": 2},
                               templates_dict={"x": "{{ ds }}"})
        branch = BranchPythonOperator(task_id="branch", python_callable=_noop)
        short = ShortCircuitOperator(task_id="short", python_callable=_noop, ignore_downstream_trigger_rules=False)
        empty = EmptyOperator(task_id="empty")
        latest = LatestOnlyOperator(task_id="latest")
    defs = _defs(dag)
    assert plain.op_args == [1] and plain.op_kwargs == {"a": 2} and plain.templates_dict == {"x": "{{ ds }}"}
    assert isinstance(branch, PythonOperator) and isinstance(short, PythonOperator)
    assert [defs[key].chooses for key in ("plain", "branch", "short", "empty", "latest")] == [
        "", "branch", "short_circuit", "", "branch"]
    assert defs["short"].ignore_downstream_trigger_rules is False and defs["branch"].ignore_downstream_trigger_rules
    assert defs["empty"].kind == "empty" and empty.template_fields == ()
    assert defs["latest"].kind == "python" and latest.python_callable is not None
    assert plain.multiple_outputs is False


def test_task_branch_and_short_circuit_decorators_choose():
    with DAG("decorated") as dag:
        @task.branch
        def pick():
            return "a"

        @task.short_circuit(ignore_downstream_trigger_rules=False)
        def check():
            return False

        pick(), check()
    defs = _defs(dag)
    assert (defs["pick"].chooses, defs["check"].chooses) == ("branch", "short_circuit")
    assert defs["check"].ignore_downstream_trigger_rules is False
    assert pick() == "a"  # outside a DAG: the plain function


def test_a_python_operator_needs_a_callable():
    with pytest.raises(TypeError, match="PythonOperator 'p': python_callable must be callable"):
        with DAG("bad"):
            PythonOperator(task_id="p", python_callable="nope")


# -- followed --------------------------------------------------------------------------------------

def _branch_dag():
    with DAG("branchy") as dag:
        branch = BranchPythonOperator(task_id="branch", python_callable=_noop)
        a, b, join = (EmptyOperator(task_id=name) for name in ("a", "b", "join"))
        with TaskGroup("grp") as grp:
            first = EmptyOperator(task_id="first")
            first >> EmptyOperator(task_id="second")
        far = EmptyOperator(task_id="far")
        branch >> [a, b, join, grp]
        a >> join
        b >> far
    return dag, branch


@pytest.mark.parametrize(("returned", "expected"), [
    (None, []),
    ("a", ["a", "join"]),  # Airflow's join rule: join is downstream of the chosen a
    (["b"], ["b"]),
    (("a", "b"), ["a", "b", "join"]),
    ({"b", "join"}, ["b", "join"]),
    ("grp", ["grp.first"]),  # a group id stands for its roots
    ("grp.second", []),  # valid (a task of the DAG) but not a direct downstream task
    ("far", []),
    ((item for item in ["a"]), ["a", "join"]),
])
def test_a_branch_follows_its_chosen_direct_downstream_tasks(returned, expected):
    _dag, branch = _branch_dag()
    assert followed(branch, returned) == expected


@pytest.mark.parametrize(("returned", "message"), [
    ("nope", r"branch task 'branch' of DAG 'branchy' returned 'nope', which is neither a task id nor a task "
             r"group id of the DAG \(its downstream tasks: a, b, grp.first, join\)"),
    (["a", "missing"], "returned 'missing'"),
    (["a", 3], r"every item must be a task id or a task group id \(a string\), not 3"),
    (42, r"returned 42 \(a int\): a branch returns None"),
])
def test_a_branch_value_that_names_nothing_raises_naming_the_task_and_value(returned, message):
    _dag, branch = _branch_dag()
    with pytest.raises(ValueError, match=message):
        followed(branch, returned)


def test_a_short_circuit_follows_everything_or_nothing_and_other_tasks_choose_nothing():
    with DAG("short") as dag:
        short = ShortCircuitOperator(task_id="short", python_callable=_noop)
        plain = EmptyOperator(task_id="plain")
        short >> plain
    assert followed(short, True) is None and followed(short, [0]) is None
    assert followed(short, False) == [] and followed(short, None) == [] and followed(short, []) == []
    assert followed(plain, "anything") is None
    assert dag.tasks["short"].downstream_task_ids == {"plain"}


@pytest.mark.parametrize(("run_type", "now", "latest"), [
    ("scheduled", 1.5 * 86400, True),  # inside the next run's interval (day 1, day 2]
    ("scheduled", 2.0 * 86400, True),
    ("scheduled", 2.5 * 86400, False),  # a later run exists: not the latest
    ("scheduled", 0.5 * 86400, False),
    ("backfill", 30 * 86400, False),
    ("manual", 30 * 86400, True),  # Airflow: a manual run is always latest
])
def test_latest_only_follows_airflows_rule(run_type, now, latest):
    assert is_latest_run(run_type, 86400.0, "@daily", "UTC", now) is latest


def test_latest_only_without_a_next_run_is_latest():
    assert is_latest_run("scheduled", 86400.0, None, "UTC", 1e12)
    assert is_latest_run("scheduled", 86400.0, "@once", "UTC", 1e12)
    assert is_latest_run("scheduled", None, "@daily", "UTC", 1e12)


def test_latest_only_runs_through_dag_test_and_follows_a_manual_run():
    with DAG("latest", schedule="@daily", start_date=datetime(2024, 1, 1, tzinfo=UTC)) as dag:
        latest = LatestOnlyOperator(task_id="latest")
        latest >> EmptyOperator(task_id="after")
    run = dag.test()
    assert run.task_instance("latest").return_value == ["after"]


# -- chain, cross_downstream, >> and << ------------------------------------------------------------

def _upstreams(dag):
    return {task_id: sorted(item.upstream) for task_id, item in _defs(dag).items()}


def test_chain_links_tasks_lists_pairwise_groups_and_values():
    with DAG("chains") as dag:
        a, b, c, d, e, f = (EmptyOperator(task_id=name) for name in "abcdef")

        @task
        def value():
            return 1

        v = value()
        with TaskGroup("g") as group:
            EmptyOperator(task_id="in1") >> EmptyOperator(task_id="in2")
        chain(a, [b, c], [d, e], f, v["k"], group)
    assert _upstreams(dag) == {"a": [], "b": ["a"], "c": ["a"], "d": ["b"], "e": ["c"], "f": ["d", "e"],
                               "value": ["f"], "g.in1": ["value"], "g.in2": ["g.in1"]}


def test_chain_refuses_lists_of_different_lengths_and_things_that_are_not_tasks():
    with DAG("bad"):
        a, b, c = (EmptyOperator(task_id=name) for name in "abc")
        with pytest.raises(ValueError, match="Chain not supported for different length Iterable. Got 2 and 1."):
            chain([a, b], [c])
        with pytest.raises(TypeError, match="Chain not supported between instances of int and list"):
            chain(1, [a])
        with pytest.raises(TypeError, match="dependencies link tasks, their values and task groups, not 'x'"):
            chain(a, "x")


def test_cross_downstream_links_every_pair():
    with DAG("cross") as dag:
        a, b, c, d = (EmptyOperator(task_id=name) for name in "abcd")
        cross_downstream([a, b], [c, d])
    assert _upstreams(dag) == {"a": [], "b": [], "c": ["a", "b"], "d": ["a", "b"]}


def test_shift_operators_work_on_groups_and_lists_on_either_side():
    with DAG("shifts") as dag:
        start, end, other = (EmptyOperator(task_id=name) for name in ("start", "end", "other"))
        with TaskGroup("g") as group:
            one, two = EmptyOperator(task_id="one"), EmptyOperator(task_id="two")
        [start, other] >> group
        end << group
        with TaskGroup("h") as second:
            EmptyOperator(task_id="x")
        group >> [second]
    ups = _upstreams(dag)
    assert ups["g.one"] == ups["g.two"] == ["other", "start"]
    assert ups["end"] == ["g.one", "g.two"] and ups["h.x"] == ["g.one", "g.two"]
    assert one.label == "one" and two.task_group is group


def test_an_empty_group_is_no_dependency_end():
    with pytest.raises(DagDefinitionError, match="task group 'empty' has no tasks: it cannot be a dependency end"):
        with DAG("empty"):
            start = EmptyOperator(task_id="start")
            with TaskGroup("empty") as group:
                pass
            start >> group


# -- task groups -----------------------------------------------------------------------------------

def test_nested_groups_prefix_ids_and_are_recorded_parent_first():
    with DAG("groups") as dag:
        with TaskGroup("outer", tooltip="the outside") as outer:
            EmptyOperator(task_id="a")
            with TaskGroup("inner"):
                EmptyOperator(task_id="b")
            with TaskGroup("flat", prefix_group_id=False):
                EmptyOperator(task_id="c")
        EmptyOperator(task_id="top")
    definition = dag.to_definition("f.py")
    groups = [(item.group_id, item.parent_id, item.tooltip) for item in definition.task_groups]
    assert groups == [("outer", "", "the outside"), ("outer.inner", "outer", ""), ("outer.flat", "outer", "")]
    assert {item.task_id: item.task_group for item in definition.tasks} == {
        "outer.a": "outer", "outer.inner.b": "outer.inner", "c": "outer.flat", "top": ""}
    assert [item.task_id for item in outer.tasks] == ["outer.a", "outer.inner.b", "c"]


def test_group_default_args_fill_options_a_task_does_not_set():
    with DAG("defaults", retries=1) as dag:
        with TaskGroup("g", default_args={"retries": 4, "trigger_rule": "all_done", "templates_dict": {"a": 1}}):
            EmptyOperator(task_id="takes")
            EmptyOperator(task_id="own", retries=0)
            BashTask("bash", "true")  # a Python-only option does not reach a bash task
            with TaskGroup("inner", default_args={"queue": "slow"}):
                task(_noop)()
    defs = _defs(dag)
    assert (defs["g.takes"].retries, defs["g.takes"].trigger_rule) == (4, "all_done")
    assert defs["g.own"].retries == 0 and defs["g.bash"].retries == 4
    assert (defs["g.inner._noop"].queue, defs["g.inner._noop"].retries) == ("slow", 4)
    assert dag.tasks["g.inner._noop"].templates_dict == {"a": 1}


@pytest.mark.parametrize(("build", "message"), [
    (lambda: TaskGroup("g", default_args={"sla": 60, "retries": 1}),
     r"task group 'g': default_args has 'sla', which is not a task option"),
    (lambda: TaskGroup("a.b"), r"task group id 'a.b' must be letters, digits, '_' and '-' \(no dots\)"),
    (lambda: (TaskGroup("g"), TaskGroup("g")), "task group id 'g' has already been added to the DAG"),
    (lambda: (EmptyOperator(task_id="g"), TaskGroup("g")), "task group id 'g' has already been added"),
    (lambda: (TaskGroup("g"), EmptyOperator(task_id="g")), "task id 'g' is the id of a task group"),
    (lambda: TaskGroup("g", prefix_group_id="yes"), "prefix_group_id must be True or False"),
])
def test_group_mistakes_are_refused_naming_them(build, message):
    with pytest.raises(DagDefinitionError, match=message):
        with DAG("bad"):
            build()


def test_a_group_outside_a_dag_is_refused():
    with pytest.raises(RuntimeError, match=r"task group 'g' must be created inside a `with DAG\(...\)` block"):
        TaskGroup("g")


def test_task_group_decorator_returns_the_group_or_what_the_function_returns():
    with DAG("decorated") as dag:
        @task_group
        def load():
            """Loads the rows."""
            EmptyOperator(task_id="x") >> EmptyOperator(task_id="y")

        @task_group(group_id="picked")
        def pick():
            return EmptyOperator(task_id="last")

        first, second, returned = load(), load(), pick()
        start = EmptyOperator(task_id="start")
        start >> first
        returned >> EmptyOperator(task_id="end")
    assert isinstance(first, TaskGroup) and (first.group_id, second.group_id) == ("load", "load__1")
    assert first.tooltip == "Loads the rows."
    ups = _upstreams(dag)
    assert ups["load.x"] == ["start"] and ups["end"] == ["picked.last"]


def test_task_group_refuses_an_unknown_option_at_the_decorator():
    with pytest.raises(TypeError):
        task_group(colour="red")(_noop)


def test_decorated_tasks_in_a_group_get_unique_prefixed_ids():
    with DAG("unique") as dag:
        with TaskGroup("g"):
            work = task(_noop)
            work(), work()
    assert sorted(dag.tasks) == ["g._noop", "g._noop__1"]


# -- setup and teardown ----------------------------------------------------------------------------

def test_as_teardown_marks_links_and_fixes_the_trigger_rule():
    with DAG("st") as dag:
        create, work, delete = (EmptyOperator(task_id=name) for name in ("create", "work", "delete"))
        create >> work >> delete.as_teardown(setups=create, on_failure_fail_dagrun=True)
    defs = _defs(dag)
    assert defs["create"].is_setup and defs["delete"].is_teardown and defs["delete"].on_failure_fail_dagrun
    assert defs["delete"].trigger_rule == "all_done_setup_success"
    assert defs["delete"].upstream == ["create", "work"]


def test_setup_and_teardown_decorators_and_the_context_manager():
    with DAG("ctx") as dag:
        @setup
        def make():
            return 1

        @teardown(on_failure_fail_dagrun=True)
        @task(retries=2)
        def drop():
            return 1

        with make() >> drop():
            first = EmptyOperator(task_id="first")
            first >> EmptyOperator(task_id="second")
    ups = _upstreams(dag)
    assert ups == {"make": [], "drop": ["make", "second"], "first": ["make"], "second": ["first"]}
    defs = _defs(dag)
    assert defs["drop"].retries == 2 and defs["drop"].on_failure_fail_dagrun and defs["make"].is_setup
    assert defs["second"].setups == ["make"] and defs["first"].setups == []


@pytest.mark.parametrize(("build", "kind", "message"), [
    (lambda: teardown(task(trigger_rule="all_success")(_noop))(), ValueError,
     "Trigger rule not configurable for teardown tasks."),
    (lambda: EmptyOperator(task_id="t", trigger_rule="one_success").as_teardown(), DagDefinitionError,
     "task 't' has trigger_rule 'one_success': Trigger rule not configurable for teardown tasks."),
    (lambda: EmptyOperator(task_id="t").as_setup().as_teardown(), DagDefinitionError,
     "task 't' is a setup: it cannot also be a teardown"),
    (lambda: EmptyOperator(task_id="t").__enter__(), DagDefinitionError,
     "Only setup/teardown tasks can be used as context managers."),
    (lambda: setup(task_group(_noop)), TypeError, "Task groups cannot be marked as setup or teardown."),
    (lambda: EmptyOperator(task_id="s").as_setup() >> EmptyOperator(task_id="w", trigger_rule="all_done"),
     DagDefinitionError, "Setup tasks must be followed with trigger rule ALL_SUCCESS: setup 's' is followed by 'w'"),
])
def test_setup_teardown_mistakes_are_refused(build, kind, message):
    with pytest.raises(kind, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        with DAG("bad"):
            build()


def test_relevant_setups_follow_airflows_rule():
    with DAG("shapes") as dag:
        names = ("s1", "s2", "plain_setup", "a", "b", "c", "t1", "outside")
        s1, s2, plain_setup, a, b, c, t1, outside = (EmptyOperator(task_id=name) for name in names)
        s1.as_setup() >> s2.as_setup() >> a >> b >> c
        plain_setup.as_setup() >> a
        t1.as_teardown(setups=[s1])
        b >> t1
        c >> outside
    defs = _defs(dag)
    # s1's teardown t1 is downstream of a and b, not of c: c runs outside s1. s2 and plain_setup have
    # no teardown, so they are relevant to everything after them. Direct upstreams are not listed.
    assert defs["a"].setups == ["s1"]
    assert defs["b"].setups == ["plain_setup", "s1", "s2"]
    assert defs["c"].setups == ["plain_setup", "s2"]
    assert defs["s2"].setups == [] and defs["t1"].setups == []
    assert defs["outside"].setups == ["plain_setup", "s2"]


def test_a_group_ending_in_a_teardown_is_left_by_its_work():
    with DAG("leaves") as dag:
        with TaskGroup("g") as group:
            make = EmptyOperator(task_id="make").as_setup()
            work = EmptyOperator(task_id="work")
            drop = EmptyOperator(task_id="drop")
            make >> work >> drop.as_teardown(setups=make)
        group >> EmptyOperator(task_id="after")
    assert [item.task_id for item in group.leaves] == ["g.work"]
    assert _upstreams(dag)["after"] == ["g.work"]


# -- properties ------------------------------------------------------------------------------------

segments = st.lists(st.one_of(st.integers(1, 3), st.just(0)), min_size=1, max_size=6)


def _build(shape, grouped):
    """A DAG chained from ``shape``: 0 is a one-task group, n > 0 a list of n tasks (or a task)."""
    with DAG("prop") as dag:
        parts = []
        for index, size in enumerate(shape):
            if size == 0 or grouped:
                with TaskGroup(f"g{index}") as group:
                    EmptyOperator(task_id=f"t{index}")
                parts.append(group)
            elif size == 1:
                parts.append(EmptyOperator(task_id=f"t{index}"))
            else:
                parts.append([EmptyOperator(task_id=f"t{index}_{n}") for n in range(size)])
        _chain_safely(parts)
    return dag


def _chain_safely(parts):
    for up, down in zip(parts, parts[1:], strict=False):
        if isinstance(up, list) and isinstance(down, list) and len(up) != len(down):
            EmptyOperator(task_id=f"join_{id(up)}") >> down
            chain(up, EmptyOperator(task_id=f"bridge_{id(up)}"), down)
        else:
            chain(up, down)


@settings(max_examples=60, deadline=None)
@given(segments, st.booleans())
def test_random_chains_and_groups_give_acyclic_definitions_with_valid_ids(shape, grouped):
    dag = _build(shape, grouped)
    definition = dag.to_definition("f.py")  # validates: no cycle
    ids = {item.task_id for item in definition.tasks}
    assert all(ID_PATTERN.match(task_id) for task_id in ids)
    assert all(set(item.upstream) <= ids for item in definition.tasks)
    assert {item.task_group for item in definition.tasks} - {""} <= {item.group_id for item in definition.task_groups}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "join", "grp", "grp.first", "far"]), max_size=5))
def test_followed_returns_only_direct_downstream_ids_sorted(chosen):
    _dag, branch = _branch_dag()
    answer = followed(branch, chosen)
    assert answer == sorted(answer) and set(answer) <= branch.downstream_task_ids
    assert set(chosen) & branch.downstream_task_ids <= set(answer)


def test_airflow_fail_exception_fails_the_run_with_no_retry_and_airflow_exception_is_retried():
    from tock import AirflowException, AirflowFailException
    from tock_cli.local_run import run_dag

    with DAG("failing", retries=2, retry_delay=0) as dag:
        @task
        def for_good():
            raise AirflowFailException("no retry helps")

        @task
        def flaky(ti=None):
            if ti.try_number < 2:
                raise AirflowException("away")
            return ti.try_number

        for_good()
        flaky()
    lines: list[str] = []
    assert run_dag(dag, report=lines.append).state == "failed"
    assert [line.split(":")[0] for line in lines if line.startswith("[for_good] try")] == ["[for_good] try 1"] * 2
    assert any(line.startswith("[flaky] try 2: success") for line in lines), lines
    assert issubclass(AirflowFailException, AirflowException) and issubclass(AirflowSkipException, AirflowException)
