"""A fork that fails (out of processes or memory) leaks neither end of the result pipe, in
``fork_parser`` and over many turns of the processor, which parses the file once fork works again.

The seam is the fork function itself (os.fork cannot be made to fail here without starving
the whole machine); everything around it is real: the pipe, the processor, the broker."""

from __future__ import annotations

import errno
import os
import time

import pytest

from infra.log import KafkaEventLog
from schemas import DagFileProcessed, ProcessorStarted
from services.dag_processor.children import fork_parser
from services.dag_processor.core import ParseResult
from services.dag_processor.shell import DagProcessor
from tests.scenarios.dag_processor_support import (
    NO_REPARSE,
    good_dag_source,
    of_file,
    parsing_events,
    wait_for,
    write_file,
)

pytestmark = pytest.mark.scenario


def open_descriptors() -> dict[int, str]:
    """fd -> what it refers to, for this process (the listing's own descriptor left out)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        found[int(name)] = target
    return found


def pipes() -> int:
    return sum(target.startswith("pipe:") for target in open_descriptors().values())


class FailingFork:
    """Fails like os.fork out of processes (EAGAIN) ``failures`` times, then forks; notes the
    descriptors open at each failed call that were not open before the first."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.baseline = open_descriptors()
        self.new_at_failure: list[dict[int, str]] = []

    def __call__(self) -> int:
        self.calls += 1
        if self.calls > self.failures:
            return os.fork()
        now = open_descriptors()
        self.new_at_failure.append({fd: target for fd, target in now.items() if self.baseline.get(fd) != target})
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")


def test_a_failed_fork_closes_both_ends_of_the_result_pipe():
    fork = FailingFork(failures=1)
    with pytest.raises(BlockingIOError):
        fork_parser(lambda: ParseResult(""), lambda: None, fork=fork)
    [created] = fork.new_at_failure
    assert len(created) == 2 and all(target.startswith("pipe:") for target in created.values()), created
    assert open_descriptors() == fork.baseline


def test_a_processor_whose_forks_fail_for_many_turns_leaks_nothing_and_parses_once_fork_works(
        kafka_settings, make_settings, tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    path = write_file(folder, "good.py", good_dag_source("good"))
    settings = make_settings(dags_folder=folder, dag_scan_interval=0.001, **NO_REPARSE)
    fork = FailingFork(failures=200)
    with KafkaEventLog(settings) as event_log:
        processor = DagProcessor(settings, event_log, fork=fork)
        processor.step()  # the producer opens its connections during the first turns
        pipes_before = pipes()
        deadline = time.monotonic() + 60
        while fork.calls < fork.failures:
            assert time.monotonic() < deadline, "the processor stopped trying to fork"
            processor.step()
        assert processor.state.children == {} and pipes() <= pipes_before  # 400 more before the fix
        while "good" not in processor.state.dags:
            assert time.monotonic() < deadline, "good.py was not parsed once fork worked"
            processor.step()
        processor.shutdown()
    events = wait_for(lambda: of_file(parsing_events(settings), path, DagFileProcessed), 30, "good.py's outcome")
    assert len(of_file(parsing_events(settings), path, ProcessorStarted)) == 1 and len(events) == 1
