"""The query parameters many routes share, each bounded: SQLite cannot bind an integer past 64 bits (a
request with ``map_index=2**70`` once raised ``OverflowError`` inside a query, a 500), so every integer
a route reads has a ceiling and an out-of-range value is a 422 that says which."""

from __future__ import annotations

from fastapi import Form, Query

MOST = 2**31 - 1  # the ceiling of every integer a route reads: far past any index, try or offset Tock makes

LIMIT = Query(100, ge=1, le=1000, description="at most this many items")
OFFSET = Query(0, ge=0, le=MOST, description="skip this many items")
MAP_INDEX = Query(-1, ge=-1, le=MOST, description="instance N of a mapped task (-1: a task, or every instance of "
                                                 "a mapped task)")
SOME_MAP_INDEX = Query(None, ge=-1, le=MOST, description="instance N of a mapped task only (and the task as a "
                                                        "whole)")
TRY = Query(None, alias="try", ge=1, le=MOST, description="the try (default: the latest)")
MAP_INDEX_FIELD = Form(-1, ge=-1, le=MOST)
