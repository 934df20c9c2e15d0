"""Find DAG files under a folder and hash their contents (re-reading only files that changed)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from infra.file_keys import StatKey, settled, stat_key
from services.dag_processor.parsing import content_hash


class DagFolderScanner:
    """``scan()`` returns {absolute path: content hash} of every ``*.py`` file under the folder.

    Hidden entries and ``__pycache__`` are skipped; symlinked directories are not followed.
    A file's hash is recomputed only when its stat (mtime, ctime, size, inode) changed, or while it is too
    recent to tell two writes apart (infra/file_keys.py: a file written twice within one tick of the file
    system's clock keeps its stat).
    """

    def __init__(self, folder: Path, clock: Callable[[], float] = time.time) -> None:
        self.folder = Path(folder).absolute()
        self._clock = clock
        self._hashes: dict[str, tuple[StatKey, str]] = {}

    def scan(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for path in self._python_files():
            file_hash = self._hash(path)
            if file_hash is not None:
                found[path] = file_hash
        self._hashes = {path: self._hashes[path] for path in found if path in self._hashes}
        return found

    def _python_files(self):
        for root, dirs, files in os.walk(self.folder):
            dirs[:] = [name for name in dirs if not name.startswith(".") and name != "__pycache__"]
            for name in files:
                if name.endswith(".py") and not name.startswith("."):
                    yield os.path.join(root, name)

    def _hash(self, path: str) -> str | None:
        try:
            key = stat_key(os.stat(path))
            cached = self._hashes.get(path)
            if cached is not None and cached[0] == key:
                return cached[1]
            with open(path, "rb") as file:
                file_hash = content_hash(file.read())
        except FileNotFoundError:  # vanished between listing and reading: not there now
            return None
        except OSError as error:  # unreadable: still a file; its parse will report why
            return f"unreadable:{error.errno}"
        if settled(key, self._clock()):
            self._hashes[path] = (key, file_hash)
        return file_hash
