"""The frozen record of each published version's shape (``v<N>.json`` beside this module), and the rule
that a published shape only grows.

Within a version, a view may gain columns at its end and a version may gain views: a query naming
columns keeps working, and PostgreSQL's ``CREATE OR REPLACE VIEW`` accepts exactly that change. A
column is never removed, renamed, retyped or moved within a version: such a shape is a new version,
declared beside the old one (projections/contract/surface.py), whose views stay.
"""

from __future__ import annotations

import json
from pathlib import Path

from projections.contract.surface import VERSIONS, Shape, shape

FROZEN_DIR = Path(__file__).parent
WRITE_COMMAND = "tock projections contract --write"


def frozen_path(version: int) -> Path:
    return FROZEN_DIR / f"v{version}.json"


def frozen_versions() -> list[int]:
    """The versions with a frozen record, in order."""
    return sorted(int(path.stem[1:]) for path in FROZEN_DIR.glob("v*.json") if path.stem[1:].isdigit())


def load_frozen(version: int) -> Shape:
    """The recorded shape of ``version`` (empty when it was never recorded)."""
    path = frozen_path(version)
    if not path.exists():
        return {}
    recorded: Shape = json.loads(path.read_text())["views"]
    return recorded


def frozen_text(version: int, views: Shape) -> str:
    """The record's file: one column per line, so a change reads as a one-line diff."""
    return json.dumps({"version": version, "views": views}, indent=2) + "\n"


def breaking_changes(version: int, frozen: Shape, declared: Shape) -> list[str]:
    """How ``declared`` breaks the recorded shape of ``version``, one line per view (empty: it only grows)."""
    remedy = (f"a published view never loses, renames, retypes or moves a column: keep it in version {version} "
              f"(projections/contract/surface.py) and declare the new shape as version {version + 1}")
    problems = []
    for view, columns in frozen.items():
        if view not in declared:
            problems.append(f"{view} (frozen in version {version}) is no longer declared; {remedy}")
            continue
        wrong = _how_it_broke(columns, declared[view])
        if wrong:
            problems.append(f"{view}: {'; '.join(wrong)}; {remedy}")
    return problems


def _how_it_broke(frozen: dict[str, str], now: dict[str, str]) -> list[str]:
    lost = [name for name in frozen if name not in now]
    retyped = [f"{name} {sql_type} -> {now[name]}" for name, sql_type in frozen.items()
               if name in now and now[name] != sql_type]
    wrong = ([f"lost {', '.join(lost)}"] if lost else []) + ([f"retyped {', '.join(retyped)}"] if retyped else [])
    if not wrong and list(now)[:len(frozen)] != list(frozen):
        wrong.append("moved columns (the frozen ones keep their places; new ones go after them)")
    return wrong


def unrecorded_growth(frozen: Shape, declared: Shape) -> list[str]:
    """Views and columns declared but not in the record yet (allowed: record them)."""
    grown = []
    for view, columns in declared.items():
        added = [name for name in columns if name not in frozen.get(view, {})]
        if added:
            grown.append(f"{view}: {', '.join(added)}")
    return grown


def contract_problems() -> list[str]:
    """Every way the declaration and the frozen records disagree, each saying what to do."""
    problems = [f"version {version} is frozen ({frozen_path(version).name}) but no longer declared; a published "
                "version stays: declare it again in projections/contract/surface.py"
                for version in frozen_versions() if version not in VERSIONS]
    if sorted(VERSIONS) != list(range(1, len(VERSIONS) + 1)):
        problems.append(f"the declared versions are {sorted(VERSIONS)}: versions are 1, 2, ... and none is dropped")
    for version in VERSIONS:
        frozen, declared = load_frozen(version), shape(version)
        problems += breaking_changes(version, frozen, declared)
        grown = unrecorded_growth(frozen, declared)
        if grown:
            problems.append(f"version {version} grew ({'; '.join(grown)}), which is allowed at the end of a view "
                            f"or as a new view: run `{WRITE_COMMAND}` to record it in {frozen_path(version).name} "
                            "and regenerate docs/tables.md")
    return problems


def record_growth() -> list[str]:
    """Record each declared version's shape, refusing any breaking change; returns the refusals (empty:
    every record now equals the declaration)."""
    refusals = [problem for version in VERSIONS
                for problem in breaking_changes(version, load_frozen(version), shape(version))]
    if refusals:
        return refusals
    for version in VERSIONS:
        text = frozen_text(version, shape(version))
        path = frozen_path(version)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return []
