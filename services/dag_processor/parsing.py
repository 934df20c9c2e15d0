"""What a parser child does: read a DAG file, run it, describe its DAGs (or the error)."""

from __future__ import annotations

import hashlib
import traceback
from pathlib import Path

from services.dag_processor.core import ParseResult
from tock.dag import fingerprint
from tock.loading import load_dags_from_source

MAX_ERROR = 4_000
MAX_TRACEBACK = 20_000


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_dag_file(file_path: str) -> ParseResult:
    """Parse one file; every failure, even SystemExit, becomes the result's error."""
    try:
        source = Path(file_path).read_bytes()
    except OSError as error:
        return ParseResult("", error=f"cannot read {file_path}: {error}")
    file_hash = content_hash(source)
    try:
        dags = load_dags_from_source(file_path, source)
        definitions = tuple((definition, fingerprint(definition))
                            for definition in (dag.to_definition(file_path) for dag in dags))
    except BaseException as error:  # noqa: BLE001 - the file's failure is the result
        return ParseResult(file_hash, error=_describe(error), traceback=traceback.format_exc()[-MAX_TRACEBACK:])
    return ParseResult(file_hash, dags=definitions)


def _describe(error: BaseException) -> str:
    text = "".join(traceback.format_exception_only(error)).strip()
    return text if len(text) <= MAX_ERROR else text[:MAX_ERROR] + " ..."
