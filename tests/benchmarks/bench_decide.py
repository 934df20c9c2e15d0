"""CPU of one decision turn of the scheduler's pure core, against the width of the run it decides (issue 26).

A fan-out of W leaves (one root, W leaves depending on it; and the same as one mapped task of W
instances), the root succeeded, 64 leaves running and the rest waiting for a slot (the DAG's
``max_active_tasks`` is 64). Each turn: one running leaf's TaskSucceeded is folded, then
``decide(state, now, policy, touched={the run})`` is timed (process CPU), and its decisions folded
(each TaskQueued then launched and started, so 64 run again). Measured at the start of the run, and
halfway (half the leaves succeeded first, folded straight in). No Kafka: states are folds of events,
as in the unit tests. Prints figures and the load average; asserts nothing about timing.

    .venv/bin/python -m tests.benchmarks.bench_decide [--profile W] [--turns N]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from schemas import (
    DagDefinition,
    DagParsed,
    DagRunCreated,
    MapDefinition,
    MapInput,
    TaskDefinition,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from services.scheduler.core import Policy, SchedulerState, decide, evolve
from services.scheduler.core.model import RUNNING, instance_key

SLOTS = 64
WIDTHS = (200, 2_000, 10_000)
POLICY = Policy(scheduler_id="bench", heartbeat_timeout=1e9)
RUN = ("fan", "manual__bench")


def fan_out(width: int) -> list[TaskDefinition]:
    leaves = [TaskDefinition(task_id=f"leaf_{index:05d}", kind="python", upstream=["root"])
              for index in range(width)]
    return [TaskDefinition(task_id="root", kind="python"), *leaves]


def mapped(width: int) -> list[TaskDefinition]:
    inputs = [MapInput(name="x", literal_json=json.dumps(list(range(width))))]
    return [TaskDefinition(task_id="root", kind="python"),
            TaskDefinition(task_id="leaf", kind="python", upstream=["root"],
                           mapped=MapDefinition(inputs=inputs, max_map_length=width))]


class Bench:
    """One run of one shape, driven turn by turn."""

    def __init__(self, tasks: list[TaskDefinition]) -> None:
        self.state, self.now, self.seq = SchedulerState(), 10.0, 0
        definition = DagDefinition(dag_id=RUN[0], file_path="/dags/fan.py", tasks=tasks, max_active_tasks=SLOTS)
        self.fold(DagParsed(dag_id=RUN[0], file_path=definition.file_path, fingerprint="fp",
                            definition=definition, at=0.0),
                  DagRunCreated(dag_id=RUN[0], run_id=RUN[1], logical_date=1.0, run_type="manual",
                                dag_fingerprint="fp", scheduler_id="bench", at=1.0))
        self.turn()  # the root queued and started
        self.finish_one()
        while len(self.running()) < SLOTS:  # the root's end, the expansion, the first 64 leaves
            self.turn()

    def fold(self, *events: Any) -> None:
        for event in events:
            evolve(self.state, event)

    def turn(self) -> tuple[float, int]:
        """One decision: (CPU seconds of ``decide``, events it wrote); its decisions folded, then run."""
        self.now += 1.0
        began = time.process_time()
        decisions = decide(self.state, self.now, POLICY, touched={RUN})
        spent = time.process_time() - began
        self.fold(*decisions)
        for event in decisions:
            if isinstance(event, TaskQueued):
                self.fold(*self.ran(event))
        return spent, len(decisions)

    def ran(self, queued: TaskQueued) -> list[Any]:
        ids = {"dag_id": queued.dag_id, "run_id": queued.run_id, "task_id": queued.task_id,
               "map_index": queued.map_index, "try_number": queued.try_number}
        return [TaskLaunched(**ids, executor=queued.executor, handle=f"{self.seq}@h", scheduler_id="bench",
                             at=self.now),
                TaskStarted(**ids, runner_id="r", hostname="h", pid=1, at=self.now)]

    def running(self) -> list[Any]:
        run = self.state.runs[RUN]
        return [instance for instance in run.tasks.values() if instance.state == RUNNING]

    def half_done(self) -> None:
        """Half the leaves succeeded (folded straight in, without deciding them): a run halfway through."""
        run = self.state.runs[RUN]
        waiting = [(task.task_id, index) for task in self.state.dags[RUN[0]].definition.tasks if task.task_id != "root"
                   for index in (range(task.mapped.max_map_length or 0) if task.mapped else [-1])
                   if instance_key(task.task_id, index) not in run.tasks]
        for task_id, index in waiting[:len(waiting) // 2]:
            ids = {"dag_id": RUN[0], "run_id": RUN[1], "task_id": task_id, "map_index": index, "try_number": 1}
            self.fold(TaskQueued(**ids, executor="local", queue="default", scheduler_id="bench", at=self.now),
                      *self.ran(TaskQueued(**ids, executor="local", queue="default", scheduler_id="bench",
                                           at=self.now)),
                      TaskSucceeded(**ids, runner_id="r", at=self.now))

    def finish_one(self) -> None:
        instance = min(self.running(), key=lambda item: (item.task_id, item.map_index))
        self.now += 0.5
        self.fold(TaskSucceeded(dag_id=RUN[0], run_id=RUN[1], task_id=instance.task_id,
                                map_index=instance.map_index, try_number=instance.try_number, runner_id="r",
                                at=self.now))


def measure(shape: Callable[[int], list[TaskDefinition]], width: int, turns: int, halfway: bool) -> list[float]:
    bench = Bench(shape(width))
    if halfway:
        bench.half_done()
    spent: list[float] = []
    for _ in range(turns):
        bench.finish_one()
        cpu, written = bench.turn()
        assert written == 1, f"a try's end should queue exactly one leaf, not {written}"
        spent.append(cpu)
    return spent


def profile(shape: Callable[[int], list[TaskDefinition]], width: int, turns: int) -> None:
    bench = Bench(shape(width))
    profiler = cProfile.Profile()
    for _ in range(turns):
        bench.finish_one()
        profiler.enable()
        bench.turn()
        profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


SHAPES: dict[str, Callable[[int], list[TaskDefinition]]] = {"fan-out": fan_out, "mapped": mapped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--profile", type=int, default=0, help="profile decide at this width instead")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="")
    args = parser.parse_args()
    print(f"loadavg before: {os.getloadavg()}")
    shapes = {args.shape: SHAPES[args.shape]} if args.shape else SHAPES
    for name, shape in shapes.items():
        if args.profile:
            print(f"== profile {name} W={args.profile}, {args.turns} turns")
            profile(shape, args.profile, args.turns)
            continue
        for halfway in (False, True):
            for width in WIDTHS:
                spent = measure(shape, width, args.turns, halfway)
                print(f"{name:8} {'halfway' if halfway else 'start':7} W={width:>6}: decide CPU per turn median "
                      f"{statistics.median(spent) * 1e3:8.3f} ms, mean {statistics.fmean(spent) * 1e3:8.3f} ms, "
                      f"max {max(spent) * 1e3:8.3f} ms ({len(spent)} turns)")
    print(f"loadavg after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
