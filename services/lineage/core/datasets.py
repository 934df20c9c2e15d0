"""Assets as OpenLineage datasets, read from the JSON the asset events carry.

An asset's uri names its dataset the way OpenLineage's naming spec names storage: the scheme and the
authority are the namespace, the path is the name (``s3://lake/orders`` -> ``s3://lake`` / ``orders``;
``postgres://db:5432/shop.public.orders`` -> ``postgres://db:5432`` / ``shop.public.orders``; a uri with
no authority, ``file:///data/x.csv`` -> ``file`` / ``/data/x.csv``). A uri with no scheme (a bare asset
name) is in the namespace ``asset``, named by the whole uri.

A field that is not the JSON it should be (it cannot happen for records Tock wrote) gives no dataset rather
than an error: a lineage event goes out with fewer datasets, the rest of the partition is not held up.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from services.lineage.core.model import DatasetRef

BARE_NAMESPACE = "asset"


def dataset_of(uri: str) -> DatasetRef:
    """The OpenLineage dataset an asset ``uri`` names."""
    parts = urlsplit(uri)
    if not parts.scheme or ":" not in uri:
        return DatasetRef(BARE_NAMESPACE, uri)
    if not parts.netloc:
        return DatasetRef(parts.scheme, parts.path or uri)
    name = parts.path.lstrip("/") or "/"
    if parts.query:
        name = f"{name}?{parts.query}"
    return DatasetRef(f"{parts.scheme}://{parts.netloc}", name)


def datasets_of_events(asset_events_json: str) -> tuple[DatasetRef, ...]:
    """The datasets of a JSON list of asset events (objects with a ``uri``), each once, in order."""
    found = _loaded(asset_events_json)
    if not isinstance(found, list):
        return ()
    uris = [item["uri"] for item in found if isinstance(item, dict) and isinstance(item.get("uri"), str)]
    return tuple(dataset_of(uri) for uri in dict.fromkeys(uris))


def datasets_of_inlets(inlet_events_json: str) -> tuple[DatasetRef, ...]:
    """The datasets a try reads: the uris keying its TaskQueued's ``inlet_events_json`` (every inlet has a
    key, with or without events)."""
    found = _loaded(inlet_events_json)
    if not isinstance(found, dict):
        return ()
    return tuple(dataset_of(uri) for uri in found if isinstance(uri, str))


def _loaded(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
