"""Live state = replayed state (issue 20, items 5 and 6): a scheduler's memory of a partition, built
the way its loop builds it (poll some records, fold them, decide when settled, commit the decisions
at the log's end, read them back later), always equals the fold of the same records in log order,
and a snapshot of a prefix plus the tail equals it too.

The log here is a list: the scheduler's decisions land at its end when they commit, after whatever
runners and the API appended while it decided (so they follow records it has not read yet, as on a
real broker). Runners follow the claim rule of services/runner/core/claim.py: the first TaskStarted
or kill of a try in log order decides who runs it. Hypothesis draws who writes what, and when.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.log import LogRecord
from schemas import ClearTask, KillTask, MarkTask, PodFinished, TaskFailed, TaskStarted, TaskSucceeded, TriggerDagRun
from services.runner.core.claim import winners
from services.scheduler.core import Evidence, SchedulerState, decide, fold
from services.scheduler.core.model import ACTIVE
from services.scheduler.core.snapshot import Snapshot, decode_snapshot, encode_snapshot
from services.scheduler.memory import PartitionMemory
from tests.unit.scheduler_fixtures import POLICY, parsed

DAG = parsed("etl", {"a": [], "b": ["a"]}, retries=1, retry_delay=2.0)
ACTIONS = ("trigger", "clear", "kill", "mark", "start", "end", "pod_end", "poll", "decide")


@dataclasses.dataclass
class World:
    """One partition's log, the scheduler reading it, and the runners and users writing to it."""

    log: list = dataclasses.field(default_factory=list)
    memory: PartitionMemory = dataclasses.field(default_factory=lambda: PartitionMemory(0))
    runners: dict = dataclasses.field(default_factory=dict)  # try key -> runner ids started
    now: float = 100.0
    serial: int = 0

    def __post_init__(self) -> None:
        self.memory.fold_record("dags", LogRecord("tock.dags", 0, 0, "etl", DAG, 0.0))

    def append(self, *events) -> None:
        self.log.extend(events)

    def replayed(self, upto: int | None = None) -> SchedulerState:
        return fold(fold(SchedulerState(), [DAG]), self.log[:upto])

    def act(self, action: str, pick: int) -> None:
        self.now += 1.0 + pick % 7
        self.serial += 1
        getattr(self, f"_{action}")(pick)

    # -- the users (the API's commands) --------------------------------------------------------
    def _trigger(self, pick: int) -> None:
        self.append(TriggerDagRun(dag_id="etl", request_id=f"t{self.serial}", at=self.now))

    def _instance_keys(self) -> list[tuple[str, str]]:
        state = self.replayed()
        return sorted((run_id, task_id) for (_dag, run_id), run in state.runs.items() for task_id in run.tasks)

    def _command(self, pick: int, build) -> None:
        keys = self._instance_keys()
        if keys:
            run_id, task_id = keys[pick % len(keys)]
            self.append(build(dag_id="etl", run_id=run_id, task_id=task_id, request_id=f"c{self.serial}",
                              at=self.now))

    def _clear(self, pick: int) -> None:
        self._command(pick, ClearTask)

    def _kill(self, pick: int) -> None:
        self._command(pick, KillTask)

    def _mark(self, pick: int) -> None:
        self._command(pick, lambda **fields: MarkTask(state="success" if pick % 2 else "failed", **fields))

    # -- the runners ----------------------------------------------------------------------------
    def _queued_tries(self) -> list[tuple[str, str, str, int]]:
        return sorted({(event.dag_id, event.run_id, event.task_id, event.try_number) for event in self.log
                       if type(event).__name__ == "TaskQueued"})

    def _start(self, pick: int) -> None:
        tries = self._queued_tries()
        if tries:
            key = tries[pick % len(tries)]
            runner_id = f"r{self.serial}"
            self.runners.setdefault(key, []).append(runner_id)
            self.append(TaskStarted(dag_id=key[0], run_id=key[1], task_id=key[2], try_number=key[3],
                                    runner_id=runner_id, hostname="h", pid=self.serial, at=self.now))

    def _end(self, pick: int) -> None:
        """A runner that won its claim (by the log's order) reports its outcome, once."""
        ended = {(event.dag_id, event.run_id, event.task_id, event.try_number) for event in self.log
                 if isinstance(event, TaskSucceeded | TaskFailed) and event.runner_id}
        claims = [event for event in self.log if type(event).__name__ in
                  ("TaskStarted", "TaskKillRequested", "TaskDeclaredDead")]
        won = sorted(key for key, ids in self.runners.items() for runner_id in ids
                     if key not in ended and key in winners(claims, {key: runner_id}).won)
        if won:
            key = won[pick % len(won)]
            runner_id = next(rid for rid in self.runners[key] if key in winners(claims, {key: rid}).won)
            outcome = TaskSucceeded if pick % 3 else TaskFailed
            extra = {} if outcome is TaskSucceeded else {"error": "boom"}
            self.append(outcome(dag_id=key[0], run_id=key[1], task_id=key[2], try_number=key[3],
                                runner_id=runner_id, at=self.now, **extra))

    # -- the scheduler --------------------------------------------------------------------------
    def _poll(self, pick: int) -> None:
        self.read(1 + pick % 4)

    def read(self, count: int) -> None:
        start = self.memory.positions["events"]
        for offset in range(start, min(len(self.log), start + count)):
            self.memory.fold_record("events", LogRecord("tock.events", 0, offset, "etl", self.log[offset], 0.0))

    def _pod_end(self, pick: int) -> None:
        """The pod watcher saw a started try's pod end (after its runner's outcome, if it wrote one);
        the scheduler writes PodFinished, as it commits any decision (item 6: the pod's news must not
        outrun the runner's outcome)."""
        started = sorted(self.runners)
        if started:
            key = started[pick % len(started)]
            ended = PodFinished(dag_id=key[0], run_id=key[1], task_id=key[2], try_number=key[3],
                                pod_name=f"pod-{key[3]}", phase="Succeeded", pod_uid=f"u{self.serial}", at=self.now)
            self.append(ended)
            self.memory.committed([ended], self.now)

    def _decide(self, pick: int) -> None:
        if not self.memory.settled(self.now):
            return
        decisions = decide(self.memory.state, self.now, POLICY, None, Evidence(self.now))
        self.append(*decisions)  # committed: at the log's end, after anything others wrote meanwhile
        self.memory.committed(decisions, self.now)


steps = st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 50)), min_size=5, max_size=60)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.integers(0, 1000))
def test_the_live_memory_is_always_the_fold_of_the_log_it_read_in_order(actions, cut):
    world = World()
    for action, pick in actions:
        world.act(action, pick)
        read = world.memory.positions["events"]
        assert world.memory.state == world.replayed(read), f"after {action}: live state differs from a replay"
    world.read(len(world.log))
    full = world.replayed()
    assert world.memory.state == full
    # A snapshot of any prefix, restored, then folded on with the tail, is the same state.
    cut %= len(world.log) + 1
    snapshot = decode_snapshot(encode_snapshot(Snapshot(0, world.replayed(cut), {"events": cut})))
    assert fold(snapshot.state, world.log[cut:]) == full


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_each_try_has_one_winner_and_none_is_active_beside_an_older_try_running_unbidden(actions):
    """What the promise is for: whatever the interleaving, each try has at most one runner that won
    its claim, and no try of an instance is active beside an older one still running unbidden (a
    try killed or declared dead is told to stop by the log: its runner obeys)."""
    world = World()
    for action, pick in actions:
        world.act(action, pick)
    claims = [event for event in world.log if type(event).__name__ in
              ("TaskStarted", "TaskKillRequested", "TaskDeclaredDead")]
    for key, runner_ids in world.runners.items():
        assert sum(key in winners(claims, {key: runner_id}).won for runner_id in runner_ids) <= 1
    state = world.replayed()
    for run in state.runs.values():
        for instance in run.tasks.values():
            if instance.state in ACTIVE:
                older = [key for key in world.runners if key[1:3] == (run.run_id, instance.task_id)
                         and key[3] < instance.try_number and _still_running(world, claims, key)]
                assert not older, f"try {instance.try_number} is active beside older tries still running {older}"


def _still_running(world: World, claims: list, key) -> bool:
    def of_key(event) -> bool:
        return (event.dag_id, event.run_id, event.task_id, event.try_number) == key
    ended = any(of_key(event) for event in world.log if isinstance(event, TaskSucceeded | TaskFailed)
                and event.runner_id)
    told_to_stop = any(of_key(event) for event in claims if not isinstance(event, TaskStarted))
    won = any(key in winners(claims, {key: runner_id}).won for runner_id in world.runners[key])
    return won and not ended and not told_to_stop
