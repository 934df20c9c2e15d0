"""A parser child records the DAGs-folder modules a parse imported, with the hash of the
bytes it compiled (run in a real forked child: recording changes the import machinery)."""

from __future__ import annotations

import os
import py_compile
import select
import time
from functools import partial
from pathlib import Path

from services.dag_processor.children import fork_parser
from services.dag_processor.core import ParseResult
from services.dag_processor.parsing import MAX_IMPORTS_SIZE, content_hash, parse_dag_file, publishable_imports
from services.dag_processor.shell import _prepare_child

DAG_FILE = """\
from tock import DAG, BashTask
import json
import common
from pkg import mod
with DAG("uses_helpers", schedule="@hourly"):
    BashTask("t", common.COMMAND + mod.SUFFIX)
"""


def parse_in_child(file_path: Path, folder: Path) -> ParseResult:
    handle = fork_parser(partial(parse_dag_file, str(file_path), str(folder)), partial(_prepare_child, str(folder)))
    try:
        deadline = time.monotonic() + 30
        while not handle.exited and time.monotonic() < deadline:
            poller = select.poll()
            for fd in handle.watched_fds():
                poller.register(fd, select.POLLIN)
            for fd, _ in poller.poll(1000):
                handle.on_ready(fd)
        result = handle.result()
    finally:
        handle.release()
    assert result is not None, "the child sent no report"
    return result


def helpers_folder(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "common.py").write_text("COMMAND = 'echo v1'\n")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text("SUFFIX = ' a'\n")
    (tmp_path / "uses_helpers.py").write_text(DAG_FILE)
    return tmp_path


def test_the_modules_of_the_folder_a_parse_imports_are_recorded_with_their_hashes(tmp_path):
    folder = helpers_folder(tmp_path)
    result = parse_in_child(folder / "uses_helpers.py", folder)
    assert result.error is None
    expected = {str(folder / name): content_hash((folder / name).read_bytes())
                for name in ("common.py", "pkg/__init__.py", "pkg/mod.py")}
    assert dict(result.imports or ()) == expected  # json (outside the folder) is not recorded


def test_a_module_is_compiled_from_its_source_never_from_a_stale_pyc(tmp_path):
    # A .pyc is trusted while the source's size and whole-second mtime match: an edit within
    # the same second keeping the size would be hidden, and the recorded hash would lie.
    folder = helpers_folder(tmp_path)
    common = folder / "common.py"
    py_compile.compile(str(common))
    stat = common.stat()
    common.write_text("COMMAND = 'echo v2'\n")  # same size
    os.utime(common, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = parse_in_child(folder / "uses_helpers.py", folder)
    [(definition, _)] = result.dags
    assert definition.tasks[0].command == "echo v2 a"
    assert dict(result.imports or ())[str(common)] == content_hash(b"COMMAND = 'echo v2'\n")


def test_a_file_that_imports_nothing_from_the_folder_records_no_import(tmp_path):
    (tmp_path / "alone.py").write_text("from tock import DAG, BashTask\nimport json\n"
                                       "with DAG('alone', schedule='@hourly'):\n    BashTask('t', 'echo')\n")
    assert parse_in_child(tmp_path / "alone.py", tmp_path).imports == ()


def test_imports_too_large_to_publish_are_not_recorded():
    many = {f"/dags/{'x' * 100}_{n}.py": "h" * 64 for n in range(MAX_IMPORTS_SIZE // 150)}
    assert publishable_imports(many) is None
    assert publishable_imports({"/dags/b.py": "h2", "/dags/a.py": "h1"}) == (("/dags/a.py", "h1"),
                                                                             ("/dags/b.py", "h2"))
