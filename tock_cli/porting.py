"""`tock port`'s core: one DAG file's source in, its source with Tock's imports out, and what was mapped.

Only ``from airflow... import ...`` statements change; each is replaced in place by ``from tock import
...`` for the names Tock offers (on its first line, every other line keeping its number), and keeps its
own ``from airflow... import ...`` for the names it does not, which are reported with a hint. Nothing
else in the file is touched, and porting a ported file changes nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tock_cli.airflow_names import MODULE_HINT, hint, is_airflow_module, tock_name


@dataclass(frozen=True)
class Mapped:
    line: int
    airflow: str  # module.name as the file imported it
    tock: str  # tock.name it now imports


@dataclass(frozen=True)
class Missing:
    line: int
    airflow: str
    hint: str


@dataclass
class Ported:
    source: str
    mapped: list[Mapped] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    error: str = ""  # why the file could not be read ("" none); its source is then unchanged

    @property
    def changed(self) -> bool:
        return bool(self.mapped)


def port_source(source: str, offered: frozenset[str]) -> Ported:
    """``source`` with its Airflow imports of the names in ``offered`` (``tock.__all__``) made Tock's."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return Ported(source, error=f"cannot parse it: {error.msg} (line {error.lineno})")
    ported = Ported(source)
    edits: list[tuple[int, int, str]] = []
    starts = _line_starts(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            ported.missing += [Missing(node.lineno, alias.name, MODULE_HINT) for alias in node.names
                               if is_airflow_module(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_airflow_module(node.module):
            text = _rewritten(node, offered, ported)
            if text is not None:
                start = starts[node.lineno - 1] + _byte_col(source, starts, node.lineno, node.col_offset)
                end = starts[node.end_lineno - 1] + _byte_col(source, starts, node.end_lineno or node.lineno,
                                                              node.end_col_offset or 0)
                # A statement over several lines becomes one, then as many empty lines: each line after it
                # keeps its number (a traceback, the report's lines).
                edits.append((start, end, text + "\n" * ((node.end_lineno or node.lineno) - node.lineno)))
    for start, end, text in sorted(edits, reverse=True):
        ported.source = ported.source[:start] + text + ported.source[end:]
    ported.mapped.sort(key=lambda item: item.line)
    ported.missing.sort(key=lambda item: item.line)
    return ported


def _rewritten(node: ast.ImportFrom, offered: frozenset[str], ported: Ported) -> str | None:
    """The statement that replaces ``node`` (None: nothing of it is Tock's, it stays as it is)."""
    module = node.module or ""
    ours, theirs = [], []
    for alias in node.names:
        target = None if alias.name == "*" else tock_name(alias.name, offered)
        if target is None:
            theirs.append(alias)
            what = "a star import: import the names you use" if alias.name == "*" else hint(alias.name)
            ported.missing.append(Missing(node.lineno, f"{module}.{alias.name}", what))
            continue
        local = alias.asname or alias.name
        ours.append(target if local == target else f"{target} as {local}")
        ported.mapped.append(Mapped(node.lineno, f"{module}.{alias.name}", f"tock.{target}"))
    if not ours:
        return None
    statements = [f"from tock import {', '.join(ours)}"]
    if theirs:
        names = ", ".join(alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
                          for alias in theirs)
        statements.append(f"from {module} import {names}")
    return "; ".join(statements)


def _line_starts(source: str) -> list[int]:
    starts, offset = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(offset)
        offset += len(line)
    return starts or [0]


def _byte_col(source: str, starts: list[int], lineno: int, col: int) -> int:
    """ast's column is in UTF-8 bytes; the string's index in characters."""
    line_start = starts[lineno - 1]
    line_end = starts[lineno] if lineno < len(starts) else len(source)
    return len(source[line_start:line_end].encode()[:col].decode(errors="ignore"))
