"""Celery executor workloads, measured through the real Kafka broker and Redis, with the scheduler and
two `tock worker` processes (concurrency 4 each, hostnames bench-w1 and bench-w2) as real processes.

W1 fan-out: 200 independent no-op `@task(executor="celery")` tasks, trigger to run success (3 repetitions).
W2 chain: 50 celery no-op tasks in a strict chain, time per hop (3 repetitions).
   Both are timed like bench_scheduler's: from the moment the TriggerDagRun record is acknowledged
   by the broker to the DagRunFinished's `at` (the scheduler's clock, same host), read from the log.
Before the clock starts, the workers are up (each logged "ready") and warm: a warm-up DAG of 16
parallel celery tasks (0.3 s each, so every pool process of both workers gets one, connects to
Redis and forks its warm runner) and one run of the chain (the scheduler's Celery producer
connected, its partition assigned) are run first and not counted.
The split of the time comes from the events' `at`: TaskQueued and TaskLaunched are the scheduler's
clock (TaskLaunched's `at` is taken just after the Celery send returned), TaskStarted is the runner's
(taken when it got the try from its pool process, before its claim), TaskSucceeded the runner's after
the user code ended.
Each W1 run also prints the CPU seconds the workers (their Celery main processes apart), the
scheduler, the Kafka broker and Redis used during it, beside the whole machine's busy time: on a
small shared host the fan-out is bound by CPU, and this says whose.
At the end the scheduler and workers get SIGTERM (a worker's warm shutdown) and are waited for;
the script then checks that nothing is left in their sessions (pool processes, runners) and drops
the benchmark's topics and its Redis keys (all under its prefix).
No pass/fail on timing: the script exits non-zero only if a run does not succeed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import redis

from infra.settings import Settings
from schemas import DagRunCreated, TaskLaunched, TaskQueued, TaskStarted, TaskSucceeded, TriggerDagRun
from tests.benchmarks.common import REPO, RunFailed, bench_settings, figure, spread, timed_run
from tests.benchmarks.w3_takeover import drop_topics, load
from tests.scenarios.scheduler_support import LogTail, environment, publish_dags

WORKERS = ("bench-w1", "bench-w2")
CONCURRENCY = 4
FAN_OUT_TASKS, CHAIN_TASKS, WARM_UP_TASKS = 200, 50, 16
REPETITIONS = 3

FAN_OUT = f'''
from tock import DAG, task

def noop():
    pass

with DAG("celery_fan_out") as dag:
    for index in range({FAN_OUT_TASKS}):
        task(noop, task_id=f"noop_{{index}}", executor="celery")()
'''

CHAIN = f'''
from tock import DAG, task

def noop():
    pass

with DAG("celery_chain") as dag:
    previous = None
    for index in range({CHAIN_TASKS}):
        current = task(noop, task_id=f"step_{{index:02d}}", executor="celery")()
        if previous is not None:
            previous >> current
        previous = current
'''

WARM_UP = f'''
import time
from tock import DAG, task

def pause():
    time.sleep(0.3)

with DAG("celery_warm_up") as dag:
    for index in range({WARM_UP_TASKS}):
        task(pause, task_id=f"pause_{{index}}", executor="celery")()
'''


class Services:
    """The scheduler and the workers, as real processes running this worktree's code."""

    def __init__(self, settings: Settings, logs: Path) -> None:
        self.settings, self.logs = settings, logs
        self.started: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *command: str) -> subprocess.Popen:
        env = {**environment(self.settings), "PYTHONPATH": str(REPO)}
        with open(self.logs / f"{name}.log", "ab") as output:
            process = subprocess.Popen([sys.executable, "-m", "tock_cli", *command], env=env, stdout=output,
                                       stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        self.started[name] = process
        return process

    def worker(self, hostname: str) -> None:
        self.start(f"worker-{hostname}", "worker", "--queues", self.settings.celery_default_queue,
                   "--concurrency", str(CONCURRENCY), "--hostname", hostname)

    def wait_ready(self, name: str, timeout: float = 60.0) -> None:
        """Wait for Celery's "ready." line in a worker's log (its pool processes are forked)."""
        deadline = time.monotonic() + timeout
        while " ready." not in self.log_of(name):
            if self.started[name].poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{name} did not get ready:\n{self.log_of(name)[-3000:]}")
            time.sleep(0.1)

    def log_of(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_all(self) -> None:
        """SIGTERM to each (a worker's warm shutdown), then wait; a process that outlives 30 s is killed."""
        for process in self.started.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in self.started.items():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                print(f"     !! {name} ignored SIGTERM for 30 s: killed", flush=True)
                process.kill()
                process.wait()

    def leftovers(self, timeout: float = 15.0) -> list[str]:
        """Processes left in the sessions the services led (pool processes, runners), after up to
        ``timeout`` s: a runner that died with its pool process is a zombie until init reaps it."""
        sessions = {str(process.pid) for process in self.started.values()}
        deadline = time.monotonic() + timeout
        while True:
            listing = subprocess.run(["ps", "-eo", "sid=,pid=,stat=,args="], capture_output=True, text=True).stdout
            left = [line.strip() for line in listing.splitlines() if line.split(None, 1)[0] in sessions]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)


TICKS = os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds used so far by the workers' and the scheduler's process trees (their sessions:
    a process's own time plus what its reaped children used; the workers' Celery main processes
    apart: receiving from Redis, dispatching to the pool), the Kafka broker and Redis, and the
    whole machine's busy time (/proc/stat; other people's work on this host included)."""

    def __init__(self, services: Services) -> None:
        self.mains = {str(services.started[f"worker-{host}"].pid) for host in WORKERS}
        self.sessions = {"workers": self.mains, "scheduler": {str(services.started["scheduler"].pid)}}
        listing = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
        self.daemons = {name: [line.split()[0] for line in listing if marker in line]
                        for name, marker in (("Kafka broker", "kafka.Kafka"), ("Redis", "redis-server"))}

    def sample(self) -> dict[str, float]:
        used = dict.fromkeys(["workers", "of which Celery main processes", "scheduler", *self.daemons], 0.0)
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                pid, fields = stat.parent.name, stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            seconds = sum(int(value) for value in fields[11:15]) / TICKS  # utime stime cutime cstime
            for name, sessions in self.sessions.items():
                used[name] += seconds if fields[3] in sessions else 0.0
            if pid in self.mains:  # its own time only: its pool processes are alive, not yet in cutime
                used["of which Celery main processes"] += sum(int(value) for value in fields[11:13]) / TICKS
            for name, pids in self.daemons.items():
                used[name] += sum(int(value) for value in fields[11:13]) / TICKS if pid in pids else 0.0
        cpu = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        used["machine"] = (sum(map(int, cpu)) - int(cpu[3]) - int(cpu[4])) / TICKS  # all but idle and iowait
        return used

    @staticmethod
    def report(before: dict[str, float], after: dict[str, float], seconds: float, tries: int) -> str:
        spent = {name: after[name] - before[name] for name in before}
        parts = [f"{name} {value:.1f} s ({value / tries * 1000:.0f} ms/try)" for name, value in spent.items()
                 if name != "machine"]
        return (", ".join(parts) + f"; whole machine busy {spent['machine']:.1f} of "
                f"{seconds * os.cpu_count():.1f} CPU-s ({os.cpu_count()} cores, others' work included)")


def write_dag(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


def bench(tmp: Path, keep_events: bool = False) -> None:
    settings = bench_settings(tmp / "home", partitions=3)
    for name, source in (("celery_fan_out", FAN_OUT), ("celery_chain", CHAIN), ("celery_warm_up", WARM_UP)):
        publish_dags(settings, write_dag(tmp, name, source))
    services, tail = Services(settings, tmp), LogTail(settings)
    try:
        for hostname in WORKERS:
            services.worker(hostname)
        for hostname in WORKERS:
            services.wait_ready(f"worker-{hostname}")
        services.start("scheduler", "scheduler", "--id", "bench")
        _seconds, warm_run = timed_run(settings, tail, "celery_warm_up")
        timed_run(settings, tail, "celery_chain")
        print(f"     (workers ready; warm-up: {WARM_UP_TASKS} celery tasks of 0.3 s ran on "
              f"{per_worker(tail, warm_run)}, then one chain run; celery parallelism "
              f"{settings.celery_parallelism}; {load()} before W1)", flush=True)
        bench_w1(settings, tail, CpuMeter(services))
        bench_w2(settings, tail)
    finally:
        services.stop_all()
        if keep_events:
            save_events(tail, tmp / "events.jsonl")
        tail.close()
        drop_topics(settings)
        drop_redis_keys(settings)
        left = services.leftovers()
        print(f"     (after SIGTERM: scheduler and workers exited with "
              f"{ {name: process.returncode for name, process in services.started.items()} }; "
              f"processes left in their sessions: {left or 'none'})", flush=True)


def drop_redis_keys(settings: Settings) -> None:
    """The Celery keys of this run (kombu's bindings, an empty queue's leftovers): all carry its prefix."""
    client = redis.Redis.from_url(settings.celery_broker_url)
    try:
        keys = list(client.scan_iter(match=f"{settings.topic_prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def bench_w1(settings: Settings, tail: LogTail, meter: CpuMeter) -> None:
    runs, cpu = [], []
    for _ in range(REPETITIONS):
        before, started = meter.sample(), time.monotonic()
        runs.append(timed_run(settings, tail, "celery_fan_out"))
        cpu.append(meter.report(before, meter.sample(), time.monotonic() - started, FAN_OUT_TASKS))
    seconds = [total for total, _run_id in runs]
    figure(f"W1 celery {FAN_OUT_TASKS} no-op tasks, 2x4 workers: trigger acked -> run success "
           f"(median of {REPETITIONS})", statistics.median(seconds), "s",
           "<= 3 s; local executor ~1.7 s; Airflow 3.3 LocalExecutor 22.8 s")
    print(f"     ({spread(seconds)}; {load()})")
    for (total, run_id), used in zip(runs, cpu, strict=False):
        print(f"     run {total:.2f} s: last of each, from DagRunCreated: " + breakdown(tail, run_id))
        print(f"       CPU used during the run: {used}")
        print(f"       median per try: {try_split(tail, run_id)}; tries per worker: {per_worker(tail, run_id)}")


def bench_w2(settings: Settings, tail: LogTail) -> None:
    runs = [timed_run(settings, tail, "celery_chain") for _ in range(REPETITIONS)]
    per_hop = [total / CHAIN_TASKS * 1000 for total, _run_id in runs]
    figure(f"W2 celery {CHAIN_TASKS}-task chain: (trigger acked -> success) / {CHAIN_TASKS}, "
           f"median of {REPETITIONS}", statistics.median(per_hop), "ms/hop", "<= 60 ms")
    print(f"     ({spread(per_hop)} ms; {load()})")
    hops = [hop for _total, run_id in runs for hop in chain_hops(tail, run_id)]
    figure("W2 median hop: TaskSucceeded -> next TaskSucceeded (all runs)", median_ms(hops, "hop"), "ms",
           "<= 60 ms")
    for label, part in (("scheduler reaction: TaskSucceeded -> next TaskQueued", "reaction"),
                        ("queued -> sent: TaskQueued -> TaskLaunched (incl. Celery send)", "send"),
                        ("delivery: TaskLaunched -> TaskStarted (Redis, worker, pool, runner)", "delivery"),
                        ("try: TaskStarted -> TaskSucceeded (claim, user-code child, no-op)", "try")):
        figure(f"W2 median {label}", median_ms(hops, part), "ms")


def events_of(tail: LogTail, kind: type, run_id: str) -> dict[str, float]:
    return {event.task_id: event.at for event in tail.of_type(kind, run_id=run_id)}


def breakdown(tail: LogTail, run_id: str) -> str:
    """When the last try was queued, launched, started and succeeded, from the run's creation."""
    created = tail.of_type(DagRunCreated, run_id=run_id)[0].at
    parts = [(kind.__name__, max(events_of(tail, kind, run_id).values()) - created)
             for kind in (TaskQueued, TaskLaunched, TaskStarted, TaskSucceeded)]
    return ", ".join(f"{name} +{seconds:.2f} s" for name, seconds in parts)


def try_split(tail: LogTail, run_id: str) -> str:
    """Median of each try's queued -> launched -> started -> succeeded (waits for a free slot included)."""
    queued, launched, started, ended = (events_of(tail, kind, run_id)
                                        for kind in (TaskQueued, TaskLaunched, TaskStarted, TaskSucceeded))
    parts = {"queued->launched": [launched[task] - queued[task] for task in ended],
             "launched->started": [started[task] - launched[task] for task in ended],
             "started->succeeded": [ended[task] - started[task] for task in ended]}
    return ", ".join(f"{name} {statistics.median(values) * 1000:.0f} ms" for name, values in parts.items())


def chain_hops(tail: LogTail, run_id: str) -> list[dict[str, float]]:
    """Each hop of the chain split at the events: the upstream's success to this step's success."""
    queued, launched, started, ended = (events_of(tail, kind, run_id)
                                        for kind in (TaskQueued, TaskLaunched, TaskStarted, TaskSucceeded))
    hops = []
    for index in range(1, CHAIN_TASKS):
        step, upstream = f"step_{index:02d}", f"step_{index - 1:02d}"
        hops.append({"hop": ended[step] - ended[upstream], "reaction": queued[step] - ended[upstream],
                     "send": launched[step] - queued[step], "delivery": started[step] - launched[step],
                     "try": ended[step] - started[step]})
    return hops


def median_ms(hops: list[dict[str, float]], part: str) -> float:
    return statistics.median(hop[part] for hop in hops) * 1000


def per_worker(tail: LogTail, run_id: str) -> str:
    counts = Counter(event.hostname for event in tail.of_type(TaskStarted, run_id=run_id))
    return ", ".join(f"{host} {count}" for host, count in sorted(counts.items()))




def save_events(tail: LogTail, path: Path) -> None:
    """Every event read, one JSON object a line with its type, for a closer look after the run."""
    with open(path, "w") as output:
        for event in tail.events:
            output.write(json.dumps({"type": type(event).__name__, **dataclasses.asdict(event)}, default=str) + "\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_celery")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR and keep it (scheduler, worker and runner logs, and every event read "
                             "as DIR/events.jsonl) instead of a temporary folder")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        tmp = options.keep or Path(folder)
        tmp.mkdir(parents=True, exist_ok=True)
        try:
            bench(tmp, keep_events=options.keep is not None)
        except RunFailed as error:
            print(f"  !! {error}", flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
