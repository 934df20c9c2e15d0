"""`tock dag-processor` parses files again whose bytes did not change: after a transient
failure (with backoff), periodically, and when a helper module beside them changed."""

from __future__ import annotations

import signal

import pytest

from infra.log import replay
from schemas import DAGS, DagFileProcessed, DagParsed, DagParseFailed, ProcessorKilled, ProcessorStarted
from services.dag_processor.recovery import latest_definitions
from tests.scenarios.dag_processor_support import (
    ProcessorProcess,
    dags_published,
    good_dag_source,
    of_file,
    parsing_events,
    stop_cleanly,
    wait_for,
    write_file,
)

pytestmark = pytest.mark.scenario

NEVER = 3600  # seconds: longer than any test, so only the rule under test can explain a parse


@pytest.fixture
def dags_folder(tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    write_file(folder, "good_a.py", good_dag_source("good_a"))
    return folder


@pytest.fixture
def processor_settings(kafka_settings, make_settings, dags_folder):
    def make(**overrides):
        values = {"dag_scan_interval": 0.1, "dag_reparse_interval": NEVER, "parse_retry_backoff": NEVER,
                  **overrides}
        return make_settings(dags_folder=dags_folder, **values)
    return make


@pytest.fixture
def running(tmp_path):
    """Start a processor with ``running(settings)``; it is killed at the end whatever happened."""
    started: list[ProcessorProcess] = []

    def start(settings) -> ProcessorProcess:
        started.append(ProcessorProcess(settings, tmp_path / f"processor-{len(started)}.log"))
        return started[-1]

    yield start
    for processor in started:
        processor.stop(signal.SIGKILL)


def published_command(settings, dag_id: str) -> str | None:
    latest = latest_definitions(settings).get(dag_id)
    return None if latest is None else latest.definition.tasks[0].command


def test_an_unchanged_file_that_timed_out_once_is_parsed_again_after_the_backoff(
        processor_settings, dags_folder, tmp_path, running):
    slow_now = tmp_path / "slow-now"  # outside the DAGs folder: the file's bytes never change
    slow_now.touch()
    flaky = write_file(dags_folder, "flaky.py", f"import os, time\nwhile os.path.exists({str(slow_now)!r}):\n"
                                                f"    time.sleep(0.1)\n" + good_dag_source("flaky"))
    settings = processor_settings(parse_timeout=2, parse_retry_backoff=1)
    processor = running(settings)
    [failure] = wait_for(lambda: of_file(parsing_events(settings), flaky, DagParseFailed), 30, "the timeout")
    assert "longer than 2 s" in failure.error
    slow_now.unlink()  # the transient cause is gone
    wait_for(dags_published(settings, "flaky"), 30, "flaky published by a retry")
    events = parsing_events(settings)
    starts = of_file(events, flaky, ProcessorStarted)
    assert len({start.file_hash for start in starts}) == 1, "the bytes never changed"
    killed = of_file(events, flaky, ProcessorKilled)
    assert killed and {event.reason for event in killed} == {"timeout"}
    gaps = [later.at - earlier.at for earlier, later in zip(killed, starts[1:], strict=False)]
    assert all(gap >= 1.0 for gap in gaps), f"a retry came before its backoff: {gaps}"
    stop_cleanly(processor)


def test_an_unchanged_file_is_parsed_again_every_interval_and_its_same_definition_not_republished(
        processor_settings, dags_folder, running):
    # Every interval: with the default forced re-parse every 10 intervals, three parses take 20 s and more.
    settings = processor_settings(dag_reparse_interval=1, dag_forced_reparse_every=1)
    processor = running(settings)
    good = dags_folder / "good_a.py"
    processed = wait_for(lambda: (found := of_file(parsing_events(settings), good, DagFileProcessed))[2:] and found,
                         30, "three parses of the unchanged good_a.py")
    assert len({event.file_hash for event in processed}) == 1
    gaps = [later.at - earlier.at for earlier, later in zip(processed, processed[1:], strict=False)]
    assert all(gap >= 1.0 for gap in gaps), gaps
    stop_cleanly(processor)
    published = [record.event for record in replay(settings, DAGS) if isinstance(record.event, DagParsed)]
    assert [event.dag_id for event in published] == ["good_a"]


def test_an_unchanged_file_is_parsed_again_only_every_forced_interval(processor_settings, dags_folder, running):
    # Interval 1 s, forced every 4: after the first parse, the next comes at about 4 s, not 1 s.
    settings = processor_settings(dag_reparse_interval=1, dag_forced_reparse_every=4)
    processor = running(settings)
    good = dags_folder / "good_a.py"
    processed = wait_for(lambda: (found := of_file(parsing_events(settings), good, DagFileProcessed))[1:] and found,
                         60, "two parses of the unchanged good_a.py")
    stop_cleanly(processor)
    gaps = [later.at - earlier.at for earlier, later in zip(processed, processed[1:], strict=False)]
    assert all(gap >= 4.0 for gap in gaps), gaps
    assert processed[0].imports == {}  # it imports nothing of the folder: nothing else to watch


HELPER_USER = """\
from tock import DAG, BashTask
import common
with DAG("uses_helper", schedule="@hourly"):
    BashTask("t", common.COMMAND)
"""


def test_a_change_to_a_helper_module_is_picked_up_by_the_dag_files_that_import_it(
        processor_settings, dags_folder, running):
    write_file(dags_folder, "common.py", "COMMAND = 'echo v1'\n")
    user = write_file(dags_folder, "uses_helper.py", HELPER_USER)
    settings = processor_settings()
    processor = running(settings)
    wait_for(lambda: published_command(settings, "uses_helper") == "echo v1", 30, "the DAG built with v1")
    write_file(dags_folder, "common.py", "COMMAND = 'echo v2'\n")  # same size, maybe the same second
    wait_for(lambda: published_command(settings, "uses_helper") == "echo v2", 30, "the DAG rebuilt with v2")
    assert len({event.file_hash for event in of_file(parsing_events(settings), user, ProcessorStarted)}) == 1
    (dags_folder / "common.py").unlink()
    [failure] = wait_for(lambda: of_file(parsing_events(settings), user, DagParseFailed), 30,
                         "uses_helper.py failing without its helper")
    assert "No module named 'common'" in failure.error
    stop_cleanly(processor)
