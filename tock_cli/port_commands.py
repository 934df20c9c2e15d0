"""``tock port SRC [DEST]``: rewrite a folder (or a file) of Airflow DAG files to Tock's imports, changing
nothing else, and say what was mapped and what Tock does not offer (tock_cli/porting.py)."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import typer

from tock_cli.porting import Ported, port_source


def register(app: typer.Typer) -> None:
    app.command("port")(port)


def port(src: Path = typer.Argument(..., help="An Airflow DAG folder or file.", exists=True),
         dest: Path | None = typer.Argument(None, help="Write the ported copy here (the folder's other files "
                                                       "copied as they are); default: rewrite SRC in place."),
         check: bool = typer.Option(False, "--check", help="Only report: write nothing."),
         as_json: bool = typer.Option(False, "--json", help="Print the report as JSON for tools.")) -> None:
    """Rewrite Airflow 3 (and Airflow 2) imports to Tock's, file by file, changing nothing else.

    Each `from airflow... import Name` becomes `from tock import Name` when Tock offers the name (Airflow 2's
    renamed ones keep their name: `from tock import Asset as Dataset`). Every file, every name mapped and
    every name Tock does not offer is reported with file:line and a hint; the exit code is 1 when a name is
    missing or a file cannot be parsed (0 otherwise). Porting a ported folder changes nothing."""
    if dest is not None and dest.resolve().is_relative_to(src.resolve()) and src.is_dir():
        raise typer.BadParameter(f"{dest} is inside {src}: give a DEST outside the folder", param_hint="DEST")
    results: list[tuple[Path, Ported]] = []
    for path in _files(src):
        target = path if dest is None else _target(src, dest, path)
        if path.suffix != ".py":
            if not check and target != path:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
            continue
        ported = _port_file(path)
        results.append((path, ported))
        if not check and (ported.changed or target != path):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(ported.source, encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(_as_json(results, check), indent=2))
    else:
        _print(results, check, dest)
    if any(ported.missing or ported.error for _path, ported in results):
        raise typer.Exit(1)


def _files(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    return sorted(path for path in src.rglob("*") if path.is_file() and "__pycache__" not in path.parts)


def _target(src: Path, dest: Path, path: Path) -> Path:
    if src.is_file():
        return dest / src.name if dest.is_dir() else dest
    return dest / path.relative_to(src)


def _port_file(path: Path) -> Ported:
    try:
        source = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as error:
        return Ported("", error=f"cannot read it: {error}")
    return port_source(source, _offered())


def _offered() -> frozenset[str]:
    import tock

    return frozenset(tock.__all__)


def _print(results: list[tuple[Path, Ported]], check: bool, dest: Path | None) -> None:
    for path, ported in results:
        if not (ported.mapped or ported.missing or ported.error):
            continue
        typer.echo(str(path))
        if ported.error:
            typer.echo(f"  error: {ported.error} (left as it is)")
        for item in ported.mapped:
            typer.echo(f"  {path}:{item.line}: {item.airflow} -> {item.tock}")
        for missing in ported.missing:
            typer.echo(f"  {path}:{missing.line}: MISSING {missing.airflow}: {missing.hint}")
    changed = sum(1 for _path, ported in results if ported.changed)
    verb = "would change" if check else "changed"
    where = "" if check or dest is None else f" (written to {dest})"
    typer.echo(f"{len(results)} Python file(s): {verb} {changed}{where}; "
               f"{sum(len(ported.mapped) for _path, ported in results)} name(s) mapped, "
               f"{sum(len(ported.missing) for _path, ported in results)} missing, "
               f"{sum(1 for _path, ported in results if ported.error)} unreadable")


def _as_json(results: list[tuple[Path, Ported]], check: bool) -> dict:
    return {"check": check,
            "files": [{"path": str(path), "changed": ported.changed, "error": ported.error,
                       "mapped": [asdict(item) for item in ported.mapped],
                       "missing": [asdict(item) for item in ported.missing]} for path, ported in results],
            "mapped": sum(len(ported.mapped) for _path, ported in results),
            "missing": sum(len(ported.missing) for _path, ported in results)}
