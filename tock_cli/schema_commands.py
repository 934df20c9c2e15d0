"""``tock schemas catalog``: the event catalog, an AsyncAPI 3 document of every topic, key, partitioning rule,
event, field and schema version (schemas/catalog.py), as committed in docs/asyncapi.json."""

from __future__ import annotations

from pathlib import Path

import typer

from infra.topics import SPECS
from schemas.catalog import CATALOG_PATH, catalog_text

schemas_app = typer.Typer(help="Tock's event declarations: the event catalog.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(schemas_app, name="schemas")


@schemas_app.command("catalog")
def catalog(output: Path | None = typer.Option(None, "--output", "-o",
                                                 help=f"Write the document here (e.g. {CATALOG_PATH}); "
                                                      "default: print it."),
            check: bool = typer.Option(False, "--check", help="Write nothing: exit 1 when OUTPUT differs from "
                                                              "what the declarations give.")) -> None:
    """Print or write the event catalog: an AsyncAPI 3.0.0 document of Tock's topics and events.

    A channel per topic (address, record keys, partitioning rule, cleanup policy), every version of every
    event as a message with its Avro schema, an operation reading each topic. The API serves the same
    document (GET /api/v1/catalog)."""
    text = catalog_text(SPECS)
    if output is None:
        if check:
            raise typer.BadParameter(f"--check compares with a file: give --output (e.g. {CATALOG_PATH})")
        typer.echo(text, nl=False)
        return
    current = output.read_text(encoding="utf-8") if output.exists() else None
    if check:
        if current != text:
            typer.echo(f"{output} differs from the event declarations: run `tock schemas catalog --output {output}`",
                       err=True)
            raise typer.Exit(1)
        typer.echo(f"{output} is up to date", err=True)
        return
    if current != text:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {output}" if current != text else f"{output} is up to date", err=True)
