"""The layering STYLE.md asks for, checked on the source: infra/ never imports services/,
and a service's core imports only the standard library, schemas and its own core."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PURE_LIBRARIES = {"croniter"}  # computation only: no clock, I/O or environment of its own


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted((REPO / "infra").rglob("*.py")), ids=lambda path: str(path.relative_to(REPO)))
def test_infra_never_imports_services(path):
    assert not {name for name in imported_modules(path) if name.split(".")[0] == "services"}


@pytest.mark.parametrize("path", sorted(REPO.glob("services/*/core/**/*.py")), ids=lambda path: str(path.relative_to(REPO)))
def test_cores_import_only_the_standard_library_and_schemas(path):
    own_core = ".".join(path.relative_to(REPO).parts[:3])
    foreign = {name for name in imported_modules(path)
               if name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] not in {"schemas", *PURE_LIBRARIES}
               and not name.startswith(own_core)}
    assert not foreign
