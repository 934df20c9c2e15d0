"""Params: tock.Param / ParamsDict as Airflow's, the one rule (schemas/params.py) the SDK, the API, the CLI
and the scheduler apply, the serialized format (and the old one), and the trigger form's inputs."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from schemas.params import ParamSpec, for_task, problems, specs, to_json, value_problems
from services.api.core import trigger_form
from tock import DAG, BashTask, DagDefinitionError, Param, ParamsDict, ParamValidationError, task

SCHEMAS = {
    "integer": {"type": "integer", "minimum": 0, "maximum": 20},
    "enum": {"enum": ["foo", "bar", 42]},
    "string": {"type": "string", "minLength": 2, "maxLength": 4},
    "nullable": {"type": ["null", "string"]},
    "date": {"type": "string", "format": "date"},
    "emails": {"type": "array", "items": {"type": "string", "format": "email"}},
    "object": {"type": "object", "required": ["k"]},
    "const": {"const": 3},
}


# -- Param and ParamsDict ---------------------------------------------------------------------

@pytest.mark.parametrize(("param", "value", "expected"), [
    (Param(5, type="integer", minimum=3), None, 5),
    (Param(5, type="integer", minimum=3), 7, 7),
    (Param("a", enum=["a", "b"]), "b", "b"),
    (Param(None, type=["null", "string"]), None, None),
    (Param({"k": 1}, schema={"type": "object"}), None, {"k": 1}),
    (Param("old way"), None, "old way"),
])
def test_a_value_that_fits_is_the_params_value(param, value, expected):
    assert (param.resolve() if value is None else param.resolve(value)) == expected
    assert param.value == expected


@pytest.mark.parametrize(("param", "value", "rule"), [
    (Param(5, type="integer", minimum=3), "abc", "'abc' is not of type 'integer'"),
    (Param(5, type="integer", minimum=3), 2, "2 is less than the minimum of 3"),
    (Param("a", enum=["a", "b"]), "c", "'c' is not one of ['a', 'b']"),
    (Param("ab", type="string", minLength=2), "a", "'a' is too short"),
    (Param("2024-01-01", type="string", format="date"), "2024-13-01", "'2024-13-01' is not a 'date'"),
    (Param(type="string"), None, "No value passed and Param has no default value"),
])
def test_a_value_that_breaks_a_rule_is_refused_naming_it(param, value, rule):
    with pytest.raises(ParamValidationError, match="^" + _escaped(rule)):
        param.resolve() if value is None else param.resolve(value)
    assert (param.resolve(suppress_exception=True) if value is None
            else param.resolve(value, suppress_exception=True)) is None


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


def test_a_value_that_is_not_json_is_refused():
    with pytest.raises(ParamValidationError, match="json-serializable"):
        Param(object())
    with pytest.raises(ParamValidationError, match="json-serializable"):
        Param(1).resolve({1, 2})


def test_params_dict_keeps_params_and_reading_a_key_resolves_it():
    params = ParamsDict({"x": Param(5, type="integer"), "plain": "hi"})
    assert (params["x"], params["plain"], len(params), "x" in params) == (5, "hi", 2, True)
    assert isinstance(params.get_param("plain"), Param) and all(isinstance(p, Param) for p in params.values())
    params["x"] = 9  # checked against x's schema
    assert params["x"] == 9
    with pytest.raises(ParamValidationError, match="Invalid input for param x: 'nine' is not of type 'integer'"):
        params["x"] = "nine"
    params["new"] = [1]  # a new key becomes a plain Param
    assert params.dump() == {"x": 9, "plain": "hi", "new": [1]} == params
    assert copy.deepcopy(params) == params and copy.copy(params) == params


def test_params_dict_validate_names_the_first_param_that_does_not_resolve():
    params = ParamsDict({"ok": 1, "who": Param(type="string")})
    with pytest.raises(ParamValidationError, match="Invalid input for param who: No value passed"):
        params.validate()
    assert params.dump() == {"ok": 1, "who": None}
    assert ParamsDict({"who": Param(type="string")}, suppress_exception=True).validate() == {"who": None}


def test_update_with_params_dict_takes_its_params_whole():
    params = ParamsDict({"x": Param(5, type="integer")})
    params.update(ParamsDict({"x": Param("s", type="string")}))
    assert params["x"] == "s"


# -- a DAG's and a task's params --------------------------------------------------------------

def test_dag_params_reach_the_definition_in_order_with_their_schemas():
    with DAG("p", params={"z": Param(5, type="integer", description="how many", title="Count"), "a": "x"}) as dag:
        BashTask("t", "echo", params={"t": Param(1, type="integer")})
    definition = dag.to_definition("/dags/p.py")
    declared = specs(definition.params_json)
    assert [spec.name for spec in declared] == ["z", "a"]  # declared order, not sorted
    assert declared[0] == ParamSpec("z", {"type": "integer", "title": "Count"}, "how many", True, 5)
    assert specs(definition.tasks[0].params_json) == [ParamSpec("t", {"type": "integer"}, None, True, 1)]
    assert dag.params["z"] == 5


def test_task_decorator_takes_params():
    with DAG("p") as dag:
        @task(params={"n": Param(2, type="integer")})
        def work():
            return None

        work()
    assert for_task(dag.to_definition("f").params_json, dag.to_definition("f").tasks[0].params_json, "{}") == {
        "n": 2}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"schedule": "@daily", "params": {"x": Param("a", type="integer")}},
     "param 'x': its default breaks its schema: 'a' is not of type 'integer'"),
    ({"schedule": "@daily", "params": {"x": Param(type="string")}}, "param 'x': it has no default"),
    ({"params": {"x": Param(1, type="integr")}}, "param 'x': invalid schema: at ['type']"),
    ({"params": {"x": Param(1, schema=[1])}}, "param 'x': the schema must be a JSON object"),
    ({"params": ["x"]}, "params must be a dict"),
    ({"params": {"x": {1, 2}}}, "json-serializable"),
])
def test_params_a_definition_cannot_use_are_refused_at_parse_time(kwargs, message):
    with pytest.raises(DagDefinitionError, match=_escaped(message)):
        with DAG("p", **kwargs):
            pass


def test_an_unscheduled_dag_may_leave_its_params_to_the_trigger_as_airflow_does():
    with DAG("p", params={"who": Param(type="string"), "id": Param(None, type="string")}) as dag:
        pass
    assert problems(dag.params_json, "{}") == ["param 'who': required: it has no default and the conf does not "
                                               "give it", "param 'id': None is not of type 'string'"]
    assert problems(dag.params_json, json.dumps({"who": "ada", "id": "7"})) == []


def test_a_task_param_with_an_invalid_schema_is_refused():
    with pytest.raises(DagDefinitionError, match="task 't': param 'n': invalid schema"):
        with DAG("p"):
            BashTask("t", "echo", params={"n": Param(1, type="nope")})


# -- problems() and for_task() ----------------------------------------------------------------

DAG_PARAMS = to_json([ParamSpec("x", SCHEMAS["integer"], None, True, 5), ParamSpec("who", {"type": "string"},
                                                                                    "required", False),
                      ParamSpec("free", {}, None, True, "d")])


@pytest.mark.parametrize(("conf", "expected"), [
    ({"who": "ada"}, []),
    ({"who": "ada", "x": 20, "extra": [1]}, []),
    ({"who": "ada", "x": "abc"}, ["param 'x': 'abc' is not of type 'integer'"]),
    ({"who": "ada", "x": 21}, ["param 'x': 21 is greater than the maximum of 20"]),
    ({"x": -1}, ["param 'x': -1 is less than the minimum of 0",
                 "param 'who': required: it has no default and the conf does not give it"]),
    ({"who": None}, ["param 'who': None is not of type 'string'"]),
])
def test_problems_name_the_param_and_the_rule(conf, expected):
    assert problems(DAG_PARAMS, json.dumps(conf)) == expected


@pytest.mark.parametrize(("conf_json", "expected"), [
    ("[1]", "the conf must be a JSON object, not list"), ("{", "the conf is not JSON"),
])
def test_a_conf_that_is_not_an_object_is_a_problem(conf_json, expected):
    assert problems(DAG_PARAMS, conf_json)[0].startswith(expected)


def test_nested_problems_say_where():
    assert value_problems(["a@b", 3], SCHEMAS["emails"]) == ["at [1]: 3 is not of type 'string'"]


def test_old_definitions_with_plain_values_are_params_with_those_defaults_and_no_schema():
    old = json.dumps({"n": 1, "s": "x"})
    assert specs(old) == [ParamSpec("n", {}, None, True, 1), ParamSpec("s", {}, None, True, "x")]
    assert problems(old, json.dumps({"n": "anything"})) == []
    assert for_task(old, "{}", "{}") == {"n": 1, "s": "x"}
    assert for_task("", "", "") == {}


@pytest.mark.parametrize("params_json", ["null", "3", '["x", {"no": "name"}]'])
def test_a_params_json_never_written_reads_as_no_params(params_json):
    assert specs(params_json) == [] and problems(params_json, "{}") == []


def test_for_task_merges_dag_then_task_then_conf():
    task_params = to_json([ParamSpec("x", {"type": "integer"}, None, True, 9), ParamSpec("t", {}, None, True, 1)])
    assert for_task(DAG_PARAMS, task_params, "{}") == {"x": 9, "who": None, "free": "d", "t": 1}
    assert for_task(DAG_PARAMS, task_params, json.dumps({"x": 3, "who": "ada", "c": True})) == {
        "x": 3, "who": "ada", "free": "d", "t": 1, "c": True}


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-5, 25) | st.floats(-50, 50, allow_nan=False)
                           | st.text(max_size=6) | st.sampled_from(["2024-01-31", "a@b", "foo", "bar", 42, 3, "ab"]),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("kxy"), inner,
                                                                                       max_size=3), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(SCHEMAS)), st.booleans(), JSON_VALUES, JSON_VALUES)
def test_problems_are_empty_exactly_when_jsonschema_accepts_each_value(name, in_conf, value, default):
    """One param (a default, and a conf that gives it or not): no problem exactly when jsonschema
    accepts the value the run would have."""
    params = to_json([ParamSpec(name, SCHEMAS[name], None, True, default)])
    conf = {name: value} if in_conf else {}
    accepted = jsonschema.Draft202012Validator(SCHEMAS[name], format_checker=jsonschema.FormatChecker()).is_valid(
        value if in_conf else default)
    event("accepted" if accepted else "refused")  # (both are drawn often: --hypothesis-show-statistics)
    assert (problems(params, json.dumps(conf)) == []) == accepted


# -- the trigger form -------------------------------------------------------------------------

FORM_PARAMS = [ParamSpec("n", {"type": "integer", "title": "How many"}, "a count", True, 3),
               ParamSpec("flag", {}, None, True, True),
               ParamSpec("color", {"enum": ["red", 42], "values_display": {"red": "Red!"}}, None, True, "red"),
               ParamSpec("cfg", {"type": "object"}, None, True, {"a": 1}),
               ParamSpec("day", {"type": "string", "format": "date"}, None, False),
               ParamSpec("name", {"type": ["null", "string"], "examples": ["ada"]}, None, True, None),
               ParamSpec("fixed", {"const": 1}, None, True, 1)]


def test_each_param_gets_an_input_of_its_kind_holding_its_default():
    shown = {field.name: field for field in trigger_form.fields(FORM_PARAMS)}
    assert "fixed" not in shown  # const: sent with its default, not shown
    assert [(f.kind, f.text) for f in shown.values()] == [
        ("integer", "3"), ("checkbox", "true"), ("select", '"red"'), ("json", '{\n  "a": 1\n}'), ("date", ""),
        ("text", "")]
    assert (shown["n"].label, shown["n"].description, shown["day"].required) == ("How many", "a count", True)
    assert shown["color"].options == [('"red"', "Red!"), ("42", "42")] and shown["name"].examples == ["ada"]


def test_a_posted_form_makes_the_conf_and_keeps_what_could_not_be_read():
    posted = {"param.n": "abc", "param.color": "42", "param.cfg": "{bad", "param.day": "2024-01-31",
              "param.name": ""}  # flag unchecked: not posted
    conf, unreadable = trigger_form.conf_from(FORM_PARAMS, posted, '{"extra": 1, "n": "x"}')
    assert conf == {"n": "x", "flag": False, "color": 42, "cfg": "{bad", "day": "2024-01-31", "name": None,
                    "extra": 1}
    assert list(unreadable) == ["cfg"] and unreadable["cfg"][0].startswith("not JSON")
    conf, _ = trigger_form.conf_from(FORM_PARAMS, {**posted, "param.cfg": "{}"}, "{}")
    assert trigger_form.problems_by_param(FORM_PARAMS, conf) == {"n": ["'abc' is not of type 'integer'"]}
    again = {field.name: field.text for field in trigger_form.fields(FORM_PARAMS, posted)}
    assert again["n"] == "abc" and again["cfg"] == "{bad"  # shown again as typed
    assert trigger_form.conf_from(FORM_PARAMS, {}, "[1]")[1][""] == ["the conf must be a JSON object"]


# -- tock dags test / tasks test --------------------------------------------------------------

@pytest.mark.parametrize("command", [["dags", "test", "example_params"], ["tasks", "test", "example_params", "greet"]])
def test_local_runs_refuse_a_conf_the_params_refuse(command, tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples" / "dags" / "params.py"
    done = subprocess.run([sys.executable, "-m", "tock_cli", *command, "--file", str(example), "--conf",
                           json.dumps({"count": "abc"})], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "TOCK_HOME": str(tmp_path),
                               "PYTHONPATH": str(example.parents[2])})
    assert done.returncode == 2, done.stderr
    assert "param 'count': 'abc' is not of type 'integer'" in done.stderr
