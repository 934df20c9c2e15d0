"""``GET /api/v1/catalog``: the event catalog, an AsyncAPI 3.0.0 document of every topic, key, partitioning
rule, event, field and schema version (schemas/catalog.py): what `tock schemas catalog` prints."""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter, Response

from infra.topics import SPECS
from schemas.catalog import catalog_text

catalog = APIRouter()


@cache
def _document() -> bytes:
    # The declarations are the code's own: the document is the same for the life of the process.
    return catalog_text(SPECS).encode("utf-8")


@catalog.get("/api/v1/catalog", tags=["catalog"], response_class=Response,
             responses={200: {"description": "the AsyncAPI 3.0.0 document",
                              "content": {"application/json": {"schema": {"type": "object"}}}}})
def event_catalog() -> Response:
    """The event catalog: a channel per topic (address under TOCK_TOPIC_PREFIX, record keys, partitioning
    rule, cleanup policy), every version of every event as a message with its Avro schema and the record
    framing, an operation reading each topic. Validated with the AsyncAPI CLI; also in docs/asyncapi.json."""
    return Response(_document(), media_type="application/json")
