"""DAG files loaded before the tries that need them fork: a file launcher's (file_launchers.py) one file.

A try's child needs one task of its DAG file, and importing the file is most of a no-op try's cost (a
200-task file 8.6 ms of CPU, a 10,000-task one 0.32 s). A file launcher imports its file once, here,
and every runner it forks, and every try's child those fork, inherits the loaded DAGs: the child finds its
task in them instead of importing the file again (``dags_of``). Each child is a fork, so each try starts
from the file's state just after its import, as if it had imported it itself, and changes nothing the
next try sees.

The import runs as a child's would (child.py): every signal at its default, the environment the
allow-list passes (but no try's context: it is no try's), the secrets chain installed; then the
launcher's own environment and signals come back. What the file read through the secrets chain at import
is carried into each try's report (child.py) and stays masked in its output.

``digest`` is how a launcher tells the file is unchanged: a hash of the bytes of the DAG file and of every
module its import loaded from outside the interpreter's own installation (the helper modules a DAG folder
keeps beside its files), checked again before each batch is handed over. The bytes are read again only when
a file's stat changed (``stat_keys``), or while it changed too recently for its stat to tell (``settled``).
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass

from infra.file_keys import StatKey, settled, stat_key
from infra.settings import Settings
from infra.task_environment import TaskEnvironment
from tock.dag import DAG

_LOADED: dict[str, list[DAG]] = {}
# Tock's own packages, wherever they are installed (a checkout's are outside the interpreter's): not user code.
_TOCK_PACKAGES = tuple(os.path.dirname(os.path.abspath(file)) + os.sep
                       for file in (sys.modules["tock.dag"].__file__ or "", sys.modules["schemas"].__file__ or "",
                                    sys.modules["infra.settings"].__file__ or "", os.path.dirname(__file__)))


@dataclass(slots=True)
class Preloaded:
    """A file as its launcher loaded it: the files its digest covers (the DAG file first), and the digest;
    ``verified``: the files' stat keys when their bytes last matched it, once settled."""

    files: tuple[str, ...]
    digest: str
    verified: tuple[StatKey | None, ...] | None = None

    @staticmethod
    def now(files: Iterable[str]) -> Preloaded:
        """The files as they are now."""
        files = tuple(files)
        return Preloaded(files, digest(files))

    def unchanged(self, now: float | None = None) -> bool:
        """Whether the files are still as digested: their bytes are read again only when a stat changed since
        they last matched, or had not settled then. ``now``: the wall clock (time.time())."""
        keys = stat_keys(self.files)
        if keys == self.verified:
            return True
        same = digest(self.files) == self.digest
        if same and all(key is None or settled(key, time.time() if now is None else now) for key in keys):
            self.verified = keys
        return same


def dags_of(path: str) -> list[DAG] | None:
    """The DAGs of the file at ``path`` as this process (or the launcher it was forked from) preloaded
    them; None if it did not."""
    return _LOADED.get(os.path.abspath(path))


def preload(settings: Settings, path: str) -> Preloaded:
    """Import the DAG file at ``path`` as a try's child would and keep its DAGs for the processes forked from
    here; raises what the import raises (then nothing is kept)."""
    from infra.secrets import secrets_backends
    from services.runner.child import PYTHON_IGNORES, default_signals
    from tock.loading import load_dags_from_source
    from tock.secrets import SecretsChain, install

    file_path = os.path.abspath(path)
    before = set(sys.modules)
    environ, ignored = dict(os.environ), default_signals(PYTHON_IGNORES)  # as a child's import
    source = _read(file_path)
    if source is None:
        raise FileNotFoundError(f"no DAG file {file_path}")
    try:
        install(SecretsChain(secrets_backends(settings, environ, writer=f"preloading {file_path}")))
        os.environ.clear()
        os.environ.update(TaskEnvironment.of(settings).inherited(environ))
        _LOADED[file_path] = load_dags_from_source(file_path, source)
    finally:
        os.environ.clear()
        os.environ.update(environ)
        _restore(ignored)
    files = (file_path, *sorted(_outside_files(set(sys.modules) - before)))
    return Preloaded(files, digest(files, first=source))


def digest(files: Iterable[str], first: bytes | None = None) -> str:
    """A hash of the files' bytes, in order (a missing file counts as one, differently from an empty one);
    ``first``: the first file's bytes, already read."""
    hashed = hashlib.blake2b(digest_size=16)
    for index, file in enumerate(files):
        data = first if index == 0 and first is not None else _read(file)
        hashed.update(b"-" if data is None else b"+%d:" % len(data) + data)
    return hashed.hexdigest()


def stat_keys(files: Iterable[str]) -> tuple[StatKey | None, ...]:
    """Each file's stat key (infra/file_keys.py); None for a file that is not there."""
    keys: list[StatKey | None] = []
    for file in files:
        try:
            keys.append(stat_key(os.stat(file)))
        except OSError:
            keys.append(None)
    return tuple(keys)


def _read(file: str) -> bytes | None:
    try:
        with open(file, "rb") as opened:
            return opened.read()
    except OSError:
        return None


def _outside_files(names: Iterable[str]) -> set[str]:
    """The source files of these modules that the interpreter's installation does not hold."""
    installed = tuple({os.path.join(prefix, "") for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                                *_TOCK_PACKAGES)})
    files = set()
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str) and not os.path.abspath(file).startswith(installed):
            files.add(os.path.abspath(file))
    return files


def _restore(was: dict[int, object]) -> None:
    for signum, handler in was.items():
        if handler is not None:
            signal.signal(signum, handler)  # type: ignore[arg-type]  # what signal.signal returned
