"""The processor's shell driven in-process with real children and the real broker:
500 timeout cycles leak no descriptor and no zombie, and the original crash
(`OSError: handle is closed`) cannot happen when a kill lands between readiness and read."""

from __future__ import annotations

import os
import time

import pytest

from infra.log import KafkaEventLog
from schemas import (
    DagFileProcessed,
    DagParsed,
    DagParseFailed,
    ProcessorFinished,
    ProcessorKilled,
    ProcessorStarted,
)
from services.dag_processor.parsing import content_hash
from services.dag_processor.shell import DagProcessor
from tests.scenarios.dag_processor_support import (
    NO_REPARSE,
    good_dag_source,
    of_file,
    open_fds,
    parsing_events,
    wait_for,
    write_file,
    zombies_of,
)

pytestmark = pytest.mark.scenario

HANGING_FILES = 10
ROUNDS = 50  # x HANGING_FILES = 500 timeout cycles
WARM_UP_ROUNDS = 5  # the producer opens its broker connections during these


def hanging_source(round_number: int) -> str:
    return f"# round {round_number}\nimport time\nwhile True:\n    time.sleep(60)\n"


def parse_round(processor: DagProcessor, paths: list, round_number: int) -> None:
    """Rewrite every hanging file and step until each new content was parsed (and timed out)."""
    wanted = {str(path): content_hash(write_file(path.parent, path.name, hanging_source(round_number)).read_bytes())
              for path in paths}
    deadline = time.monotonic() + 60
    while any(parsed_content(processor, path) != file_hash for path, file_hash in wanted.items()):
        assert time.monotonic() < deadline, "a round of timeouts did not complete"
        processor.step()


def parsed_content(processor: DagProcessor, path: str) -> str | None:
    record = processor.state.files.get(path)
    return None if record is None else record.file_hash


def test_500_timeout_cycles_leak_no_descriptor_and_no_zombie(kafka_settings, make_settings, tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    write_file(folder, "good.py", good_dag_source("good"))
    hanging = [folder / f"hangs_{n}.py" for n in range(HANGING_FILES)]
    settings = make_settings(dags_folder=folder, parse_timeout=0.05, dag_scan_interval=0.01,
                             parse_parallelism=HANGING_FILES + 1, **NO_REPARSE)
    with KafkaEventLog(settings) as event_log:
        processor = DagProcessor(settings, event_log)
        for round_number in range(WARM_UP_ROUNDS):
            parse_round(processor, hanging, round_number)
        event_log.flush()
        fds_after_warm_up = open_fds()
        for round_number in range(WARM_UP_ROUNDS, ROUNDS):
            parse_round(processor, hanging, round_number)
        event_log.flush()
        fds_at_end = open_fds()
        assert not zombies_of(os.getpid())
        assert processor.state.children == {}
        processor.shutdown()
    assert fds_at_end <= fds_after_warm_up + 2, (fds_after_warm_up, fds_at_end)
    events = wait_for(lambda: _all_timeouts_written(settings, hanging), 30, "every timeout event")
    assert [type(event) for event in of_file(events, folder / "good.py")] == [
        ProcessorStarted, ProcessorFinished, DagFileProcessed]


def _all_timeouts_written(settings, hanging) -> list | None:
    events = parsing_events(settings)
    killed = [event for path in hanging for event in of_file(events, path, ProcessorKilled)]
    if len(killed) < HANGING_FILES * ROUNDS:
        return None
    assert {event.reason for event in killed} == {"timeout"}
    assert len([event for path in hanging for event in of_file(events, path, DagParseFailed)]) == len(killed)
    assert len([event for path in hanging for event in of_file(events, path, ProcessorStarted)]) == len(killed)
    assert not [event for path in hanging for event in of_file(events, path, ProcessorFinished)]
    return events


class KillBetweenReadinessAndRead:
    """The seam: when the child's result is ready, its deadline passes before the read."""

    def __init__(self, clock_offset: list[float]) -> None:
        self.clock_offset = clock_offset
        self.killed: list[str] = []

    def __call__(self, processor: DagProcessor, ready: list[str]) -> None:
        if ready and not self.killed:
            self.clock_offset[0] = 3600.0  # every deadline is now past
            processor.enforce_deadlines()
            self.killed = ready


def test_a_child_killed_between_readiness_and_read_never_raises_handle_closed(kafka_settings, make_settings,
                                                                               tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    path = write_file(folder, "quick.py", good_dag_source("quick"))
    settings = make_settings(dags_folder=folder, parse_timeout=30, dag_scan_interval=0.05, **NO_REPARSE)
    offset = [0.0]
    seam = KillBetweenReadinessAndRead(offset)
    with KafkaEventLog(settings) as event_log:
        processor = DagProcessor(settings, event_log, clock=lambda: time.time() + offset[0], before_collect=seam)
        while not seam.killed:
            processor.step()  # the step in which the kill lands must not raise
        for _ in range(5):
            processor.step()
        assert processor.state.children == {}
        assert not zombies_of(os.getpid())
        processor.shutdown()
    events = wait_for(lambda: of_file(parsing_events(settings), path, DagParseFailed), 30, "the timeout failure")
    events = of_file(parsing_events(settings), path)
    assert [type(event) for event in events] == [ProcessorStarted, ProcessorKilled, DagParseFailed]
    assert events[1].reason == "timeout" and events[1].processor_id == seam.killed[0]
    assert not [event for event in events if isinstance(event, DagParsed)]


def test_a_result_larger_than_the_pipe_buffer_arrives_whole(kafka_settings, make_settings, tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    write_file(folder, "huge.py", good_dag_source("huge", tasks=3000))  # a result of several 100 kB
    settings = make_settings(dags_folder=folder, dag_scan_interval=0.05)
    with KafkaEventLog(settings) as event_log:
        processor = DagProcessor(settings, event_log)
        deadline = time.monotonic() + 60
        while "huge" not in processor.state.dags:
            assert time.monotonic() < deadline, "the huge DAG was not parsed"
            processor.step()
        processor.shutdown()
    [processed] = of_file(parsing_events(settings), folder / "huge.py", DagFileProcessed)
    assert processed.dag_ids == ["huge"]
