"""The soak's checks that an outcome that does not count changes nothing: only the first outcome
of a try in log order, from its claimant (the runner of its first TaskStarted), or the owner's
TaskDeclaredDead, ends a try; a late success (a runner frozen past the heartbeat timeout, declared
dead and thawed; a second launch that lost the claim) is recorded and moves nothing on. Pure
functions over plain values, like tests/soak/checks.py."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from schemas import (
    DagRunFinished,
    MarkTask,
    TaskCleared,
    TaskDeclaredDead,
    TaskFailed,
    TaskKilled,
    TaskLaunched,
    TaskQueued,
    TaskRemoved,
    TaskRetryScheduled,
    TaskSkipped,
    TaskStarted,
    TaskSucceeded,
)
from tests.soak.checks import OUTCOMES, Outcome, TryKey, Violation, name_of, try_key

Upstream = Mapping[str, Mapping[str, Sequence[str]]]  # dag_id -> task_id -> the tasks it waits for


@dataclass
class _Instance:
    """One task instance of a run as the log stands at some point: its current try and, per try,
    its claimant and the first outcome in log order (the one that counts)."""

    current: int | None = None
    cleared: bool = False
    retrying: bool = False  # its current try failed and a retry was scheduled: the next try is that retry
    judged: bool = True  # False once marked, skipped or removed: its state is not its tries' to say
    claimants: dict[int, str] = field(default_factory=dict)  # try number -> runner id
    outcomes: dict[int, Outcome] = field(default_factory=dict)  # try number -> the outcome that counts

    def outcome_of(self, try_number: int) -> Outcome | None:
        return self.outcomes.get(try_number)

    def succeeded(self) -> bool:
        """Whether the current try's outcome that counts is a success."""
        return not self.cleared and self.current is not None \
            and isinstance(self.outcome_of(self.current), TaskSucceeded)

    def how(self) -> str:
        if self.current is None:
            return "was never queued" + "".join(f" (yet try {number} ran and ended {type(outcome).__name__})"
                                                for number, outcome in self.outcomes.items())
        if self.cleared:
            return f"try {self.current} was cleared"
        outcome = self.outcome_of(self.current)
        return f"try {self.current} " + ("had not ended" if outcome is None else f"ended {type(outcome).__name__}")


def _outcome(instance: _Instance, event: Outcome) -> None:
    """The first outcome of a try from its claimant (or the owner's verdict) is the one that counts."""
    claimant = instance.claimants.get(event.try_number)
    from_runner = not isinstance(event, TaskDeclaredDead)
    if event.try_number in instance.outcomes or (from_runner and claimant not in (None, event.runner_id)):
        return
    instance.outcomes[event.try_number] = event


def _fold_instance(instance: _Instance, event: object) -> None:
    match event:
        case TaskQueued():
            if instance.current is None or event.try_number > instance.current:
                instance.current, instance.cleared, instance.retrying = event.try_number, False, False
        case TaskRetryScheduled():
            instance.retrying = instance.retrying or event.try_number == instance.current
        case TaskStarted():
            instance.claimants.setdefault(event.try_number, event.runner_id)
        case TaskSucceeded() | TaskFailed() | TaskDeclaredDead() | TaskKilled():
            _outcome(instance, event)
        case TaskCleared():
            instance.cleared = True
        case MarkTask() | TaskSkipped() | TaskRemoved():
            instance.judged = False


_INSTANCE_EVENTS = (TaskQueued, TaskStarted, *OUTCOMES, TaskRetryScheduled, TaskCleared, MarkTask, TaskSkipped,
                    TaskRemoved)


def successes_that_did_not_count(events: Iterable[object], upstream: Upstream) -> list[Violation]:
    """Only an outcome that counts moves a run on: the first outcome of a try in log order, from the
    runner whose TaskStarted came first (a TaskDeclaredDead, the owner's verdict, counts as the
    try's end). A late success (of a try declared dead and thawed, or of a runner that lost the
    claim) must change nothing, so:

    - a task is queued (its first try, or a new one after a clear; a retry follows its own failure,
      not its upstream) only once every task it waits for has a current try whose outcome that
      counts is a success ("queued-before-upstream-succeeded");
    - a run ends "success" only when every task of its DAG has one ("run-succeeded-without-success").

    ``upstream``: each DAG's tasks and what they wait for (from its DagParsed); DAGs not in it, and
    task instances marked, skipped or removed, are not judged."""
    runs: dict[tuple[str, str], dict[str, _Instance]] = defaultdict(lambda: defaultdict(_Instance))
    found: list[Violation] = []
    for event in events:
        if isinstance(event, TaskQueued | DagRunFinished) and event.dag_id in upstream:
            tasks = runs[(event.dag_id, event.run_id)]
            if isinstance(event, TaskQueued):
                waits = () if tasks[event.task_id].retrying else upstream[event.dag_id].get(event.task_id, ())
                found += [Violation("queued-before-upstream-succeeded", f"{name_of(try_key(event))} queued at "
                                    f"{event.at:.3f} while its upstream {why}") for why in _unsuccessful(tasks, waits)]
            elif event.state == "success":
                found += [Violation("run-succeeded-without-success", f"{event.dag_id} / {event.run_id} finished "
                                    f"success at {event.at:.3f} while its task {why}")
                          for why in _unsuccessful(tasks, upstream[event.dag_id])]
        if isinstance(event, _INSTANCE_EVENTS):
            _fold_instance(runs[(event.dag_id, event.run_id)][event.task_id], event)
    return found


def launched_but_never_queued(events: Iterable[object]) -> list[Violation]:
    """A scheduler launches only what it decided and committed: every TaskLaunched of a try follows
    that try's TaskQueued in the log (live state = replayed state: a launch of a try the committed
    log never queued means the scheduler acted on a decision its transaction did not carry)."""
    queued: set[TryKey] = set()
    found = []
    for event in events:
        if isinstance(event, TaskQueued):
            queued.add(try_key(event))
        elif isinstance(event, TaskLaunched) and try_key(event) not in queued:
            queued.add(try_key(event))  # once per try
            found.append(Violation("launched-but-never-queued", f"{name_of(try_key(event))} launched by "
                                   f"{event.scheduler_id} at {event.at:.3f} ({event.handle}) with no TaskQueued "
                                   "of that try before it in the log"))
    return found


def _unsuccessful(tasks: Mapping[str, _Instance], task_ids: Iterable[str]) -> list[str]:
    """For each judged task of ``task_ids`` whose current try has no success that counts: why not."""
    return [f"{task_id} {tasks[task_id].how()}{_late(tasks[task_id])}" for task_id in task_ids
            if tasks[task_id].judged and not tasks[task_id].succeeded()]


def _late(instance: _Instance) -> str:
    outcome = instance.outcome_of(instance.current) if instance.current is not None else None
    return " (a later success of that try does not count)" if isinstance(outcome, TaskDeclaredDead | TaskFailed) else ""


def late_outcomes(events: Iterable[object]) -> list[Outcome]:
    """Outcomes of a try read after the one that counts (a thawed runner reporting after it was
    declared dead, a second report): recorded, and meant to change nothing."""
    first: set[TryKey] = set()
    late = []
    for event in events:
        if isinstance(event, OUTCOMES):
            if try_key(event) in first:
                late.append(event)
            first.add(try_key(event))
    return late


def late_successes_in_tables(events: Iterable[object], rows: Iterable[dict]) -> list[Violation]:
    """The task instance tables (rows of `tock tasks list --json`) show "success" for a try only
    when its outcome that counts is a success (or it was marked so): a late success of a try
    declared dead, or of a runner that lost the claim, must not show as the task's state."""
    instances: dict[tuple[str, str, str], _Instance] = defaultdict(_Instance)
    for event in events:
        if isinstance(event, _INSTANCE_EVENTS):
            _fold_instance(instances[(event.dag_id, event.run_id, event.task_id)], event)
    found = []
    for row in rows:
        instance = instances.get((row.get("dag_id"), row.get("run_id"), row.get("task_id")))
        number = row.get("try_number")
        if row.get("state") != "success" or instance is None or not instance.judged or number is None:
            continue
        outcome = instance.outcome_of(number)
        if not isinstance(outcome, TaskSucceeded):
            said = "no outcome" if outcome is None else f"{type(outcome).__name__} at {outcome.at:.3f}"
            found.append(Violation("late-success-counted", (
                f"{row.get('dag_id')} / {row.get('run_id')} / {row.get('task_id')} try {number}: the tables say "
                f"success, but the outcome of that try that counts is {said}")))
    return found
