"""Templated fields rendered as Airflow renders them: tock.templating.render_template_fields."""

from __future__ import annotations

import json
import os
import textwrap
from collections import namedtuple
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tock import DAG, BashTask, DagDefinitionError, TemplateRenderError, load_dags, macros, render_template_fields, task
from tock.templating import RECORD_LIMIT, rendered_for_record

LOGICAL = datetime(2024, 3, 9, 6, 30, 5, tzinfo=UTC)
Point = namedtuple("Point", "x y")


class Unrenderable:
    """An object of user code that is not a template (like an upstream task's value to resolve)."""


def context(**overrides: Any) -> dict[str, Any]:
    """A context as the runner builds it; var and conn are stand-ins with the same attributes."""
    values: dict[str, Any] = {
        "ds": "2024-03-09", "ds_nodash": "20240309", "ts": LOGICAL.isoformat(), "ts_nodash": "20240309T063005",
        "ts_nodash_with_tz": "20240309T063005+0000", "logical_date": LOGICAL,
        "data_interval_start": LOGICAL - timedelta(days=1), "data_interval_end": LOGICAL,
        "params": {"x": "ex", "n": 3}, "run_id": "scheduled__2024-03-09",
        "dag_run": SimpleNamespace(conf={"k": "from conf"}, run_id="scheduled__2024-03-09", run_type="scheduled",
                                   logical_date=LOGICAL),
        "macros": macros,
        "var": SimpleNamespace(value=SimpleNamespace(x="variable x"), json=SimpleNamespace(cfg={"a": [1, 2]})),
        "conn": SimpleNamespace(db=SimpleNamespace(host="db.local", port=5432, login="me")),
    }
    return values | overrides


def bash(command: str, **fields: Any) -> dict[str, Any]:
    dag_arguments = fields.pop("dag_arguments", {})
    with DAG("templated", **dag_arguments):
        made = BashTask("t", command, **fields)
    return render_template_fields(made, context())


def python(*args: Any, templates_dict: dict[str, Any] | None = None, dag_arguments: dict[str, Any] | None = None,
           **kwargs: Any) -> dict[str, Any]:
    with DAG("templated", **(dag_arguments or {})):
        @task(templates_dict=templates_dict)
        def work(*_args: Any, **_kwargs: Any) -> None:
            return None
        made = work(*args, **kwargs)
    return render_template_fields(made, context())


def failure(render: Any) -> TemplateRenderError:
    with pytest.raises(TemplateRenderError) as caught:
        render()
    return caught.value


@pytest.mark.parametrize(("template", "rendered"), [
    ("echo {{ ds }}", "echo 2024-03-09"),
    ("echo {{ ds_nodash }} {{ ts }} {{ ts_nodash }} {{ ts_nodash_with_tz }}",
     "echo 20240309 2024-03-09T06:30:05+00:00 20240309T063005 20240309T063005+0000"),
    ("echo {{ params.x }} {{ params.n + 1 }}", "echo ex 4"),
    ("echo {{ dag_run.conf['k'] }} {{ dag_run.run_type }} {{ run_id }}",
     "echo from conf scheduled scheduled__2024-03-09"),
    ("echo {{ macros.ds_add(ds, 1) }} {{ macros.ds_add(ds, -9) }}", "echo 2024-03-10 2024-02-29"),
    ("echo {{ macros.ds_format(ds, '%Y-%m-%d', '%d/%m/%y') }}", "echo 09/03/24"),
    ("echo {{ (logical_date + macros.timedelta(days=1)) | ds }}", "echo 2024-03-10"),
    ("echo {{ macros.datetime(2020, 1, 2) | ds_nodash }}", "echo 20200102"),
    ("echo {{ (logical_date - macros.dateutil.relativedelta.relativedelta(months=1)) | ds }}", "echo 2024-02-09"),
    ("echo {{ macros.json.dumps(var.json.cfg) }}", 'echo {"a": [1, 2]}'),
    ("echo {{ var.value.x }}", "echo variable x"),
    ("echo {{ var.json.cfg.a[1] }}", "echo 2"),
    ("psql -h {{ conn.db.host }} -p {{ conn.db.port }}", "psql -h db.local -p 5432"),
    ("echo {{ data_interval_start | ds }}..{{ data_interval_end | ts }}", "echo 2024-03-08..2024-03-09T06:30:05+00:00"),
    ("echo {{ logical_date | ts_nodash_with_tz }} {{ logical_date | ts_nodash }}",
     "echo 20240309T063005+0000 20240309T063005"),
    ("{% for i in range(3) %}{{ i }}{% endfor %}", "012"),
    ("{% set xs = [] %}{% do xs.append(ds) %}{{ xs | join(',') }}", "2024-03-09"),  # Airflow loads jinja2.ext.do
    ("echo {{ ds }}\n", "echo 2024-03-09\n"),  # a final newline is kept
    ("echo 'no template' {}\r\n", "echo 'no template' {}\r\n"),  # nor is a string that is not a template touched
])
def test_a_bash_command_renders_against_the_context(template, rendered):
    assert bash(template)["bash_command"] == rendered


def test_a_bash_task_renders_its_three_fields_env_keys_kept():
    rendered = bash("run {{ ds }}", env={"DAY": "{{ ds_nodash }}", "{{ KEY }}": "plain"}, cwd="/data/{{ params.x }}")
    assert rendered == {"bash_command": "run 2024-03-09", "env": {"DAY": "20240309", "{{ KEY }}": "plain"},
                        "cwd": "/data/ex"}
    assert list(rendered) == ["bash_command", "env", "cwd"]


def test_a_bash_task_without_env_or_cwd_renders_them_as_none():
    assert bash("true") == {"bash_command": "true", "env": None, "cwd": None}


def test_airflows_spelling_bash_command_and_append_env():
    with DAG("spelling"):
        made = BashTask(task_id="t", bash_command="echo {{ ds }}", env={"A": "1"}, append_env=True)
    assert made.command == "echo {{ ds }}" and made.bash_command == made.command and made.append_env is True
    assert render_template_fields(made, context())["bash_command"] == "echo 2024-03-09"


def test_a_python_task_renders_op_args_op_kwargs_and_templates_dict():
    rendered = python("{{ ds }}", 7, when="{{ ts_nodash }}", templates_dict={"query": "select '{{ ds }}'"})
    assert rendered == {"templates_dict": {"query": "select '2024-03-09'"}, "op_args": ["2024-03-09", 7],
                        "op_kwargs": {"when": "20240309T063005"}}
    assert list(rendered) == ["templates_dict", "op_args", "op_kwargs"]


def test_a_python_task_without_templates_dict_renders_it_as_none():
    assert python() == {"templates_dict": None, "op_args": [], "op_kwargs": {}}


@pytest.mark.parametrize(("value", "rendered"), [
    (["{{ ds }}", ["{{ params.n }}"]], ["2024-03-09", ["3"]]),
    (("{{ ds }}", 1), ("2024-03-09", 1)),
    (Point("{{ ds }}", "{{ params.x }}"), Point("2024-03-09", "ex")),
    ({"{{ ds }}", "b"}, {"2024-03-09", "b"}),
    (frozenset({"{{ ds }}"}), frozenset({"2024-03-09"})),
    ({"{{ key }}": {"inner": ("{{ ds }}",)}}, {"{{ key }}": {"inner": ("2024-03-09",)}}),
    (3, 3), (2.5, 2.5), (None, None), (True, True), (b"{{ ds }}", b"{{ ds }}"),
])
def test_collections_render_element_by_element_and_other_values_stay(value, rendered):
    result = python(value)["op_args"][0]
    assert result == rendered and type(result) is type(rendered)


def test_objects_that_are_not_templates_come_back_as_the_very_same_object():
    opaque, when = Unrenderable(), datetime(2020, 1, 1)
    with DAG("refs"):
        upstream = BashTask("up", "true")

        @task
        def work(*_args: Any, **_kwargs: Any) -> None:
            return None
        made = work(opaque, [upstream], value=when)
    rendered = render_template_fields(made, context())
    assert rendered["op_args"][0] is opaque and rendered["op_args"][1][0] is upstream
    assert rendered["op_kwargs"]["value"] is when


def test_a_list_that_holds_itself_renders_without_recursing_forever():
    looped: list[Any] = ["{{ ds }}"]
    looped.append(looped)
    rendered = python(looped)["op_args"][0]
    assert rendered[0] == "2024-03-09" and rendered[1] is looped


def test_user_defined_macros_and_filters_and_the_context_over_them():
    arguments = {"user_defined_macros": {"env_name": "prod", "shout": str.upper, "ds": "macro's ds"},
                 "user_defined_filters": {"twice": lambda text: text * 2}}
    rendered = bash("{{ shout(env_name) }} {{ 'ab' | twice }} {{ ds }}", dag_arguments=arguments)
    assert rendered["bash_command"] == "PROD abab 2024-03-09"  # the context wins over a macro of that name


def test_macros_are_there_even_if_the_context_lacks_them():
    with DAG("bare"):
        made = BashTask("t", "{{ macros.ds_add('2024-01-31', 1) }}")
    assert render_template_fields(made, {})["bash_command"] == "2024-02-01"


# Template files: next to the DAG file, in template_searchpath.
def dag_file(folder: Path, source: str) -> Path:
    path = folder / "dag.py"
    path.write_text(textwrap.dedent(source))
    return path


def render_file_task(path: Path, task_id: str = "t") -> dict[str, Any]:
    [dag] = load_dags(path)
    return render_template_fields(dag.tasks[task_id], context())


def test_a_command_ending_in_sh_is_a_template_file_next_to_the_dag_file(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.sh").write_text("echo {{ ds }}\necho {{ params.x }}\n")
    (tmp_path / "other.bash").write_text("echo {{ run_id }}")
    path = dag_file(tmp_path, """
        from tock import DAG, BashTask
        with DAG("files"):
            BashTask("t", "scripts/run.sh")
            BashTask("b", "other.bash", env={"SCRIPT": "scripts/run.sh"})
            BashTask("spaced", "scripts/run.sh ")
    """)
    assert render_file_task(path)["bash_command"] == "echo 2024-03-09\necho ex\n"
    other = render_file_task(path, "b")
    assert other["bash_command"] == "echo scheduled__2024-03-09"
    assert other["env"] == {"SCRIPT": "echo 2024-03-09\necho ex\n"}  # Airflow's rule: every string of the field
    assert render_file_task(path, "spaced")["bash_command"] == "scripts/run.sh "  # Airflow's way to run a script


def test_template_files_are_found_in_template_searchpath_after_the_dag_folder(tmp_path):
    (tmp_path / "dags").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "relative").mkdir()
    (tmp_path / "shared" / "only_shared.sh").write_text("shared {{ ds }}")
    (tmp_path / "shared" / "both.sh").write_text("shared copy")
    (tmp_path / "dags" / "both.sh").write_text("dag folder copy")
    (tmp_path / "relative" / "near.sh").write_text("{% include 'only_shared.sh' %} and near")
    path = dag_file(tmp_path / "dags", f"""
        from tock import DAG, BashTask
        with DAG("files", template_searchpath=[{str(tmp_path / "shared")!r}, "../relative"]):
            BashTask("shared", "only_shared.sh")
            BashTask("both", "both.sh")
            BashTask("near", "near.sh")
    """)
    assert render_file_task(path, "shared")["bash_command"] == "shared 2024-03-09"
    assert render_file_task(path, "both")["bash_command"] == "dag folder copy"  # Airflow's order
    assert render_file_task(path, "near")["bash_command"] == "shared 2024-03-09 and near"


def test_a_python_task_reads_template_files_with_templates_exts(tmp_path):
    (tmp_path / "query.sql").write_text("select * from t where day = '{{ ds }}'")
    path = dag_file(tmp_path, """
        from tock import DAG, task
        with DAG("files"):
            @task(templates_exts=[".sql"], templates_dict={"query": "query.sql"})
            def run(*args, **kwargs):
                return None
            run("query.sql", other="not_a_file.sh")
            @task
            def plain(*args):
                return None
            plain("query.sql")
    """)
    rendered = render_file_task(path, "run")
    assert rendered["templates_dict"] == {"query": "select * from t where day = '2024-03-09'"}
    assert rendered["op_args"] == ["select * from t where day = '2024-03-09'"]
    assert rendered["op_kwargs"] == {"other": "not_a_file.sh"}
    assert render_file_task(path, "plain")["op_args"] == ["query.sql"]  # no extensions: not a file


def test_a_missing_template_file_names_the_file_and_the_folders_searched(tmp_path):
    path = dag_file(tmp_path, """
        from tock import DAG, BashTask
        with DAG("files", template_searchpath="/nowhere"):
            BashTask("t", "missing.sh")
    """)
    error = failure(lambda: render_file_task(path))
    assert error.template == "missing.sh" and error.line is None and error.place == "bash_command"
    assert f"'missing.sh' not found in {tmp_path}, /nowhere" in str(error)


def test_an_error_inside_a_template_file_names_the_file_and_its_line(tmp_path):
    (tmp_path / "run.sh").write_text("echo {{ ds }}\n\necho {{ undefined_name }}\n")
    path = dag_file(tmp_path, """
        from tock import DAG, BashTask
        with DAG("files"):
            BashTask("t", "run.sh")
    """)
    error = failure(lambda: render_file_task(path))
    assert (error.template, error.line) == (str(tmp_path / "run.sh"), 3)
    assert str(error) == (f"task 'files.t', field bash_command, template {tmp_path / 'run.sh'}, line 3: "
                          "UndefinedError: 'undefined_name' is undefined")


# Errors: undefined names, syntax, macros that raise, the sandbox.
def test_an_undefined_name_fails_with_the_task_the_field_and_the_line():
    error = failure(lambda: bash("echo one\necho {{ ds }}\necho {{ params.missing }}"))
    assert (error.task, error.place, error.template, error.line) == ("templated.t", "bash_command", "<string>", 3)
    assert str(error) == ("task 'templated.t', field bash_command, template <string>, line 3: "
                          "UndefinedError: 'dict object' has no attribute 'missing'")


def test_where_in_a_field_the_failing_string_is():
    assert failure(lambda: bash("true", env={"A": "ok", "B": "{{ nope }}"})).place == "env['B']"
    assert failure(lambda: python("ok", ["{{ nope }}"])).place == "op_args[1][0]"
    assert failure(lambda: python(key="{{ nope }}")).place == "op_kwargs['key']"
    assert failure(lambda: python(templates_dict={"q": "{{ nope }}"})).place == "templates_dict['q']"


def test_a_dag_may_choose_jinjas_lenient_undefined_as_in_airflow():
    lenient = {"template_undefined": jinja2.Undefined}
    assert bash("echo [{{ nope }}]", dag_arguments=lenient)["bash_command"] == "echo []"


def test_a_syntax_error_fails_with_its_line():
    error = failure(lambda: bash("echo a\n{% if ds %}\necho b\n"))
    assert error.line == 2 and error.template == "<string>"  # where the unclosed `if` opens
    assert "TemplateSyntaxError: Unexpected end of template" in str(error)
    assert failure(lambda: bash("echo {{ ds ) }}")).line == 1


def test_a_macro_that_raises_fails_the_rendering_with_its_line():
    error = failure(lambda: bash("echo\n{{ macros.ds_add('not a date', 1) }}"))
    assert error.line == 2 and "ValueError: time data 'not a date' does not match format '%Y-%m-%d'" in str(error)


@pytest.mark.parametrize("template", [
    "{{ ''.__class__.__mro__ }}",
    "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ dag_run.__init__.__globals__ }}",
    "{{ macros.ds_add.__globals__ }}",
    "{{ macros.uuid.os.system('true') }}",  # a module reached through another module
    "{{ macros.json.decoder.re }}",
    "{{ conn.db.__dict__ }}",
])
def test_the_sandbox_refuses_reaching_python_internals(template):
    error = failure(lambda: bash(template))
    assert "SecurityError" in str(error) or "unsafe" in str(error), str(error)
    assert error.line == 1


def test_modules_the_dag_hands_templates_open_their_modules_and_no_further():
    arguments = {"user_defined_macros": {"os": os}}
    assert bash("{{ os.path.join('a', ds) }}", dag_arguments=arguments)["bash_command"] == "a/2024-03-09"
    assert "SecurityError" in str(failure(lambda: bash("{{ os.path.os }}", dag_arguments=arguments)))


def test_the_sandbox_allows_single_underscore_attributes_as_airflows_does():
    holder = SimpleNamespace(_private="seen")
    with DAG("under"):
        made = BashTask("t", "{{ thing._private }}")
    assert render_template_fields(made, {"thing": holder})["bash_command"] == "seen"


def test_the_sandbox_refuses_unsafe_string_formatting():
    assert "SecurityError" in str(failure(lambda: bash("{{ '{0.__class__}'.format(ds) }}")))


# Native rendering: render_template_as_native_obj=True.
NATIVE = {"render_template_as_native_obj": True}


@pytest.mark.parametrize(("template", "rendered"), [
    ("{{ params.n }}", 3),
    ("{{ params.n * 2 }}", 6),
    ("{{ [ds, params.n] }}", ["2024-03-09", 3]),
    ("{{ dag_run.conf }}", {"k": "from conf"}),
    ("{{ logical_date }}", LOGICAL),
    ("[{{ params.n }}, 4]", [3, 4]),  # the text, read as a Python literal, as Jinja's native mode does
    ("day {{ ds }}", "day 2024-03-09"),
    ("123", "123"),  # not a template: stays the string it is
])
def test_native_rendering_gives_python_objects(template, rendered):
    assert python(template, dag_arguments=NATIVE)["op_args"] == [rendered]


def test_native_rendering_still_fails_on_an_undefined_name_and_keeps_the_sandbox():
    error = failure(lambda: python("\n{{ nope }}", dag_arguments=NATIVE))
    assert error.line == 2 and "'nope' is undefined" in str(error)
    assert "SecurityError" in str(failure(lambda: python("{{ ''.__class__ }}", dag_arguments=NATIVE)))


@given(st.text().filter(lambda text: not any(marker in text for marker in ("{{", "{%", "{#"))))
def test_a_string_without_template_markers_renders_to_itself(text):
    assert python(text, key=text)["op_args"] == [text]
    assert python(text, dag_arguments=NATIVE)["op_args"] == [text]


@given(st.text(alphabet=st.characters(blacklist_characters="{}%#\r"), min_size=1))
def test_text_around_a_template_is_kept_exactly(text):
    assert python(f"{text}{{{{ ds }}}}{text}")["op_args"] == [f"{text}2024-03-09{text}"]


# The DAG's template arguments are checked when the DAG is built.
@pytest.mark.parametrize(("arguments", "problem"), [
    ({"template_searchpath": 3}, "template_searchpath must be a folder or a list of folders"),
    ({"template_searchpath": ["ok", ""]}, "template_searchpath must be a folder or a list of folders"),
    ({"template_undefined": str}, "template_undefined must be jinja2.Undefined or a subclass"),
    ({"user_defined_macros": ["x"]}, "user_defined_macros must be a dict with string keys"),
    ({"user_defined_filters": {"f": "not callable"}}, "user_defined_filters must map names to functions"),
    ({"user_defined_filters": {1: len}}, "user_defined_filters must be a dict with string keys"),
    ({"jinja_environment_kwargs": {"no_such_option": 1}}, "unexpected keyword argument 'no_such_option'"),
    ({"jinja_environment_kwargs": {"extensions": ["no_such.extension"]}}, "ModuleNotFoundError"),
    ({"render_template_as_native_obj": "yes"}, "render_template_as_native_obj must be True or False"),
])
def test_bad_template_arguments_fail_the_dag(arguments, problem):
    with pytest.raises(DagDefinitionError, match="DAG 'bad'") as caught:
        DAG("bad", **arguments)
    assert problem in str(caught.value)


def test_jinja_environment_kwargs_reach_the_environment():
    trimmed = {"jinja_environment_kwargs": {"trim_blocks": True}}
    rendered = bash("a\n{% if true %}\nb\n{% endif %}\n", dag_arguments=trimmed)
    assert rendered["bash_command"] == "a\nb\n"


@pytest.mark.parametrize(("fields", "problem"), [
    ({"env": {"A": 1}}, "env must be a dict of strings to strings"),
    ({"env": ["A=1"]}, "env must be a dict of strings to strings"),
    ({"cwd": 3}, "cwd must be a non-empty string"),
    ({"cwd": ""}, "cwd must be a non-empty string"),
    ({"append_env": "yes"}, "append_env must be True or False"),
    ({"templates_dict": {"a": "b"}}, "templates_dict is for Python tasks"),
    ({"skip_on_exit_code": "99"}, "skip_on_exit_code must be an exit status"),
    ({"skip_on_exit_code": [1, True]}, "skip_on_exit_code must be an exit status"),
    ({"skip_on_exit_code": 256}, "skip_on_exit_code must be an exit status"),
    ({"skip_on_exit_code": -1}, "skip_on_exit_code must be an exit status"),
])
def test_bad_bash_fields_fail_when_the_dag_is_parsed(fields, problem):
    with DAG("bad"), pytest.raises(ValueError, match=problem):
        BashTask("t", "true", **fields)


@pytest.mark.parametrize(("given", "codes"), [(99, (99,)), (None, ()), ([3, 1, 3], (1, 3)), ((0,), (0,))])
def test_skip_on_exit_code_is_airflows_99_by_default_or_the_statuses_given(given, codes):
    with DAG("codes"):
        assert BashTask("default", "true").skip_on_exit_code == (99,)
        assert BashTask("given", "true", skip_on_exit_code=given).skip_on_exit_code == codes


def test_a_bash_task_takes_its_command_once():
    with DAG("bad"):
        with pytest.raises(ValueError, match="takes its command once"):
            BashTask("t", "true", bash_command="true")
        with pytest.raises(ValueError, match="takes its command once"):
            BashTask("u")


@pytest.mark.parametrize(("options", "problem"), [
    ({"templates_dict": ["a"]}, "templates_dict must be a dict"),
    ({"templates_exts": ".sql"}, "templates_exts must be a list of file extensions"),
    ({"templates_exts": [""]}, "templates_exts must be a list of file extensions"),
])
def test_bad_python_template_options_fail_the_dag(options, problem):
    with DAG("bad"):
        @task(**options)
        def work() -> None:
            return None
        with pytest.raises(DagDefinitionError, match=problem):
            work()


# What the try's record keeps.
def test_the_record_is_json_with_reprs_for_what_json_lacks():
    when = datetime(2024, 1, 1, tzinfo=UTC)
    record = rendered_for_record({"op_args": ["a", (1, 2), {"s"}, when, float("nan")],
                                  "op_kwargs": {"k": None}, "templates_dict": {1: "int key", (1, 2): "tuple key"}})
    assert json.loads(record) == {"op_args": ["a", [1, 2], "{'s'}", repr(when), "nan"], "op_kwargs": {"k": None},
                                  "templates_dict": {"1": "int key", "(1, 2)": "tuple key"}}


def test_a_record_of_a_value_that_holds_itself_is_still_json():
    looped: list[Any] = ["x"]
    looped.append(looped)
    assert json.loads(rendered_for_record({"op_args": looped})) == {"op_args": ["x", "['x', [...]]"]}


def test_a_broken_repr_still_leaves_a_record():
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no")
    assert json.loads(rendered_for_record({"op_args": [Broken()]})) == {"op_args": ["<unprintable Broken>"]}


def test_a_long_record_cuts_its_longest_strings_saying_so():
    record = rendered_for_record({"bash_command": "x" * 200_000, "env": {"SHORT": "kept"}, "cwd": None})
    assert len(record.encode()) <= RECORD_LIMIT
    parsed = json.loads(record)
    assert parsed["env"] == {"SHORT": "kept"} and parsed["cwd"] is None
    assert parsed["bash_command"].startswith("xxxx") and parsed["bash_command"].endswith("of 200000 characters]")


def test_a_record_of_too_many_small_values_says_it_was_cut():
    record = rendered_for_record({"op_args": list(range(50_000)), "op_kwargs": {}}, limit=1_000)
    parsed = json.loads(record)
    assert set(parsed) == {"op_args", "op_kwargs"} and "over the 1,000-byte limit" in parsed["op_args"]


@given(st.dictionaries(st.sampled_from(["bash_command", "env", "cwd"]),
                       st.recursive(st.none() | st.text() | st.integers() | st.floats(),
                                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=30)),
       st.integers(min_value=200, max_value=3_000))
def test_a_record_is_json_and_never_over_its_limit(rendered, limit):
    record = rendered_for_record(rendered, limit=limit)
    assert len(record.encode()) <= limit
    assert set(json.loads(record)) == set(rendered)
