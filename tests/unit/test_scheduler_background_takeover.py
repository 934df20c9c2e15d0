"""Takeovers run on a thread of their own; stale results (revoked, or assigned again) are dropped.

The work is a stand-in for settle + snapshot + replay (which need the broker: the scenarios in
tests/scenarios/test_scheduler_snapshots.py run the real one); here it blocks until released, to
show that starting a takeover does not block its caller (the poll thread) and what the epochs keep.
"""

from __future__ import annotations

import threading
import time

from services.scheduler.memory import PartitionMemory
from services.scheduler.takeover import BackgroundTakeovers, Takeover, TakeoverConfig

CONFIG = TakeoverConfig(settings=None, group_id="g", client_id="c", settle_timeout=1.0)  # unused by the stand-in


class HeldReplay:
    """Takeover work that waits until released, recording the threads it ran on."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: list[str] = []

    def __call__(self, _config: TakeoverConfig, takeover: Takeover) -> Takeover:
        self.threads.append(threading.current_thread().name)
        assert self.release.wait(10), "never released"
        takeover.rebuilt = {partition: PartitionMemory(partition) for partition in takeover.partitions}
        return takeover


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.01)


def wait_for_results(takeovers: BackgroundTakeovers, timeout: float = 10.0) -> list[Takeover]:
    deadline = time.monotonic() + timeout
    while not (done := takeovers.finished()):
        assert time.monotonic() < deadline, "no takeover finished"
        time.sleep(0.01)
    return done


def test_starting_a_takeover_returns_at_once_and_it_runs_on_another_thread():
    work = HeldReplay()
    takeovers = BackgroundTakeovers(CONFIG, work)
    started = time.monotonic()
    takeovers.start([1, 2])
    assert time.monotonic() - started < 1.0
    assert takeovers.under_way == {1, 2} and takeovers.finished() == []
    work.release.set()
    [done] = wait_for_results(takeovers)
    assert done.partitions == [1, 2] and set(done.rebuilt) == {1, 2}
    assert work.threads and work.threads[0] != threading.current_thread().name
    assert takeovers.under_way == set()


def test_a_partition_revoked_while_its_replay_runs_is_dropped_from_the_result():
    work = HeldReplay()
    takeovers = BackgroundTakeovers(CONFIG, work)
    takeovers.start([1, 2])
    takeovers.cancel([2])
    work.release.set()
    [done] = wait_for_results(takeovers)
    assert done.partitions == [1] and set(done.rebuilt) == {1}


def test_a_partition_assigned_again_keeps_only_the_newest_replay():
    first, second = HeldReplay(), HeldReplay()
    takeovers = BackgroundTakeovers(CONFIG, first)
    takeovers.start([3])
    takeovers.cancel([3])
    takeovers._work = second  # the second assignment's replay
    takeovers.start([3])
    first.release.set()
    wait_until(lambda: takeovers._done.qsize() == 1)  # the stale replay finished first: not installed
    assert takeovers.finished() == []
    second.release.set()
    [done] = wait_for_results(takeovers)
    assert done.partitions == [3]


def test_a_replay_that_is_revoked_entirely_yields_nothing():
    work = HeldReplay()
    takeovers = BackgroundTakeovers(CONFIG, work)
    takeovers.start([5])
    takeovers.cancel([5])
    work.release.set()
    wait_until(lambda: takeovers._done.qsize() == 1)
    assert takeovers.finished() == [] and takeovers.under_way == set()
