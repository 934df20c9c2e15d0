"""Which handle to stop once a kill request or a death of a try is folded: dead means stopped.

The runner obeys both through the log; an executor that can stop what it runs (Celery's revoke, a
pod's delete) is asked to as well, so a runner that cannot read the log stops too. The asking is
the shell's (services/scheduler/launching.py, on a thread of its own); the rule is here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from schemas import TaskDeclaredDead, TaskKillRequested
from services.scheduler.core.model import SchedulerState, instance_key


@dataclass(frozen=True, slots=True)
class Stop:
    """A try's handle to stop on its executor."""

    executor: str
    handle: str
    at_once: bool  # the try was declared dead: no grace for its runner


def handle_to_stop(state: SchedulerState, event: TaskKillRequested | TaskDeclaredDead,
                   killers: Collection[str]) -> Stop | None:
    """After our ``event`` was read back and folded: the handle to stop, if the try it names is still
    the current try of its instance, has a handle, and runs on an executor that can stop it."""
    instance = state.instance((event.dag_id, event.run_id, instance_key(event.task_id, event.map_index)))
    if instance is None or instance.try_number != event.try_number or not instance.handle \
            or instance.executor not in killers:
        return None
    return Stop(instance.executor, instance.handle, at_once=isinstance(event, TaskDeclaredDead))
