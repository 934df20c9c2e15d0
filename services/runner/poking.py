"""A sensor's try: its pokes, and what they came to.

In mode "reschedule" (Tock's default) a try is one poke: met, the try succeeds; not met, it ends poked
and the owner of the run decides when the next poke comes (services/scheduler/core/sensors.py). In
mode "poke" (Airflow's default) the try pokes again after each interval, sleeping in its process as
Airflow's does, until the condition is met or the timeout passes; then it ends poked and timed out,
and the owner ends the sensor as its timeout says (failed, or skipped with ``soft_fail``).

What a poke may do (Airflow's rules): return True or a truthy value (met), or ``PokeReturnValue``
(met when ``is_done``, passing on ``xcom_value``); raise ``AirflowRescheduleException`` (not met, poke
again at its moment); raise the skip exception (skipped); raise anything else (the try fails, unless
the sensor has ``silent_fail``: not met, or ``never_fail``: skipped).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas.sensors import next_poke
from tock.exceptions import AirflowRescheduleException, AirflowSkipException
from tock.sensors import PokeReturnValue
from tock.tasks import Task


@dataclass(frozen=True, slots=True)
class Poked:
    """What a sensor's try came to: met (with the value it passes on), or not (when it asked to be
    poked again; whether it waited its timeout in this try)."""

    done: bool
    value: Any = None
    reschedule_at: float | None = None
    timed_out: bool = False


def poke_until_done(task: Task, poke: Callable[[], Any], *, clock: Callable[[], float] = time.time,
                    sleep: Callable[[float], None] = time.sleep) -> Poked:
    """The try's pokes, as its mode says (see the module's docstring)."""
    assert task.sensor is not None  # a sensor's task has its settings
    if task.sensor.mode != "poke":
        return poke_once(task, poke)
    since, count = clock(), 0
    while True:
        poked, count = poke_once(task, poke), count + 1
        if poked.done:
            return poked
        now = clock()
        then = next_poke(task.sensor, count, now, since, poked.reschedule_at)
        if then is None:
            print(f"the sensor waited {now - since:.0f} s, its timeout is {task.sensor.timeout:g} s", flush=True)
            return Poked(False, timed_out=True)
        sleep(max(then - now, 0.0))


def poke_once(task: Task, poke: Callable[[], Any]) -> Poked:
    """One poke, read as the module's docstring says."""
    try:
        returned = poke()
    except AirflowRescheduleException as asked:
        return Poked(False, reschedule_at=asked.reschedule_date.timestamp())
    except AirflowSkipException:
        raise
    except Exception as error:
        if getattr(task, "never_fail", False):
            raise AirflowSkipException(f"the poke raised {type(error).__name__}: {error} (never_fail)") from error
        if not getattr(task, "silent_fail", False):
            raise
        print(f"the poke raised, counted as not met (silent_fail):\n{traceback.format_exc()}", flush=True)
        return Poked(False)
    if isinstance(returned, PokeReturnValue):
        return Poked(bool(returned.is_done), returned.xcom_value if returned.is_done else None)
    if returned:
        return Poked(True)
    print("the condition is not met yet", flush=True)
    return Poked(False)
