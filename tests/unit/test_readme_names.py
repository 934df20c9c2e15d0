"""The README's table of the names `tock` offers lists exactly what `tock` exports."""

from __future__ import annotations

import re
from pathlib import Path

import tock

README = Path(__file__).resolve().parents[2] / "README.md"


def _table() -> str:
    text = README.read_text()
    start = text.index("### The names `tock` offers")
    return text[start:text.index("\n### ", start + 1)]


def test_every_name_tock_exports_is_in_the_readmes_table_and_nothing_else():
    listed = set()
    for line in _table().splitlines():
        if line.startswith("| `") and not line.startswith("| `tock` |"):
            listed |= set(re.findall(r"`([A-Za-z_]+)`", line.split("|")[1]))
    assert listed == set(tock.__all__)
