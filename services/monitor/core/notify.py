"""Callbacks: which calls are owed, from the log alone.

A DAG declares callbacks of its own (``on_failure``, ``on_deadline_missed``: webhook URLs or
``module:function`` paths, given the payload as JSON) and Airflow's (``on_success_callback``,
``on_failure_callback`` on the DAG and ``on_*_callback`` on its tasks: callables given the
payload as a task context, see services/monitor/core/task_callbacks.py). A run that fails,
succeeds or misses its deadline, and a task instance that misses its own deadline, owes each
of its DAG's callbacks for that trigger one call sequence; a CallbackCalled in the log (whatever
its outcome: the caller already retried) settles it. Only triggers at or after the time the DAG's
current definition was published count, so a callback added today is not called for
yesterday's failures on replay.

A DAG's own ``on_failure`` / ``on_deadline_missed`` are called once per run (a run that fails
again after a clear is not called again); Airflow's callbacks are called at each transition, as
Airflow calls them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FAILURE = "failure"
DEADLINE_MISSED = "deadline_missed"
SUCCESS = "success"
RETRY = "retry"
EXECUTE = "execute"
SKIPPED = "skipped"

# (dag_id, run_id, trigger, task_id: "" for the run, try_number: 0 for none, target)
NotificationKey = tuple[str, str, str, str, int, str]


@dataclass(frozen=True)
class Callback:
    """One target of a trigger; ``context``: an Airflow-style callable, called with a context built
    from the payload (dates as datetimes, ``ti``, ``dag_run``), not with the JSON payload itself."""

    target: str
    context: bool = False


@dataclass(frozen=True)
class Notification:
    """One call owed: ``payload`` (JSON) to ``target``; ``task_id`` is "" for a run's own trigger,
    ``try_number`` the try a task's callback is for (0: none)."""

    dag_id: str
    run_id: str
    trigger: str
    target: str
    payload: dict[str, object]  # JSON
    task_id: str = ""
    try_number: int = 0
    context: bool = False

    @property
    def key(self) -> NotificationKey:
        return (self.dag_id, self.run_id, self.trigger, self.task_id, self.try_number, self.target)


@dataclass
class DagCallbacks:
    """One DAG's callbacks as its current definition declares them, and since when: its own (trigger
    -> callbacks), its tasks' (task id -> trigger -> callables), the retries of those tasks (a failure
    is final past them) and the DAG's params (what its runs' contexts hold)."""

    since: float
    run: dict[str, list[Callback]] = field(default_factory=dict)
    tasks: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    params_json: str = "{}"


@dataclass
class RunContext:
    """What an open run's callbacks are told of it (from its DagRunCreated, or a TaskQueued of it)."""

    logical_date: float | None
    run_type: str
    conf_json: str


@dataclass
class TryContext:
    """A task instance's current try, as its callbacks are told of it (from its TaskQueued), and how
    far it went: the runner whose TaskStarted came first (the only one that runs), whether it ended,
    the error it failed with, and whether its retry is owed already."""

    try_number: int
    logical_date: float | None = None
    data_interval_start: float | None = None
    data_interval_end: float | None = None
    run_type: str = ""
    conf_json: str = "{}"
    params_json: str = "{}"
    runner_id: str = ""
    ended: bool = False
    error: str = ""
    retried: bool = False
    pokes: int = 0  # a sensor's tries before this one that were pokes not met: they use no retry


@dataclass
class NotificationBook:
    """Each DAG's callbacks, the calls owed, the calls settled for good (a DAG's own, once per run),
    and what the contexts of open runs and tries are built from (services/monitor/core/task_callbacks.py)."""

    dags: dict[str, DagCallbacks] = field(default_factory=dict)
    owed: dict[NotificationKey, Notification] = field(default_factory=dict)
    settled: set[NotificationKey] = field(default_factory=set)
    runs: dict[tuple[str, str], RunContext] = field(default_factory=dict)  # (dag_id, run_id)
    tries: dict[tuple[str, str, str], TryContext] = field(default_factory=dict)  # (dag_id, run_id, task_id)

    def define(self, dag_id: str, callbacks: DagCallbacks) -> None:
        """A DAG's current callbacks (none declared: forgotten)."""
        if callbacks.run or callbacks.tasks:
            self.dags[dag_id] = callbacks
        else:
            self.dags.pop(dag_id, None)

    def triggered(self, dag_id: str, run_id: str, trigger: str, at: float, details: dict[str, object],
                  task_id: str = "") -> None:
        """A run (or its task instance ``task_id``) failed, succeeded or missed its deadline at ``at``:
        owe a call to each of its DAG's callbacks for ``trigger``. The payload names the task only
        for a task's trigger."""
        callbacks = self.dags.get(dag_id)
        if callbacks is None or at < callbacks.since:
            return
        task = {"task_id": task_id} if task_id else {}
        payload = {"dag_id": dag_id, "run_id": run_id, **task, "trigger": trigger, "at": at, **details}
        for callback in callbacks.run.get(trigger, []):
            self.owe(Notification(dag_id, run_id, trigger, callback.target, payload, task_id,
                                  context=callback.context))

    def owe(self, notification: Notification) -> None:
        """Owe ``notification`` unless it is owed already or settled for good."""
        if notification.key not in self.settled:
            self.owed.setdefault(notification.key, notification)

    def called(self, key: NotificationKey) -> None:
        """A CallbackCalled settled the call ``key``; a DAG's own callback is not called again for it."""
        self.owed.pop(key, None)
        if self._once_per_run(key):
            self.settled.add(key)

    def _once_per_run(self, key: NotificationKey) -> bool:
        """Whether ``key`` is a call of a DAG's own ``on_failure`` / ``on_deadline_missed``."""
        dag_id, _run_id, trigger, task_id, _try_number, target = key
        if trigger == DEADLINE_MISSED:
            return True
        if trigger != FAILURE or task_id:
            return False
        callbacks = self.dags.get(dag_id)
        own = [item.target for item in callbacks.run.get(FAILURE, []) if not item.context] if callbacks else [target]
        return target in own


def due_notifications(book: NotificationBook) -> list[Notification]:
    """Every call owed and not yet settled by a CallbackCalled in the log."""
    return list(book.owed.values())
