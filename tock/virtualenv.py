"""Python tasks in another interpreter, by Airflow's names: ``@task.virtualenv`` / ``PythonVirtualenvOperator``
(a virtualenv built from PyPI with the task's ``requirements``) and ``@task.external_python`` /
``ExternalPythonOperator`` (an interpreter that exists already, named by its path).

A virtualenv is cached by its content (the interpreter, the requirements, ``system_site_packages`` and the
pip options hash to its folder under ``~/.cache/tock/venvs``, or ``$XDG_CACHE_HOME/tock/venvs``), built
once into a temporary folder and renamed into place, so the same requirements never build twice and two
tries building at once cannot see half a virtualenv. As in Airflow, the function runs from its source: it
must import what it uses inside itself, and its arguments, the context keys it names and its return value
cross over by pickle (a value only the virtualenv can unpickle fails the try, naming it).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Interpreter:
    """Where a Python task's function runs: a virtualenv of ``requirements`` (``python_version``: the
    interpreter it is made from, "" this one), or, with ``external``, the interpreter at ``python``."""

    requirements: tuple[str, ...] = ()
    python: str = ""
    system_site_packages: bool = False
    pip_install_options: tuple[str, ...] = ()
    external: bool = False

    @classmethod
    def virtualenv(cls, requirements: Any = None, python_version: Any = None, system_site_packages: Any = False,
                   pip_install_options: Any = None) -> Interpreter:
        listed = _strings(requirements, "requirements")
        if python_version is not None and not isinstance(python_version, str | int | float):
            raise TypeError(f"python_version must be a version like '3.11', got {python_version!r}")
        if not isinstance(system_site_packages, bool):
            raise TypeError(f"system_site_packages must be True or False, got {system_site_packages!r}")
        return cls(tuple(listed), str(python_version or ""), system_site_packages,
                   tuple(_strings(pip_install_options, "pip_install_options")))

    @classmethod
    def external_python(cls, python: Any) -> Interpreter:
        if not isinstance(python, str) or not python:
            raise TypeError(f"python must be the path of a Python interpreter, got {python!r}")
        return cls(python=python, external=True)


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
        raise TypeError(f"{what} must be a list of strings, got {value!r:.200}")
    return [line.strip() for item in items for line in item.splitlines() if line.strip()]


def run_in(interpreter: Interpreter, function: Callable[..., Any], args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> Any:
    """Call ``function(*args, **kwargs)`` in ``interpreter`` (its output goes to the try's log); its value."""
    python = interpreter.python if interpreter.external else str(virtualenv_of(interpreter) / "bin" / "python")
    with tempfile.TemporaryDirectory(prefix="tock-venv-call-") as folder:
        script, given, returned = Path(folder, "call.py"), Path(folder, "given.pickle"), Path(folder, "returned.pickle")
        script.write_text(_script(function))
        try:
            given.write_bytes(pickle.dumps((args, kwargs)))
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            raise TypeError(f"the arguments of {function.__name__!r} cannot cross to its interpreter by pickle: "
                            f"{error}") from error
        sys.stdout.flush()
        sys.stderr.flush()
        finished = subprocess.run([python, str(script), str(given), str(returned)], check=False)
        if finished.returncode != 0:
            raise RuntimeError(f"{function.__name__!r} failed in {python} (exit code {finished.returncode}; its "
                               "traceback is in the log above)")
        try:
            return pickle.loads(returned.read_bytes())  # noqa: S301 - the value the task's own code returned
        except Exception as error:  # noqa: BLE001 - any unpickling error: name it
            raise TypeError(f"the value {function.__name__!r} returned in {python} cannot be read back here "
                            f"({type(error).__name__}: {error}); return built-in types") from error


def _script(function: Callable[..., Any]) -> str:
    """The function's own source (its decorators left out), then what calls it with the pickled arguments."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as error:
        raise TypeError(f"the source of {function!r} cannot be read; a virtualenv task must be a function "
                        "defined with def in a file") from error
    tree = ast.parse(source)
    found = next((node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    if found is None or isinstance(found, ast.AsyncFunctionDef):
        raise TypeError(f"{function!r}: a virtualenv task is a function defined with def")
    found.decorator_list = []
    return "\n".join([
        "import pickle, sys",
        ast.unparse(found),
        "with open(sys.argv[1], 'rb') as given:",
        "    args, kwargs = pickle.load(given)",
        f"value = {found.name}(*args, **kwargs)",
        "with open(sys.argv[2], 'wb') as returned:",
        "    pickle.dump(value, returned)",
        ""])


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tock" / "venvs"


def virtualenv_of(interpreter: Interpreter) -> Path:
    """The virtualenv of ``interpreter``'s content, built if no try built it before."""
    base = _base_python(interpreter.python)
    key = hashlib.sha256(json.dumps([base, _version_of(base), list(interpreter.requirements),
                                     interpreter.system_site_packages, list(interpreter.pip_install_options)])
                         .encode()).hexdigest()[:24]
    folder = cache_root() / key
    if (folder / "bin" / "python").exists():
        print(f"virtualenv {folder} (cached)", flush=True)
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{key}.building-", dir=folder.parent))
    try:
        _build(base, building, interpreter)
        try:
            building.rename(folder)  # atomic: whoever renames first wins; the other's build is thrown away
        except OSError:
            if not (folder / "bin" / "python").exists():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    print(f"virtualenv {folder} (built)", flush=True)
    return folder


def _build(base: str, folder: Path, interpreter: Interpreter) -> None:
    create = [base, "-m", "venv", *(["--system-site-packages"] if interpreter.system_site_packages else []),
              str(folder)]
    _step(create, "creating the virtualenv")
    if interpreter.requirements:
        _step([str(folder / "bin" / "python"), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
               *interpreter.pip_install_options, *interpreter.requirements], "installing its requirements")


def _step(command: list[str], what: str) -> None:
    print(f"{what}: {' '.join(command)}", flush=True)
    finished = subprocess.run(command, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(finished.stdout, end="", flush=True)
    if finished.returncode != 0:
        raise RuntimeError(f"{what} failed (exit code {finished.returncode}): {finished.stdout[-2000:]}")


def _base_python(version: str) -> str:
    """The interpreter a virtualenv is made from: this one's base, or ``python<version>`` on the PATH."""
    if not version:
        return str(Path(getattr(sys, "_base_executable", sys.executable)))
    found = shutil.which(f"python{version}")
    if found is None:
        raise RuntimeError(f"python_version {version!r}: no python{version} on this host's PATH")
    return found


def _version_of(python: str) -> str:
    if python == getattr(sys, "_base_executable", None):
        return sys.version
    return subprocess.run([python, "-c", "import sys; print(sys.version)"], check=True, capture_output=True,
                          text=True).stdout.strip()
