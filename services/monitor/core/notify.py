"""Callbacks: which DAG callbacks are owed a call, from the log alone.

A DAG declares callbacks (``on_failure``, ``on_deadline_missed``: webhook URLs or
``module:function`` paths). A run that fails, or misses its deadline, and a task instance that
misses its own deadline, owes its DAG's callback one call sequence; a CallbackCalled in the log
(whatever its outcome: the caller already retried) settles it. Only triggers at or after
the time the DAG's current definition was published count, so a callback added today is
not called for yesterday's failures on replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FAILURE = "failure"
DEADLINE_MISSED = "deadline_missed"

NotificationKey = tuple[str, str, str, str]  # (dag_id, run_id, trigger, task_id: "" for the run)


@dataclass(frozen=True)
class Notification:
    """One call owed: ``payload`` (JSON) to ``target``; ``task_id`` is "" for a run's own trigger."""

    dag_id: str
    run_id: str
    trigger: str
    target: str
    payload: dict[str, object]  # JSON
    task_id: str = ""

    @property
    def key(self) -> NotificationKey:
        return (self.dag_id, self.run_id, self.trigger, self.task_id)


@dataclass
class NotificationBook:
    """Each DAG's callbacks (and since when), the calls owed, and the calls settled."""

    callbacks: dict[str, tuple[dict[str, str], float]] = field(default_factory=dict)  # dag -> ({trigger: url}, since)
    owed: dict[NotificationKey, Notification] = field(default_factory=dict)
    settled: set[NotificationKey] = field(default_factory=set)

    def define(self, dag_id: str, targets: dict[str, str | None], since: float) -> None:
        declared = {trigger: url for trigger, url in targets.items() if url}
        if declared:
            self.callbacks[dag_id] = (declared, since)
        else:
            self.callbacks.pop(dag_id, None)

    def triggered(self, dag_id: str, run_id: str, trigger: str, at: float, details: dict[str, object],
                  task_id: str = "") -> None:
        """A run (or its task instance ``task_id``) failed or missed its deadline at ``at``: owe a
        call if its DAG declares one. The payload names the task only for a task's trigger."""
        targets, since = self.callbacks.get(dag_id, ({}, 0.0))
        key = (dag_id, run_id, trigger, task_id)
        if trigger not in targets or at < since or key in self.settled or key in self.owed:
            return
        task = {"task_id": task_id} if task_id else {}
        payload = {"dag_id": dag_id, "run_id": run_id, **task, "trigger": trigger, "at": at, **details}
        self.owed[key] = Notification(dag_id, run_id, trigger, targets[trigger], payload, task_id)

    def called(self, dag_id: str, run_id: str, trigger: str, task_id: str = "") -> None:
        key = (dag_id, run_id, trigger, task_id)
        self.owed.pop(key, None)
        self.settled.add(key)


def due_notifications(book: NotificationBook) -> list[Notification]:
    """Every call owed and not yet settled by a CallbackCalled in the log."""
    return list(book.owed.values())
