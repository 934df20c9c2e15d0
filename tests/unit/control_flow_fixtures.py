"""Builders for the scheduler core's control-flow tests: task definitions with trigger rules,
setups, teardowns and choices; the events of a try's end; and a run driven by ``decide``/``evolve``.

Every DAG here is "etl" and every run ``RUN`` (tests.unit.scheduler_fixtures), so those builders
(``created``, ``queued``, ``started``, ``failed``) combine with these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schemas import (
    DagDefinition,
    DagParsed,
    DagRunFinished,
    TaskDefinition,
    TaskGroupDefinition,
    TaskSkipped,
    TaskSucceeded,
    TaskTrySkipped,
    TaskUpstreamFailed,
)
from services.scheduler.core import SchedulerState, decide, evolve, fold
from tests.unit.scheduler_fixtures import POLICY, RUN, created, failed, queued, started


def task(task_id: str, *upstream: str, rule: str = "all_success", **options: Any) -> TaskDefinition:
    """A bash task (``kind="empty"`` for an EmptyOperator) downstream of ``upstream``."""
    options.setdefault("kind", "bash")
    return TaskDefinition(task_id=task_id, command="true", upstream=list(upstream), trigger_rule=rule, **options)


def dag(*tasks: TaskDefinition, groups: tuple[str, ...] = ()) -> DagParsed:
    definition = DagDefinition(dag_id="etl", file_path="/dags/etl.py", tasks=list(tasks),
                               task_groups=[TaskGroupDefinition(group_id=group) for group in groups])
    return DagParsed(dag_id="etl", file_path=definition.file_path, fingerprint=f"fp-{len(tasks)}",
                     definition=definition, at=0.0)


def succeeded(task_id: str, follow: list[str] | None = None, try_number: int = 1, at: float = 6.0) -> TaskSucceeded:
    return TaskSucceeded(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, runner_id="r",
                         follow=follow, at=at)


def try_skipped(task_id: str, try_number: int = 1, at: float = 6.0) -> TaskTrySkipped:
    return TaskTrySkipped(dag_id="etl", run_id=RUN, task_id=task_id, try_number=try_number, runner_id="r",
                          reason="AirflowSkipException", at=at)


def skipped(task_id: str) -> TaskSkipped:
    """The owner skipped ``task_id`` (as an earlier decision would have)."""
    return TaskSkipped(dag_id="etl", run_id=RUN, task_id=task_id, reason="given", at=3.0)


def upstream_failed(task_id: str) -> TaskUpstreamFailed:
    return TaskUpstreamFailed(dag_id="etl", run_id=RUN, task_id=task_id, reason="given", at=3.0)


def ended(task_id: str, outcome: str, follow: list[str] | None = None) -> list:
    """A first try of ``task_id`` queued, started and ended with ``outcome`` (success / failed / skipped)."""
    ends = {"success": lambda: succeeded(task_id, follow), "failed": lambda: failed(task_id),
            "skipped": lambda: try_skipped(task_id)}
    return [queued(task_id), started(task_id), ends[outcome]()]


def running(task_id: str) -> list:
    return [queued(task_id), started(task_id)]


def of_task(events: list, task_id: str) -> list:
    return [event for event in events if getattr(event, "task_id", None) == task_id]


@dataclass
class Drive:
    """A run of one DAG driven as the scheduler and its runners would: each decision is folded and
    appended to ``log``; each try the core queues ends as ``outcomes`` says (default success; a
    list for a task with retries: one outcome per try), a choosing task's with ``follows``."""

    definition: DagParsed
    outcomes: dict[str, Any] = field(default_factory=dict)
    follows: dict[str, list[str]] = field(default_factory=dict)
    log: list = field(default_factory=list)
    state: SchedulerState = field(default_factory=SchedulerState)
    now: float = 10.0

    def __post_init__(self) -> None:
        self.append(self.definition, created())

    def append(self, *events: Any) -> None:
        for event in events:
            self.log.append(event)
            evolve(self.state, event)

    def step(self) -> list:
        """One decision, then the ends of the tries it queued; the decisions."""
        self.now += 1.0
        decisions = decide(self.state, self.now, POLICY)
        self.append(*decisions)
        for event in decisions:
            if type(event).__name__ == "TaskQueued":
                self.append(*self._try_end(event.task_id, event.try_number))
        return decisions

    def _try_end(self, task_id: str, try_number: int) -> list:
        outcome = self.outcomes.get(task_id, "success")
        if isinstance(outcome, list):
            outcome = outcome[min(try_number, len(outcome)) - 1]
        at = self.now + 0.5
        begun = started(task_id, try_number=try_number, at=self.now + 0.1)
        if outcome == "failed":
            return [begun, failed(task_id, try_number=try_number, at=at)]
        if outcome == "skipped":
            return [begun, try_skipped(task_id, try_number=try_number, at=at)]
        return [begun, succeeded(task_id, self.follows.get(task_id), try_number=try_number, at=at)]

    def to_the_end(self, most_steps: int = 60) -> Drive:
        """Decide until the run finished (or nothing more is decided)."""
        for _ in range(most_steps):
            decisions = self.step()
            if not decisions or any(isinstance(event, DagRunFinished) for event in decisions):
                break
        return self

    @property
    def run(self):
        key = ("etl", RUN)
        return self.state.runs.get(key) or self.state.finished[key]

    def states(self) -> dict[str, str]:
        """Task id -> its state (NONE for a task never decided)."""
        run = self.run
        return {task_id: run.tasks[task_id].state if task_id in run.tasks else "none"
                for task_id in self.state.dags["etl"].order}

    def finished(self) -> str:
        """The run's state: "success" / "failed" once finished, "" while open."""
        return self.run.finished_state

    def decided(self, kind: type) -> dict[str, Any]:
        """Task id -> the event of type ``kind`` the core wrote for it."""
        return {event.task_id: event for event in self.log if isinstance(event, kind)}

    def replayed(self) -> SchedulerState:
        return fold(SchedulerState(), self.log)
