"""The manager parses a DAG of Tock's own before forking (so children inherit the SDK's and the
encoder's caches); it must leave nothing behind that a child or the manager could trip on."""

from __future__ import annotations

import sys

from services.dag_processor.warm_up import warm_up_parser
from tock.callbacks import DAG_FILE_MODULE_PREFIX
from tock.dag import _active, _collectors


def test_warming_up_leaves_the_import_path_modules_and_sdk_state_as_they_were():
    path, modules = list(sys.path), set(sys.modules)
    warm_up_parser()
    warm_up_parser()  # idempotent
    assert sys.path == path
    assert [name for name in set(sys.modules) - modules if name.startswith(DAG_FILE_MODULE_PREFIX)] == []
    assert _collectors == [] and _active == []
