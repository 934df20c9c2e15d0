"""``@task.virtualenv`` / ``PythonVirtualenvOperator`` (issue 25) with a real virtualenv built from PyPI:
the function sees its requirements and not the runner's packages, the virtualenv is built once per
content (a second run, and two builds racing, use one folder), and its output is the try's."""

from __future__ import annotations

import threading

import pytest

from tock import DAG, PythonVirtualenvOperator, task
from tock.virtualenv import Interpreter, cache_root, virtualenv_of
from tock_cli.local_run import run_dag

pytestmark = pytest.mark.integration

SIX = "six==1.17.0"


def _versions():
    import importlib.util

    import six
    return [six.__version__, importlib.util.find_spec("tock") is None]


def _dag() -> DAG:
    with DAG("isolated") as made:
        @task.virtualenv(requirements=[SIX], retries=0)
        def decorated(word):
            import six
            print(f"six {six.__version__} says {word}")
            return six.__version__

        decorated("hello")
        PythonVirtualenvOperator(task_id="operator", python_callable=_versions, requirements=[SIX], retries=0)
    return made


def test_the_function_runs_with_its_requirements_only_and_the_virtualenv_is_built_once(monkeypatch, tmp_path,
                                                                                       capfd):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    ran = run_dag(_dag())
    assert ran.state == "success", [(item.task_id, item.error) for item in ran.task_instances]
    assert ran.task_instance("decorated").values["return_value"] == "1.17.0"
    assert ran.task_instance("operator").values["return_value"] == ["1.17.0", True]  # no tock in there
    first = capfd.readouterr().out
    assert "six 1.17.0 says hello" in first and first.count("(built)") == 1 and first.count("(cached)") == 1
    assert run_dag(_dag()).state == "success"
    assert capfd.readouterr().out.count("(built)") == 0
    assert len([path for path in cache_root().iterdir() if path.is_dir()]) == 1


def test_two_builds_of_one_content_racing_leave_one_virtualenv(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    made, found, errors = Interpreter.virtualenv([]), [], []

    def build() -> None:
        try:
            found.append(virtualenv_of(made))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert errors == [] and len(set(found)) == 1 and (found[0] / "bin" / "python").exists()
    assert [path.name for path in cache_root().iterdir()] == [found[0].name]  # no half-built folder left
