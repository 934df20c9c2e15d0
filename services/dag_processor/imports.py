"""In a parser child: record which modules of the DAGs folder a parse imports, with the
hash of the very bytes compiled, so the core can tell when a file's imports changed.

A finder placed just before the standard path finder wraps the source loader of every
module found inside the folder: the module is compiled from its source, read once and
hashed (never from a ``.pyc``, which is trusted on size and whole-second mtime and could
hide an edit). Modules outside the folder load as usual and are not recorded.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder, SourceFileLoader
from types import CodeType, ModuleType


def content_hash(data: bytes) -> str:
    """The hash of a file's bytes, as the scan and the parse record it."""
    return hashlib.sha256(data).hexdigest()


class _HashingLoader(SourceFileLoader):
    """Compiles from source, recording the source's hash under its path."""

    def __init__(self, fullname: str, path: str, recorded: dict[str, str]) -> None:
        super().__init__(fullname, path)
        self._recorded = recorded

    def get_code(self, fullname: str) -> CodeType:
        source = self.get_data(self.path)
        self._recorded[self.path] = content_hash(source)
        return self.source_to_code(source, self.path)


class _FolderImportRecorder(MetaPathFinder):
    def __init__(self, folder: str, recorded: dict[str, str]) -> None:
        self._prefix = os.path.join(os.path.abspath(folder), "")
        self._recorded = recorded

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        spec = PathFinder.find_spec(fullname, path, target)
        if (spec is None or type(spec.loader) is not SourceFileLoader or spec.origin is None
                or not spec.origin.startswith(self._prefix)):
            return None  # not ours: the finders after this one find it as they would have
        spec.loader = _HashingLoader(fullname, spec.origin, self._recorded)
        return spec


def record_folder_imports(folder: str) -> dict[str, str]:
    """From now on in this process, record (path -> content hash) every module imported
    from inside ``folder``; returns the mapping, filled in as imports happen."""
    recorded: dict[str, str] = {}
    position = sys.meta_path.index(PathFinder) if PathFinder in sys.meta_path else len(sys.meta_path)
    sys.meta_path.insert(position, _FolderImportRecorder(folder, recorded))
    return recorded
