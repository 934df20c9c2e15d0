"""What a parser child sends its parent: plain data, never a pickle.

A child runs the DAG file's code, so anything it writes is untrusted: the file can find
the result pipe and write to it. The report is therefore data the parent only reads,
never runs: an 8-byte length, then a JSON object whose DAG definitions are ``DagParsed``
records in Tock's own Avro encoding (``schemas.encode``), base64 in the JSON. The
parent reads at most :data:`MAX_REPORT` bytes, decodes with the typed decoder, and
turns anything else into that file's parse error.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct

from schemas import DagParsed, DecodeError, decode, encode
from services.dag_processor.core import ParseResult
from services.dag_processor.parsing import MAX_ERROR, MAX_IMPORTS_SIZE, MAX_TRACEBACK

LENGTH = struct.Struct(">Q")
MAX_REPORT = 32 << 20  # bytes of JSON a child may send; more is the file's parse error
# Every event the parent writes from a report must fit in one Kafka record: one DagParsed per DAG (tock.dags
# takes records of up to 16 MiB: infra/topics.py DAGS_MAX_BYTES; a 10,000-task DAG is about 1.1 MB), and
# one DagFileProcessed naming all of the file's DAGs (tock.parsing keeps the broker's default, about 1 MB).
MAX_DEFINITION = 12 << 20
MAX_DAG_IDS = 500_000
MAX_HASH = 256
_FIELDS = ("file_hash", "error", "traceback", "dags", "imports")


class MalformedReport(ValueError):
    """The bytes a child sent are not a report this parent accepts."""


def encode_report(result: ParseResult) -> bytes:
    """The length-prefixed report of a parse (in the child)."""
    records = [_encode_definition(definition, print_) for definition, print_ in result.dags]
    problem = unpublishable([definition.dag_id for definition, _ in result.dags], [len(rec) for rec in records])
    if problem is not None:
        return encode_report(ParseResult(result.file_hash, error=problem))
    body = json.dumps({"file_hash": result.file_hash, "error": result.error, "traceback": result.traceback,
                       "dags": [base64.b64encode(rec).decode("ascii") for rec in records],
                       "imports": None if result.imports is None else [list(pair) for pair in result.imports]},
                      separators=(",", ":")).encode()
    if len(body) > MAX_REPORT:
        return encode_report(ParseResult(result.file_hash, error=too_large(len(body))))
    return LENGTH.pack(len(body)) + body


def read_report(data: bytes) -> ParseResult | None:
    """The report in what a child wrote: None if it wrote nothing or was cut short, else
    the result; a malformed report is a result whose error says so."""
    if len(data) < LENGTH.size:
        return None
    (length,) = LENGTH.unpack_from(data)
    if length > MAX_REPORT:
        return ParseResult("", error=too_large(length))
    if len(data) < LENGTH.size + length:
        return None
    try:
        if len(data) > LENGTH.size + length:
            raise MalformedReport(f"{len(data) - LENGTH.size - length} bytes after the report")
        return _result(data[LENGTH.size:])
    except MalformedReport as error:
        return ParseResult("", error=f"the parser's report is malformed ({error}); "
                                     "a DAG file must not write to the parser's result pipe")


def too_large(size: int) -> str:
    return f"the parser's report is {size:,} bytes, over the limit of {MAX_REPORT:,}"


def unpublishable(dag_ids: list[str], sizes: list[int]) -> str | None:
    """Why these DAGs cannot be published (each record must fit in Kafka), or None."""
    for dag_id, size in zip(dag_ids, sizes, strict=False):
        if size > MAX_DEFINITION:
            return (f"DAG {dag_id!r} takes {size:,} bytes encoded, over the {MAX_DEFINITION:,} "
                    "one Kafka record may hold; split it")
    if sum(len(dag_id) + 3 for dag_id in dag_ids) > MAX_DAG_IDS:
        return f"the file defines {len(dag_ids):,} DAGs, whose ids do not fit in one Kafka record; split it"
    return None


def _encode_definition(definition, fingerprint: str) -> bytes:
    return encode(DagParsed(dag_id=definition.dag_id, file_path=definition.file_path, fingerprint=fingerprint,
                            definition=definition, at=0.0))


def _result(body: bytes) -> ParseResult:
    try:
        report = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise MalformedReport(f"not JSON: {str(error)[:200]}") from None
    if not isinstance(report, dict) or sorted(report) != sorted(_FIELDS):
        raise MalformedReport("not an object with the fields " + ", ".join(_FIELDS))
    file_hash, error, traceback, dags, imports = (report[name] for name in _FIELDS)
    if not (isinstance(file_hash, str) and len(file_hash) <= MAX_HASH and isinstance(error, str | None)
            and isinstance(traceback, str) and isinstance(dags, list)):
        raise MalformedReport("a field has the wrong type or size")
    if error is not None:
        return ParseResult(file_hash, error=_clip(error), traceback=traceback[-MAX_TRACEBACK:])
    decoded = [_definition(item) for item in dags]
    problem = unpublishable([parsed.definition.dag_id for parsed, _ in decoded], [size for _, size in decoded])
    if problem is not None:
        return ParseResult(file_hash, error=problem)
    return ParseResult(file_hash, dags=tuple((parsed.definition, parsed.fingerprint) for parsed, _ in decoded),
                       imports=_imports(imports))


def _imports(imports: object) -> tuple[tuple[str, str], ...] | None:
    """The modules the parse imported (path, hash), checked like the rest: the child ran the file's code."""
    if imports is None:
        return None
    if not (isinstance(imports, list)
            and all(isinstance(pair, list) and len(pair) == 2 and all(isinstance(item, str) for item in pair)
                    and len(pair[1]) <= MAX_HASH for pair in imports)):
        raise MalformedReport("imports is not a list of [path, hash] pairs")
    if sum(len(path) + len(digest) + 8 for path, digest in imports) > MAX_IMPORTS_SIZE:
        raise MalformedReport(f"imports take more than {MAX_IMPORTS_SIZE:,} bytes")
    return tuple((path, digest) for path, digest in imports)


def _definition(item: object) -> tuple[DagParsed, int]:
    if not isinstance(item, str):
        raise MalformedReport("a DAG is not a base64 string")
    try:
        value = base64.b64decode(item, validate=True)
        parsed = decode(value)
    except (binascii.Error, DecodeError) as error:
        raise MalformedReport(f"a DAG does not decode: {str(error)[:200]}") from None
    if not isinstance(parsed, DagParsed):
        raise MalformedReport(f"a DAG is a {type(parsed).__name__}, not a DagParsed")
    return parsed, len(value)


def _clip(error: str) -> str:
    return error if len(error) <= MAX_ERROR else error[:MAX_ERROR] + " ..."
