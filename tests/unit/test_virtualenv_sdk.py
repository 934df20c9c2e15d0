"""Python tasks in another interpreter (issue 25), without building anything: ``@task.external_python`` and
``ExternalPythonOperator`` run the function's own source in the interpreter they name, arguments, context
keys and the return value crossing by pickle; every mistake is an error naming it."""

from __future__ import annotations

import sys

import pytest

from tock import DAG, ExternalPythonOperator, PythonVirtualenvOperator, task
from tock.virtualenv import Interpreter, _script, cache_root, run_in
from tock_cli.local_run import run_dag


def test_the_function_runs_from_its_own_source_in_the_interpreter_named():
    with DAG("external") as made:
        @task.external_python(python=sys.executable, retries=0)
        def where(base, ds=None):
            import sys as inner
            return [base + 1, ds, inner.executable]

        def plain(word):
            return word.upper()

        where(41)
        ExternalPythonOperator(task_id="op", python=sys.executable, python_callable=plain, op_args=["hi"])
    ran = run_dag(made, logical_date=1_780_000_000.0)
    assert ran.state == "success", [(i.task_id, i.error) for i in ran.task_instances]
    assert ran.task_instance("where").values["return_value"][:2] == [42, "2026-05-28"]
    assert ran.task_instance("op").values["return_value"] == "HI"


def test_a_failure_in_the_interpreter_fails_the_try_and_a_value_that_cannot_cross_says_so(tmp_path):
    def boom():
        raise ValueError("inside")

    with pytest.raises(RuntimeError, match="failed in .*exit code 1"):
        run_in(Interpreter.external_python(sys.executable), boom, (), {})

    def echo(value):
        return value

    with pytest.raises(TypeError, match="cannot cross"):
        run_in(Interpreter.external_python(sys.executable), echo, (lambda: 1,), {})


def test_the_script_is_the_function_without_its_decorators():
    @task.virtualenv(requirements=["six"])
    def decorated(x):
        return x

    script = _script(decorated.function)
    assert "@task" not in script and "def decorated(x):" in script and "pickle.dump(value" in script


@pytest.mark.parametrize("given, words", [({"requirements": 3}, "list of strings"),
                                          ({"system_site_packages": "yes"}, "True or False"),
                                          ({"python_version": object()}, "version")])
def test_wrong_virtualenv_arguments_are_refused_naming_them(given, words):
    with pytest.raises(TypeError, match=words):
        task.virtualenv(**given)
    with pytest.raises(TypeError, match=words):
        PythonVirtualenvOperator(task_id="t", python_callable=print, **given)


def test_requirements_are_pip_lines_and_the_cache_is_under_xdg_cache_home(monkeypatch, tmp_path):
    made = Interpreter.virtualenv("six==1.17.0\n  tabulate\n")
    assert made.requirements == ("six==1.17.0", "tabulate")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path / "tock" / "venvs"
    with pytest.raises(TypeError, match="path of a Python"):
        task.external_python(python="")
