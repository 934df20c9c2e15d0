"""PodTending remembers what it wrote of a pod only while the observation can come again
(services/scheduler/pod_tending.py): once a pod's end is written and the watcher no longer holds it
(deleted), or its try is over or its partition gone, its marks go after FORGET_AFTER seconds;
until then a repeat is still written once only. The watcher here is a stand-in for the Kubernetes
watcher's Watching ability (its lists and deletes against the real API server are tested in
tests/scenarios/test_kubernetes_executor.py); the scheduler state is the real core's fold."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas import PodFinished, PodStarted
from services.scheduler.holdings import Holdings
from services.scheduler.memory import PartitionMemory
from services.scheduler.pod_tending import FORGET_AFTER, PodTending
from tests.unit.scheduler_fixtures import RUN, created, launched, parsed, queued, started, state_of, succeeded

KEY = ("etl", RUN, "a", 1)


def pod_started(uid: str = "u1", try_number: int = 1) -> PodStarted:
    return PodStarted(dag_id="etl", run_id=RUN, task_id="a", try_number=try_number, pod_name=f"pod-{uid}",
                      pod_uid=uid, node="n1", at=5.0)


def pod_finished(uid: str = "u1", try_number: int = 1) -> PodFinished:
    return PodFinished(dag_id="etl", run_id=RUN, task_id="a", try_number=try_number, pod_name=f"pod-{uid}",
                       phase="Succeeded", reason="Completed", exit_code=0, pod_uid=uid, node="n1", at=7.0)


@dataclass(frozen=True)
class FinishedPod:
    name: str
    uid: str
    key: tuple[str, str, str, int]


@dataclass
class StandInWatcher:
    """Queues what the test says was seen; holds finished pods until they are deleted."""

    seen: list[PodStarted | PodFinished] = field(default_factory=list)
    finished: dict[str, FinishedPod] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)

    def watch(self, partitions: list[int], wait: float = 0.0) -> None:
        pass

    def observations(self) -> list[PodStarted | PodFinished]:
        seen, self.seen = self.seen, []
        return seen

    def finished_pods(self) -> list[FinishedPod]:
        return list(self.finished.values())

    def delete_finished(self, names: list[str]) -> None:
        self.deleted += names
        self.finished = {uid: pod for uid, pod in self.finished.items() if pod.name not in names}

    def saw(self, event: PodStarted | PodFinished) -> None:
        self.seen.append(event)
        if isinstance(event, PodFinished):
            self.finished[event.pod_uid] = FinishedPod(event.pod_name, event.pod_uid,
                                                       (event.dag_id, event.run_id, event.task_id, event.try_number))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


RUNNING = [parsed(), created(), queued("a", executor="kubernetes"), launched("a"), started("a")]


def tending(*events) -> tuple[PodTending, StandInWatcher, Holdings, Clock]:
    watcher, clock = StandInWatcher(), Clock()
    holdings = Holdings(memories={0: PartitionMemory(0, state_of(*events))})
    return PodTending([watcher], holdings, 1, clock=clock), watcher, holdings, clock


def written(tend: PodTending) -> list[str]:
    return [type(event).__name__ for _partition, event in tend.tend()]


def test_a_deleted_pod_of_an_ended_try_is_forgotten_after_a_while_and_a_late_repeat_meanwhile_is_not_written():
    tend, watcher, holdings, clock = tending(*RUNNING)
    watcher.saw(pod_started())
    assert written(tend) == ["PodStarted"]
    holdings.memories[0].fold(succeeded("a"))
    watcher.saw(pod_finished())
    assert written(tend) == ["PodFinished"]
    assert watcher.deleted == ["pod-u1"] and tend.pods_remembered == 1
    clock.now += FORGET_AFTER / 2
    watcher.seen.append(pod_finished())  # a list sent before the delete, answered after it
    assert written(tend) == [] and tend.pods_remembered == 1
    clock.now += FORGET_AFTER
    assert written(tend) == [] and tend.pods_remembered == 0


def test_a_finished_pod_the_watcher_still_holds_is_remembered_however_long():
    tend, watcher, _holdings, clock = tending(*RUNNING)  # the try is still active: the pod is not deleted
    watcher.saw(pod_finished())
    assert written(tend) == ["PodFinished"]
    for _turn in range(3):
        clock.now += FORGET_AFTER
        watcher.saw(pod_finished())  # every relist repeats it
        assert written(tend) == []
    assert tend.pods_remembered == 1 and watcher.deleted == []


def test_a_running_pod_of_an_active_try_is_remembered_and_its_start_not_written_twice():
    tend, watcher, _holdings, clock = tending(*RUNNING)
    watcher.saw(pod_started())
    assert written(tend) == ["PodStarted"]
    clock.now += 3 * FORGET_AFTER
    watcher.saw(pod_started())
    assert written(tend) == [] and tend.pods_remembered == 1


def test_a_started_pod_whose_try_is_over_is_forgotten_though_its_end_was_never_seen():
    tend, watcher, holdings, clock = tending(*RUNNING)
    watcher.saw(pod_started())
    assert written(tend) == ["PodStarted"]
    holdings.memories[0].fold(succeeded("a"))  # the watch missed the pod's end and deletion
    written(tend)
    clock.now += FORGET_AFTER
    assert written(tend) == [] and tend.pods_remembered == 0


def test_the_pods_of_a_partition_no_longer_owned_are_forgotten():
    tend, watcher, holdings, clock = tending(*RUNNING)
    watcher.saw(pod_started())
    assert written(tend) == ["PodStarted"]
    holdings.forget(0)
    written(tend)
    clock.now += FORGET_AFTER
    written(tend)
    assert tend.pods_remembered == 0


def test_many_pods_come_and_go_and_only_the_recent_ones_are_remembered():
    tend, watcher, holdings, clock = tending(*RUNNING)
    holdings.memories[0].fold(succeeded("a"))
    for number in range(200):
        watcher.saw(pod_finished(uid=f"u{number}"))  # each try's pod ends after its outcome, and is deleted
        written(tend)
        clock.now += 10.0
    assert tend.pods_remembered <= FORGET_AFTER / 10.0 + 1
