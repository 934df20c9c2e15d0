"""Scheduler workloads, measured through the real broker with the scheduler as a process.

W1 fan-out: 200 independent no-op tasks, trigger to run success (3 repetitions).
W2 chain: 50 tasks in a strict chain, time per hop.
   Both are timed from the moment the TriggerDagRun record is acknowledged by the broker:
   what `tock dags trigger` spends before that (interpreter, imports, a new idempotent
   producer's ~0.5 s wait for its producer id) is reported apart, as the CLI's wall time.
W3 takeover (tests/benchmarks/w3_takeover.py): W3-real kills a real scheduler with kill -9 while
   1,000 real tries (~126 runners) heartbeat, default timeouts, timed from the kill to the last
   TaskAdopted read committed, then watches a whole heartbeat timeout for re-runs. The synthetic W3
   (1,000 tries whose log the bench writes, timed from the new owner's assignment) says so.
Memory: scheduler resident memory after folding 10,000 finished runs.
Goals (issue 26): W1 <= 0.6 s, W2 <= 10 ms per hop. Airflow 3.3.2 beside Tock in the same run: `make bench-airflow`.
W1's CPU per try is accounted by process: the broker, the scheduler, this bench's own log reader, and the
rest of the machine (the launchers, runners and try children, which come and go too fast to sample).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from infra.log import KafkaEventLog
from schemas import (
    DagRunCreated,
    DagRunFinished,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
)
from tests.benchmarks.common import REPO, bench_settings, figure, spread, timed_run
from tests.benchmarks.w3_takeover import TRIES, bench_w3_real, bench_w3_synthetic, drop_topics
from tests.scenarios.scheduler_support import LogTail, environment, publish_dags

# max_active_tasks as TOCK_PARALLELISM (64): the DAG's default (16, Airflow's max_active_tasks_per_dag) would
# hold 200 independent tasks to 16 at once, and measure that limit rather than the scheduler.
FAN_OUT = '''
from tock import DAG, task

def noop():
    pass

with DAG("fan_out", max_active_tasks=64) as dag:
    for index in range(200):
        task(noop, task_id=f"noop_{index}")()
'''

CHAIN = '''
from tock import DAG, task

def noop():
    pass

with DAG("chain") as dag:
    previous = None
    for index in range(50):
        current = task(noop, task_id=f"step_{index:02d}")()
        if previous is not None:
            previous >> current
        previous = current
'''

# The same two shapes passing values (W1: each task returns a small dict; W2: each step takes the one
# before's value and returns the next), for the cost of values: in the same run as the two above.
FAN_OUT_VALUES = '''
from tock import DAG, task

def value(index):
    return {"index": index, "rows": [index] * 8, "note": "x" * 64}

with DAG("fan_out_values", max_active_tasks=64) as dag:
    for index in range(200):
        task(value, task_id=f"value_{index}")(index)
'''

CHAIN_VALUES = '''
from tock import DAG, task

def step(previous=None):
    return {"count": (previous or {"count": 0})["count"] + 1, "note": "x" * 64}

with DAG("chain_values") as dag:
    previous = task(step, task_id="step_00")()
    for index in range(1, 50):
        previous = task(step, task_id=f"step_{index:02d}")(previous)
'''


def start_scheduler(settings, logs: Path, name: str) -> subprocess.Popen:
    with open(logs / f"scheduler-{name}.log", "ab") as output:
        return subprocess.Popen([sys.executable, "-m", "tock_cli", "scheduler", "--id", name],
                                env=environment(settings), stdout=output, stderr=subprocess.STDOUT, cwd=REPO)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def write_dag(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


def cli_trigger(settings, dag_id: str) -> tuple[float, str]:
    """Wall time of `tock dags trigger DAG_ID` (a whole process, without --wait), and the run id it printed."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "tock_cli", "dags", "trigger", dag_id], env=environment(settings),
                          cwd=REPO, check=True, capture_output=True, text=True, timeout=60)
    return time.monotonic() - started, done.stdout.split()[0]


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def bench_w1_w2(tmp: Path, bootstrap: str | None = None) -> None:
    """W1 and W2 on the local broker, or on the cluster at ``bootstrap`` (bench_cluster.py)."""
    settings = bench_settings(tmp / "home", partitions=3, bootstrap=bootstrap, parallelism=64, warm_runners=64)
    publish_dags(settings, write_dag(tmp, "fan_out", FAN_OUT))
    publish_dags(settings, write_dag(tmp, "chain", CHAIN))
    publish_dags(settings, write_dag(tmp, "fan_out_values", FAN_OUT_VALUES))
    publish_dags(settings, write_dag(tmp, "chain_values", CHAIN_VALUES))
    scheduler, tail = start_scheduler(settings, tmp, "bench"), LogTail(settings)
    try:
        timed_run(settings, tail, "chain")  # warm-up: scheduler assigned, launcher forked
        print(f"     ({load()} before W1)")
        accounting = CpuAccounting(scheduler.pid)
        runs = [timed_run(settings, tail, "fan_out") for _ in range(3)]
        fan_out = [seconds for seconds, _run_id in runs]
        figure("W1 200 no-op tasks, trigger acked -> success (median of 3)", statistics.median(fan_out), "s",
               "<= 0.6 s")
        print(f"     ({spread(fan_out)}; {load()})")
        print("     last run: " + breakdown(tail, runs[-1][1]))
        accounting.report(tries=3 * 200)
        cli_seconds, cli_run_id = cli_trigger(settings, "chain")
        figure("`tock dags trigger` CLI wall time (whole process)", cli_seconds, "s")
        tail.run_finished(cli_run_id, 300)  # before W2, so the two runs do not overlap
        chain_total, run_id = timed_run(settings, tail, "chain")
        figure("W2 50-task chain, trigger acked -> success / 50", chain_total / 50 * 1000, "ms/hop", "<= 10 ms")
        figure("W2 median hop: TaskSucceeded -> next TaskSucceeded", statistics.median(full_hops(tail, run_id)) * 1000,
               "ms")
        hops = hop_times(tail, run_id)
        figure("W2 median: upstream TaskSucceeded -> next TaskStarted", statistics.median(hops) * 1000, "ms")
        figure("W2 median scheduler reaction: TaskSucceeded -> TaskQueued",
               statistics.median(reactions(tail, run_id)) * 1000, "ms")
        figure("W2 median try: TaskStarted -> TaskSucceeded (runner, fork, DAG load, no-op)",
               statistics.median(try_durations(tail, run_id)) * 1000, "ms")
        bench_values(settings, tail, statistics.median(fan_out), chain_total)
    finally:
        stop(scheduler)
        tail.close()
        drop_topics(settings)


class CpuAccounting:
    """CPU seconds spent from now on: by the whole machine (/proc/stat), the broker, the scheduler and this
    process (its log reader); the rest is the launchers', runners' and try children's, and anything else
    running."""

    def __init__(self, scheduler_pid: int) -> None:
        self.processes = {"broker": _broker_process(), "scheduler": psutil.Process(scheduler_pid),
                          "this bench (its log reader)": psutil.Process()}
        self.before = self._sample()

    def report(self, tries: int) -> None:
        after = self._sample()
        spent = {name: after[name] - self.before[name] for name in after}
        machine = spent.pop("machine")
        figure("W1 CPU per try, whole machine (2 cores)", machine / tries * 1000, "ms")
        for name, seconds in spent.items():
            print(f"     {name}: {seconds / tries * 1000:.2f} ms per try", flush=True)
        print(f"     the rest (launchers, runners, try children, other processes): "
              f"{(machine - sum(spent.values())) / tries * 1000:.2f} ms per try", flush=True)

    def _sample(self) -> dict[str, float]:
        times = psutil.cpu_times()
        sample = {"machine": times.user + times.nice + times.system + times.irq + times.softirq + times.steal}
        for name, process in self.processes.items():
            if process is not None:
                cpu = process.cpu_times()
                sample[name] = cpu.user + cpu.system
        return sample


def _broker_process() -> psutil.Process | None:
    for process in psutil.process_iter(["cmdline"]):
        if "kafka.Kafka" in " ".join(process.info["cmdline"] or ()):
            return process
    return None


def bench_values(settings, tail: LogTail, fan_out_seconds: float, chain_seconds: float) -> None:
    """W1 and W2 again with each task passing a value on (returned, committed in its TaskSucceeded, read
    from the downstream's TaskQueued): what values cost, beside the runs without them."""
    with_values = [timed_run(settings, tail, "fan_out_values")[0] for _ in range(3)]
    figure("W1 with values (200 tasks, each returns a ~150-byte dict), median of 3", statistics.median(with_values),
           "s")
    print(f"     (without values, above: {fan_out_seconds:.3f} s; {spread(with_values)})")
    chain_total, run_id = timed_run(settings, tail, "chain_values")
    figure("W2 with values (each step reads the one before's) / 50", chain_total / 50 * 1000, "ms/hop")
    print(f"     (without values, above: {chain_seconds / 50 * 1000:.3f} ms/hop)")
    last = [event for event in tail.of_type(TaskSucceeded, run_id=run_id) if event.task_id == "step_49"]
    print(f"     last value: {last[0].values_json if last else '(none)'}; {load()}")


def breakdown(tail: LogTail, run_id: str) -> str:
    """When the last try was queued, launched, started and succeeded, from the run's creation."""
    events = [event for event in tail.events if getattr(event, "run_id", None) == run_id]
    created = next(event.at for event in events if type(event).__name__ == "DagRunCreated")
    last = {}
    for event in events:
        last[type(event).__name__] = max(last.get(type(event).__name__, 0.0), event.at)
    return ", ".join(f"{name} +{last[name] - created:.2f} s" for name in
                     ("TaskQueued", "TaskLaunched", "TaskStarted", "TaskSucceeded", "DagRunFinished") if name in last)


def hop_times(tail: LogTail, run_id: str) -> list[float]:
    ended = {event.task_id: event.at for event in tail.of_type(TaskSucceeded, run_id=run_id)}
    started = {event.task_id: event.at for event in tail.of_type(TaskStarted, run_id=run_id)}
    return [started[f"step_{index:02d}"] - ended[f"step_{index - 1:02d}"] for index in range(1, 50)]


def full_hops(tail: LogTail, run_id: str) -> list[float]:
    ended = {event.task_id: event.at for event in tail.of_type(TaskSucceeded, run_id=run_id)}
    return [ended[f"step_{index:02d}"] - ended[f"step_{index - 1:02d}"] for index in range(1, 50)]


def try_durations(tail: LogTail, run_id: str) -> list[float]:
    started = {event.task_id: event.at for event in tail.of_type(TaskStarted, run_id=run_id)}
    return [event.at - started[event.task_id] for event in tail.of_type(TaskSucceeded, run_id=run_id)]


def reactions(tail: LogTail, run_id: str) -> list[float]:
    ended = {event.task_id: event.at for event in tail.of_type(TaskSucceeded, run_id=run_id)}
    queued = {event.task_id: event.at for event in tail.of_type(TaskQueued, run_id=run_id)}
    return [queued[f"step_{index:02d}"] - ended[f"step_{index - 1:02d}"] for index in range(1, 50)]


def bench_memory(tmp: Path) -> None:
    """Scheduler RSS once it replayed 10,000 (and 30,000) finished runs, beside its RSS on an empty log."""
    empty = bench_settings(tmp / "mem-empty", partitions=1)
    figure("scheduler RSS, empty log", scheduler_rss(empty, tmp), "MiB")
    dag_path = write_dag(tmp, "one", "from tock import DAG, BashTask\nwith DAG('one') as dag:\n"
                                     "    BashTask('only', 'true')\n")
    for runs in (10_000, 30_000):
        settings = bench_settings(tmp / f"mem-{runs}", partitions=1)
        [dag_id] = publish_dags(settings, dag_path)
        write_finished_runs(settings, dag_id, runs)
        figure(f"scheduler RSS after folding {runs:,} finished runs", scheduler_rss(settings, tmp), "MiB",
               "report; must not grow with finished history")
    print("     (the state keeps no open run: the scheduler logs '0 open runs' after replay; what RSS adds over\n"
          "      the empty log is what replay allocated on the way: librdkafka's fetch queue, freed but not\n"
          "      returned to the OS by malloc, so it varies from one measurement to the next)")
    # 1,000,000 finished tries: 10,000 runs of a 100-task DAG. The retention rule keeps the latest
    # TOCK_SCHEDULER_FINISHED_RUNS_KEPT (100) finished runs of each DAG, packed as rows: 10,000 tries.
    tasks, runs = 100, 10_000
    body = "from tock import DAG, BashTask\nwith DAG('wide') as dag:\n" + "".join(
        f"    BashTask('t{index:03d}', 'true')\n" for index in range(tasks))
    settings = bench_settings(tmp / "mem-1m", partitions=1)
    [dag_id] = publish_dags(settings, write_dag(tmp, "wide", body))
    started = time.monotonic()
    write_finished_runs(settings, dag_id, runs, [f"t{index:03d}" for index in range(tasks)])
    print(f"     (wrote {runs:,} finished runs x {tasks} tries = {runs * tasks:,} tries in "
          f"{time.monotonic() - started:.0f} s)")
    figure(f"scheduler RSS after folding {runs * tasks:,} finished tries ({runs:,} runs x {tasks} tasks; "
           f"{settings.scheduler_finished_runs_kept} runs kept)", scheduler_rss(settings, tmp, replay_timeout=900),
           "MiB", "report; bounded by the retention rule, not by history")


def write_finished_runs(settings, dag_id: str, runs: int, task_ids: tuple[str, ...] | list[str] = ("only",)) -> None:
    now = time.time()
    with KafkaEventLog(settings, client_id="bench-history") as event_log:
        for index in range(runs):
            key = {"dag_id": dag_id, "run_id": f"manual__{index:05d}"}
            event_log.append(DagRunCreated(**key, logical_date=now, run_type="manual", dag_fingerprint="fp",
                                           scheduler_id="old", at=now))
            for task_id in task_ids:
                ids = {**key, "task_id": task_id, "try_number": 1}
                event_log.append(TaskQueued(**ids, executor="local", queue="default", scheduler_id="old", at=now))
                event_log.append(TaskLaunched(**ids, executor="local", handle="1@h:1", scheduler_id="old", at=now))
                event_log.append(TaskStarted(**ids, runner_id="r", hostname="h", pid=1, at=now))
                event_log.append(TaskSucceeded(**ids, runner_id="r", at=now))
            event_log.append(DagRunFinished(**key, state="success", at=now))


def scheduler_rss(settings, tmp: Path, replay_timeout: float = 120) -> float:
    """Start a scheduler process, wait until it replayed its partitions, and read its VmRSS."""
    log_path = tmp / f"rss-{settings.topic_prefix}log"
    with open(log_path, "wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "tock_cli", "scheduler", "--id", "rss"],
                                   env=environment(settings), stdout=output, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + replay_timeout
        while "assigned partitions" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        assert "0 open runs)" in log_path.read_text(), log_path.read_text()
        status = Path(f"/proc/{process.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) / 1024
    finally:
        stop(process)
        drop_topics(settings)


WORKLOADS = ("w1w2", "w3-real", "w3-synthetic", "memory")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_scheduler")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                        help=f"any of {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--tries", type=int, default=TRIES, help="W3-real: tries running at the kill")
    parser.add_argument("--b-after-kill", action="store_true",
                        help="W3-real: start B after the kill (12 partitions) instead of as a standby (1 partition)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR and keep it (scheduler and runner logs) instead of a temporary folder")
    options = parser.parse_args(argv)
    unknown = set(options.workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(sorted(unknown))}; known: {', '.join(WORKLOADS)}")
    selected = options.workloads or WORKLOADS
    with tempfile.TemporaryDirectory() as folder:
        tmp = options.keep or Path(folder)
        for workload in [name for name in WORKLOADS if name in selected]:
            (tmp / workload).mkdir(parents=True)
            if workload == "w1w2":
                bench_w1_w2(tmp / workload)
            elif workload == "w3-real":
                bench_w3_real(tmp / workload, options.tries, standby=not options.b_after_kill)
            elif workload == "w3-synthetic":
                bench_w3_synthetic(tmp / workload)
            else:
                bench_memory(tmp / workload)


if __name__ == "__main__":
    main(sys.argv[1:])
