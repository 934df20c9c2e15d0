"""The layering STYLE.md and DESIGN.md ask for, checked on the source.

Layers, lowest first: ``schemas`` (event declarations), ``tock`` (the authoring SDK DAG files
import), ``infra`` (adapters), ``projections`` (read models), ``services`` (one package per
deployable), ``tock_cli`` (the command line and ``standalone``, which compose the rest).
A module imports only from the layers ALLOWED below it, never above; a service never
imports another service's modules; a service's core imports only the standard library,
``schemas`` and its own core; and a module started by name (``python -m NAME``) obeys the
same rules as an import.
"""

from __future__ import annotations

import ast
import itertools
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("schemas", "tock", "infra", "projections", "services", "tock_cli", "examples")
ALLOWED = {
    "schemas": set(),
    "tock": {"schemas"},
    "infra": {"schemas"},
    "projections": {"schemas", "infra"},
    "services": {"schemas", "tock", "infra", "projections"},
    "tock_cli": {"schemas", "tock", "infra", "projections", "services"},
    "examples": {"tock"},
}
# The worker hosts the runner (the runner is the same code under every executor), through the
# runner's package API only.
SERVICE_USES = {("worker", "runner")}
# The one use of a higher layer: ``DAG.test()`` (Airflow's name, for DAG authors' own tests) runs the
# DAG with the scheduler's core and the runner's task code, which live above the SDK; it imports them
# when called, never when a DAG file imports ``tock``.
UPWARD = {("tock/dag.py", "tock_cli.local_run")}
PURE_LIBRARIES = {"croniter"}  # computation only: no clock, I/O or environment of its own


def sources(layer: str) -> list[Path]:
    return sorted(path for path in (REPO / layer).rglob("*.py") if "__pycache__" not in path.parts)


@cache
def references(path: Path) -> tuple[tuple[int, str], ...]:
    """(line, module) of every import in ``path`` and every ``-m MODULE`` it would start."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.List | ast.Tuple):
            found += _started_modules(node)
    return tuple(found)


def _started_modules(node: ast.List | ast.Tuple) -> list[tuple[int, str]]:
    items = node.elts
    return [(after.lineno, after.value) for before, after in itertools.pairwise(items)
            if isinstance(before, ast.Constant) and before.value == "-m"
            and isinstance(after, ast.Constant) and isinstance(after.value, str)]


def layer_of(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in LAYERS else None


def where(path: Path, line: int, module: str) -> str:
    return f"{path.relative_to(REPO)}:{line} {module}"


@pytest.mark.parametrize(("lower", "upper"), [(a, b) for a, b in itertools.permutations(LAYERS, 2)
                                              if b not in ALLOWED[a]], ids=lambda layer: layer)
def test_a_layer_never_uses_one_it_may_not(lower, upper):
    offending = [where(path, line, module) for path in sources(lower) for line, module in references(path)
                 if layer_of(module) == upper and (str(path.relative_to(REPO)), module) not in UPWARD]
    assert not offending, f"{lower} may use only {sorted(ALLOWED[lower]) or 'nothing of Tock'}"


def _service(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "services" and len(parts) > 1 else None


@pytest.mark.parametrize("path", sources("services"), ids=lambda path: str(path.relative_to(REPO)))
def test_a_service_never_reaches_into_another(path):
    own = path.relative_to(REPO).parts[1]
    offending = []
    for line, module in references(path):
        other = _service(module)
        if other is None or other == own:
            continue
        if (own, other) not in SERVICE_USES or module != f"services.{other}":
            offending.append(where(path, line, module))
    assert not offending


CORES = sorted(REPO.glob("services/*/core/**/*.py"))


@pytest.mark.parametrize("path", CORES, ids=lambda path: str(path.relative_to(REPO)))
def test_cores_import_only_the_standard_library_and_schemas(path):
    own_core = ".".join(path.relative_to(REPO).parts[:3])
    foreign = [where(path, line, name) for line, name in references(path)
               if name.split(".")[0] not in sys.stdlib_module_names
               and name.split(".")[0] not in {"schemas", *PURE_LIBRARIES} and not name.startswith(own_core)]
    assert not foreign


@pytest.mark.parametrize("service", sorted(path.name for path in (REPO / "services").iterdir()
                                            if (path / "__init__.py").exists()))
def test_every_service_keeps_its_pure_rules_in_a_core_package(service):
    core = REPO / "services" / service / "core"
    assert not (REPO / "services" / service / "core.py").exists()
    if core.exists():
        assert (core / "__init__.py").exists()


def test_the_checks_see_the_imports_they_are_about():
    # A rule over no references passes for nothing: the scan must find what is there.
    cli = REPO / "tock_cli" / "__init__.py"
    assert any(layer_of(module) == "infra" for _line, module in references(cli))
    tree = ast.parse('subprocess.Popen([sys.executable, "-m", "services.runner.launcher"])')
    lists = [node for node in ast.walk(tree) if isinstance(node, ast.List)]
    assert _started_modules(lists[0]) == [(1, "services.runner.launcher")]
