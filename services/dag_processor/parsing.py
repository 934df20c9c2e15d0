"""What a parser child does: read a DAG file, run it, describe its DAGs (or the error)."""

from __future__ import annotations

import traceback
from pathlib import Path

from services.dag_processor.core import ParseResult
from services.dag_processor.imports import content_hash, record_folder_imports
from tock.dag import fingerprint
from tock.loading import load_dags_from_source

__all__ = ["MAX_ERROR", "MAX_IMPORTS_SIZE", "MAX_TRACEBACK", "content_hash", "parse_dag_file"]

MAX_ERROR = 4_000
MAX_TRACEBACK = 20_000
# Bytes of imported paths and hashes one DagFileProcessed may carry (it must fit in one Kafka
# record beside its dag_ids); a parse importing more records none, and is parsed every interval.
MAX_IMPORTS_SIZE = 200_000


def parse_dag_file(file_path: str, dags_folder: str | None = None) -> ParseResult:
    """Parse one file; every failure, even SystemExit, becomes the result's error.

    With ``dags_folder`` (in a child of its own: it changes the import machinery), the
    result names the modules of that folder the parse imported, with their hashes."""
    try:
        source = Path(file_path).read_bytes()
    except OSError as error:
        return ParseResult("", error=f"cannot read {file_path}: {error}")
    file_hash = content_hash(source)
    imported = None if dags_folder is None else record_folder_imports(dags_folder)
    try:
        dags = load_dags_from_source(file_path, source)
        definitions = tuple((definition, fingerprint(definition))
                            for definition in (dag.to_definition(file_path) for dag in dags))
    except BaseException as error:  # noqa: BLE001 - the file's failure is the result
        return ParseResult(file_hash, error=_describe(error), traceback=traceback.format_exc()[-MAX_TRACEBACK:])
    return ParseResult(file_hash, dags=definitions, imports=publishable_imports(imported))


def publishable_imports(imported: dict[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    """The recorded imports, by path; None (not recorded) if there are too many to publish."""
    if imported is None or sum(len(path) + len(digest) + 8 for path, digest in imported.items()) > MAX_IMPORTS_SIZE:
        return None
    return tuple(sorted(imported.items()))


def _describe(error: BaseException) -> str:
    text = "".join(traceback.format_exception_only(error)).strip()
    return text if len(text) <= MAX_ERROR else text[:MAX_ERROR] + " ..."
