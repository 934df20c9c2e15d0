"""`tock dag-processor` against the real broker, with real children that hang, crash, raise,
print megabytes, vanish or get killed, each beside good files that keep being served."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from schemas import DagFileRemoved, DagParsed, DagRemoved, ProcessorKilled, ProcessorStarted
from services.dag_processor.recovery import latest_definitions
from tests.scenarios.dag_processor_support import (
    NO_REPARSE,
    TOCK,
    ProcessorProcess,
    check_one_parse,
    dags_published,
    environment,
    good_dag_source,
    of_file,
    outcomes,
    parsing_events,
    process_state,
    still_serves_good_files,
    stop_cleanly,
    wait_for,
    write_file,
)

pytestmark = pytest.mark.scenario

HANG_TIMEOUT = 3  # seconds a parse may take in the cases that kill it

BAD_FILES = {
    # name: (source, how the child ends, the outcome's type, text in the outcome's error)
    "sleeps_forever": ("import time\nwhile True:\n    time.sleep(60)\n",
                       ("ProcessorKilled", "timeout"), "DagParseFailed", "longer than 3 s"),
    "exits_3": ("import os\nos._exit(3)\n", ("ProcessorKilled", "died"), "DagParseFailed", "exited with code 3"),
    "segfaults": ("import ctypes\nctypes.string_at(0)\n", ("ProcessorKilled", "died"), "DagParseFailed", "SIGSEGV"),
    "syntax_error": ("def broken(:\n", ("ProcessorFinished", None), "DagParseFailed", "SyntaxError"),
    "raises": ("raise RuntimeError('the file raises')\n", ("ProcessorFinished", None), "DagParseFailed",
               "RuntimeError: the file raises"),
    "prints_50mb": ("import sys\nsys.stdout.write('x' * 50_000_000)\nsys.stdout.flush()\n"
                    "sys.stderr.write('y' * 50_000_000)\n" + good_dag_source("noisy"),
                    ("ProcessorFinished", None), "DagFileProcessed", None),
}


@pytest.fixture
def dags_folder(tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    write_file(folder, "good_a.py", good_dag_source("good_a"))
    (folder / "nested").mkdir()
    write_file(folder / "nested", "good_b.py", good_dag_source("good_b"))
    return folder


@pytest.fixture
def processor_settings(kafka_settings, make_settings, dags_folder):
    """Settings for these scenarios: each file is parsed once per content (no periodic
    re-parse, no retry within a test), unless a test says otherwise."""
    def make(**overrides):
        values = {"dag_scan_interval": 0.1, **NO_REPARSE, **overrides}
        return make_settings(dags_folder=dags_folder, **values)
    return make


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_bad_file_costs_one_outcome_and_good_files_keep_being_served(processor_settings, dags_folder,
                                                                      tmp_path, name):
    source, (end_type, reason), outcome_type, error_text = BAD_FILES[name]
    bad = write_file(dags_folder, f"{name}.py", source)
    # Only the file that hangs meets the timeout; every other file gets plenty, so a busy
    # machine (printing 50 MB can take seconds under load) does not turn them into timeouts.
    settings = processor_settings(parse_timeout=HANG_TIMEOUT if reason == "timeout" else 30)
    processor = ProcessorProcess(settings, tmp_path / "processor.log")
    try:
        wait_for(dags_published(settings, "good_a", "good_b"), 30, "the good DAGs")
        wait_for(lambda: outcomes(parsing_events(settings), bad), 30, f"the outcome of {name}.py")
        still_serves_good_files(settings, dags_folder)
        end, outcome = check_one_parse(parsing_events(settings), bad)
        assert (type(end).__name__, getattr(end, "reason", None)) == (end_type, reason)
        assert type(outcome).__name__ == outcome_type
        if error_text:
            assert error_text in outcome.error
        stop_cleanly(processor)
    finally:
        processor.stop(signal.SIGKILL)


def test_a_file_deleted_while_it_is_parsed_gets_one_outcome_then_its_dag_is_removed(
        processor_settings, dags_folder, tmp_path):
    slow = write_file(dags_folder, "slow.py", "import time\ntime.sleep(1.5)\n" + good_dag_source("slow"))
    settings = processor_settings(parse_timeout=10)
    processor = ProcessorProcess(settings, tmp_path / "processor.log")
    try:
        wait_for(lambda: of_file(parsing_events(settings), slow, ProcessorStarted), 30, "slow.py started")
        slow.unlink()
        wait_for(lambda: of_file(parsing_events(settings), slow, DagFileRemoved), 30, "slow.py removed")
        events = parsing_events(settings)
        check_one_parse(events, slow)
        assert "slow" not in latest_definitions(settings)
        assert [event.dag_id for event in of_file(events, slow, DagRemoved)] in ([], ["slow"])
        still_serves_good_files(settings, dags_folder)
        stop_cleanly(processor)
    finally:
        processor.stop(signal.SIGKILL)


@pytest.fixture
def hanging_parse(processor_settings, dags_folder, tmp_path):
    """A processor whose child for hangs.py is running: (path, settings, processor, its ProcessorStarted)."""
    hangs = write_file(dags_folder, "hangs.py", "import time\ntime.sleep(600)\n")
    settings = processor_settings(parse_timeout=60)
    processor = ProcessorProcess(settings, tmp_path / "processor.log")
    try:
        [started] = wait_for(lambda: of_file(parsing_events(settings), hangs, ProcessorStarted), 30, "hangs.py")
        yield hangs, settings, processor, started
    finally:
        processor.stop(signal.SIGKILL)


def test_a_child_killed_from_outside_is_reported_died_once(hanging_parse, dags_folder):
    hangs, settings, processor, started = hanging_parse
    os.kill(started.pid, signal.SIGKILL)
    wait_for(lambda: outcomes(parsing_events(settings), hangs), 30, "the outcome of hangs.py")
    end, outcome = check_one_parse(parsing_events(settings), hangs)
    assert (end.reason, end.exit_code) == ("died", -signal.SIGKILL)
    assert "SIGKILL" in outcome.error
    still_serves_good_files(settings, dags_folder)
    stop_cleanly(processor)


def test_sigterm_kills_and_reaps_running_children_and_exits_zero(hanging_parse):
    hangs, settings, processor, started = hanging_parse
    assert processor.stop(signal.SIGTERM) == 0, processor.output()[-3000:]
    [killed] = of_file(parsing_events(settings), hangs, ProcessorKilled)
    assert (killed.processor_id, killed.reason) == (started.processor_id, "shutdown")
    assert outcomes(parsing_events(settings), hangs) == []
    with pytest.raises(ProcessLookupError):
        os.kill(started.pid, 0)  # killed and reaped: the pid is gone


def test_children_do_not_outlive_a_processor_killed_with_sigkill(hanging_parse):
    _hangs, _settings, processor, started = hanging_parse
    processor.stop(signal.SIGKILL)
    wait_for(lambda: process_state(started.pid) in (None, "Z"), 10, "the orphaned child to die")


def test_a_restart_republishes_nothing_unchanged_and_removes_what_vanished_meanwhile(
        processor_settings, dags_folder, tmp_path):
    settings = processor_settings()
    first = ProcessorProcess(settings, tmp_path / "first.log")
    try:
        wait_for(dags_published(settings, "good_a", "good_b"), 30, "the good DAGs")
        assert first.stop() == 0
    finally:
        first.stop(signal.SIGKILL)
    (dags_folder / "nested" / "good_b.py").unlink()
    second = ProcessorProcess(settings, tmp_path / "second.log")
    try:
        wait_for(lambda: "good_b" not in latest_definitions(settings), 30, "good_b removed after the restart")
        wait_for(lambda: len(of_file(parsing_events(settings), dags_folder / "good_a.py", ProcessorStarted)) == 2,
                 30, "good_a parsed again by the second processor")
        assert second.stop() == 0
    finally:
        second.stop(signal.SIGKILL)
    from infra.log import replay
    from schemas import DAGS

    published = [record.event for record in replay(settings, DAGS) if isinstance(record.event, DagParsed)]
    assert sorted(event.dag_id for event in published) == ["good_a", "good_b"]
    projected = subprocess.run([str(TOCK), "projections", "rebuild"], env=environment(settings),
                               capture_output=True, text=True)
    assert projected.returncode == 0, projected.stderr
    listed = subprocess.run([str(TOCK), "dags", "list", "--json"], env=environment(settings),
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert [row["dag_id"] for row in json.loads(listed.stdout)] == ["good_a"]
