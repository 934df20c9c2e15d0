"""Validation of emitted lineage against the real OpenLineage JSON schemas (openlineage_spec/, copied unchanged
from the OpenLineage project: PROVENANCE.md there): a whole event against OpenLineage.json's RunEvent, then each
facet whose ``_schemaURL`` names one of the facet schemas kept here against that facet's definition. A custom
facet (Tock's own ``tock``) is held to the spec's RunFacet, as the RunEvent schema holds every run facet."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

SPEC = Path(__file__).resolve().parent / "openlineage_spec"
CORE_ID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


@cache
def registry() -> Registry:
    """Every schema kept here, by its ``$id``."""
    paths = [SPEC / "OpenLineage.json", *sorted(SPEC.glob("facets/*.json"))]
    documents = [json.loads(path.read_text()) for path in paths]
    return Registry().with_resources((document["$id"], Resource.from_contents(document)) for document in documents)


def known_ids() -> set[str]:
    return set(registry())


def _validator(reference: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": reference}, registry=registry(), format_checker=FormatChecker())


def problems(document: dict) -> list[str]:
    """What is wrong with one OpenLineage run event (a decoded JSON object), in words; [] nothing."""
    found = [f"RunEvent: {error.message} at {list(error.absolute_path)}"
             for error in _validator(f"{CORE_ID}#/$defs/RunEvent").iter_errors(document)]
    facets = [*document.get("run", {}).get("facets", {}).items(), *document.get("job", {}).get("facets", {}).items()]
    for name, facet in facets:
        schema_url = facet.get("_schemaURL", "")
        if schema_url.split("#")[0] in known_ids():
            found += [f"facet {name}: {error.message} at {list(error.absolute_path)}"
                      for error in _validator(schema_url).iter_errors(facet)]
    return found


def assert_valid(document: dict) -> None:
    found = problems(document)
    assert not found, f"not a valid OpenLineage RunEvent: {found}\n{json.dumps(document)[:2000]}"
