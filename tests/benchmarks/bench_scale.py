"""Scale-out: 1, 2 and 4 real `tock scheduler` processes (one consumer group, 12 partitions)
over 1,000 DAGs of 5 independent no-op tasks; then kill -9 one of 4 under load.

The 1,000 DAG definitions are published by the bench itself (tests' ``publish_dags``: the
DagParsed records the DAG processor would write, one file per DAG),
not by a running DAG processor: that is measured in bench_big_dags. One TriggerDagRun per DAG
is appended at once; the clock starts when the last is acknowledged.

Two variants per scheduler count, each on a fresh topic prefix:
  real:     tasks on the local executor: the schedulers decide, launch, and the runners
            (one process per up to 8 tries, forked by each scheduler's warm launcher) run them.
            On 2 shared cores the runners, not the schedulers, bound "started per second".
  decided:  the same DAGs with their tasks on an executor no scheduler here runs (kubernetes,
            TOCK_EXECUTORS=local): the schedulers decide every run and queue every task
            (DagRunCreated + TaskQueued), nothing is launched, no runner costs CPU. This is
            the schedulers' own deciding rate; the runs never finish.
Figures: TaskQueued and TaskStarted per second (their count over the span from the trigger to
the last one, by the events' own times; the clock starts when the first TriggerDagRun is
appended), trigger -> all runs success, and CPU seconds per
decision: the scheduler processes' own utime+stime (psutil; the launcher and runners apart)
over the decision events they committed, counted in tock.events (DECISIONS below).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import psutil

from infra.log import EventReader, KafkaEventLog, partition_for
from infra.settings import Settings
from schemas import EVENTS, TriggerDagRun
from services.scheduler.core import manual_run_id
from tests.benchmarks.common import REPO, bench_settings, children_cpu, figure, infra_home
from tests.benchmarks.w3_takeover import drop_topics, log_time
from tests.scenarios.scheduler_support import environment, free_port, publish_dags

DAGS = 1000
TASKS = 5
PARTITIONS = 12
COUNTS = (1, 2, 4)
DECIDED_ROUNDS = 5  # runs per DAG in the "decided" variant: 1 round decides in a fraction of a second
RUN_TIMEOUT = 420.0
# Decision events a scheduler commits to tock.events (SchedulerHeartbeat goes to tock.schedulers: not counted).
DECISIONS = {"DagRunCreated", "TaskQueued", "TaskLaunched", "DagRunFinished", "TaskRetryScheduled",
             "TaskUpstreamFailed", "TaskSkipped", "TaskAdopted", "TaskDeclaredDead", "TaskCleared",
             "DagRunReopened", "TaskKillRequested"}
ASSIGNED = re.compile(r"assigned partitions \[([\d, ]*)\]")
REVOKED = re.compile(r"revoked partitions \[([\d, ]*)\]")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")

SOURCE = '''
from tock import DAG, task

def noop():
    pass

with DAG({dag_id!r}) as dag:
    for index in range({tasks}):
        task(noop, task_id=f"noop_{{index}}", executor={executor!r})()
'''


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


class Tail:
    """Every committed record of tock.events: (event type name, event) in read order, with when read."""

    def __init__(self, settings: Settings) -> None:
        self.reader = EventReader(settings, [], client_id="bench-scale-tail")
        self.reader.assign([(EVENTS, partition, 0) for partition in range(settings.partitions)])
        self.events: list = []
        self.read_at: list[float] = []
        self.counts: Counter = Counter()

    def poll(self, timeout: float = 0.2) -> None:
        records = self.reader.poll(timeout, 10000)
        now = time.time()
        for record in records:
            if record.event is not None:
                self.events.append(record.event)
                self.read_at.append(now)
                self.counts[type(record.event).__name__] += 1

    def close(self) -> None:
        self.reader.close()


class Fleet:
    """N scheduler processes, their logs, and CPU samples of their launchers' runners."""

    def __init__(self, settings: Settings, folder: Path) -> None:
        self.settings = settings
        self.folder = folder
        self.processes: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}
        self.helpers: dict[int, float] = {}  # pid -> CPU s (with reaped children) last seen, launchers and runners

    def start(self, name: str) -> None:
        port = free_port(*self.ports.values())
        self.ports[name] = port
        env = {**environment(self.settings), "TOCK_SCHEDULER_METRICS_PORT": str(port)}
        with open(self.folder / f"scheduler-{name}.log", "ab") as output:
            self.processes[name] = subprocess.Popen([sys.executable, "-m", "tock_cli", "scheduler", "--id", name],
                                                    env=env, stdout=output, stderr=subprocess.STDOUT, cwd=REPO)

    def commits(self) -> tuple[float, float]:
        """(transactions committed, seconds spent committing) over the live schedulers, from their /metrics."""
        count = seconds = 0.0
        for name, port in self.ports.items():
            if self.processes[name].poll() is not None:
                continue
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            for line in text.splitlines():
                if line.startswith("tock_scheduler_commit_seconds_count"):
                    count += float(line.split()[-1])
                elif line.startswith("tock_scheduler_commit_seconds_sum"):
                    seconds += float(line.split()[-1])
        return count, seconds

    def log_of(self, name: str) -> str:
        path = self.folder / f"scheduler-{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def owned(self, name: str) -> set[int]:
        """Partitions a scheduler owns, by its log's assigned / revoked lines."""
        owned: set[int] = set()
        for line in self.log_of(name).splitlines():
            if found := ASSIGNED.search(line):
                owned |= _numbers(found.group(1))
            elif found := REVOKED.search(line):
                owned -= _numbers(found.group(1))
        return owned

    def settled(self) -> bool:
        owned = [self.owned(name) for name in self.processes]
        return all(owned) and sum(map(len, owned)) == PARTITIONS and len(set().union(*owned)) == PARTITIONS

    def scheduler_cpu(self, names=None) -> float:
        total = 0.0
        for name, process in self.processes.items():
            if names is not None and name not in names:
                continue
            try:
                times = psutil.Process(process.pid).cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                pass
        return total

    def sample_helpers(self) -> None:
        """CPU of each launcher, runner and user-code child (its own), kept per pid: processes exit, so
        what they spent after the last sample is lost (a lower bound)."""
        for process in list(self.processes.values()):
            children_cpu(process.pid, self.helpers)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _numbers(text: str) -> set[int]:
    return {int(item) for item in text.replace(" ", "").split(",") if item}


def broker_cpu() -> float:
    """CPU seconds of the shared local Kafka broker's JVM (its logs under TOCK_HOME; other engineers' tests
    use it too right now, and their private brokers are not counted)."""
    total = 0.0
    ours = f"-Dkafka.logs.dir={infra_home() / 'broker'}"
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(part.startswith(ours) for part in process.info["cmdline"] or []):
                times = process.cpu_times()
                total += times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def own_cpu() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


def machine_busy() -> float:
    """CPU seconds all cores spent not idle since boot (every process, other engineers' too)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def trigger_all(settings: Settings, dag_ids: list[str], rounds: int = 1) -> dict[str, str]:
    """``rounds`` TriggerDagRun per DAG; returns run id -> dag id. Returns once every one is acknowledged."""
    runs = {}
    with KafkaEventLog(settings, client_id="bench-scale-trigger") as event_log:
        for dag_id in dag_ids * rounds:
            request_id = uuid.uuid4().hex
            event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, requested_by="bench", at=time.time()))
            runs[manual_run_id(request_id)] = dag_id
        event_log.flush()
    return runs


def prepare(tmp: Path, count: int, variant: str) -> tuple[Settings, Fleet, list[str]]:
    folder = tmp / f"{variant}-{count}"
    folder.mkdir(parents=True)
    executors = {"executors": "local"} if variant == "decided" else {}
    settings = bench_settings(folder / "home", partitions=PARTITIONS, **executors)
    started = time.time()
    dag_ids = []
    (folder / "dags").mkdir()
    for number in range(DAGS):  # one file per DAG: a runner loads only its own DAG's file
        dag_file = folder / "dags" / f"scale_{number:04d}.py"
        dag_file.write_text(SOURCE.format(dag_id=f"scale_{number:04d}", tasks=TASKS,
                                          executor="kubernetes" if variant == "decided" else "local"))
        dag_ids += publish_dags(settings, dag_file)
    print(f"     ({variant}, {count} scheduler(s): {len(dag_ids)} DAGs published (synthetic DagParsed) in "
          f"{time.time() - started:.1f} s; topic prefix {settings.topic_prefix})", flush=True)
    fleet = Fleet(settings, folder)
    for index in range(count):
        fleet.start(f"s{index}")
    wait(fleet.settled, 120, f"{count} schedulers to share the {PARTITIONS} partitions")
    time.sleep(2.0)  # let a last cooperative rebalance round land
    wait(fleet.settled, 60, "the assignment to settle")
    return settings, fleet, dag_ids


def wait(condition, timeout: float, what: str, every=None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        if every is not None:
            every()
        else:
            time.sleep(0.2)


def measure(tmp: Path, count: int, variant: str) -> dict:
    """One run of every DAG under ``count`` schedulers; the figures as a dict."""
    settings, fleet, dag_ids = prepare(tmp, count, variant)
    tail = Tail(settings)
    try:
        load_before = load()
        cpu0, busy0, broker0, own0 = fleet.scheduler_cpu(), machine_busy(), broker_cpu(), own_cpu()
        commits0 = fleet.commits()
        rounds = DECIDED_ROUNDS if variant == "decided" else 1
        first_append = time.time()
        runs = trigger_all(settings, dag_ids, rounds)
        acked = time.time()
        print(f"       ({DAGS * rounds:,} TriggerDagRun appended and acknowledged in {acked - first_append:.2f} s)")
        goal = ("DagRunFinished", DAGS) if variant == "real" else ("TaskQueued", DAGS * TASKS * rounds)
        next_sample, next_print = 0.0, time.monotonic() + 15

        def progress() -> None:
            nonlocal next_sample, next_print
            tail.poll()
            if time.monotonic() >= next_sample:
                fleet.sample_helpers()
                next_sample = time.monotonic() + 0.5
            if time.monotonic() >= next_print:
                next_print = time.monotonic() + 15
                print(f"       ... {time.time() - acked:5.0f} s: queued {tail.counts['TaskQueued']}, started "
                      f"{tail.counts['TaskStarted']}, runs finished {tail.counts['DagRunFinished']} ({load()})",
                      flush=True)

        wait(lambda: tail.counts[goal[0]] >= goal[1], RUN_TIMEOUT, f"{goal[1]} {goal[0]}", every=progress)
        done_read = time.time()
        cpu1, busy1, broker1, own1 = fleet.scheduler_cpu(), machine_busy(), broker_cpu(), own_cpu()
        commits1 = fleet.commits()
        fleet.sample_helpers()
        ours = [event for event in tail.events if getattr(event, "run_id", None) in runs]
        return summarize(ours, first_append, done_read, count, variant, {
            "scheduler_cpu": cpu1 - cpu0, "helpers_cpu": sum(fleet.helpers.values()), "machine": busy1 - busy0,
            "broker": broker1 - broker0, "commits": commits1[0] - commits0[0],
            "commit_seconds": commits1[1] - commits0[1], "bench": own1 - own0, "window": done_read - first_append,
            "load_before": load_before, "load_after": load()})
    finally:
        tail.close()
        fleet.stop_all()
        drop_topics(settings)


def summarize(events: list, acked: float, done_read: float, count: int, variant: str, cpu: dict) -> dict:
    """Figures from the run's events; ``acked``: when the first TriggerDagRun was appended (the clock's start)."""
    times: dict[str, list[float]] = {}
    for event in events:
        times.setdefault(type(event).__name__, []).append(event.at)
    decisions = sum(len(stamps) for name, stamps in times.items() if name in DECISIONS)
    queued, started = times.get("TaskQueued", []), times.get("TaskStarted", [])
    finished = times.get("DagRunFinished", [])
    return {
        "count": count, "variant": variant, "decisions": decisions,
        "by_type": {name: len(stamps) for name, stamps in sorted(times.items()) if name in DECISIONS},
        "queued_per_s": len(queued) / (max(queued) - acked) if queued else 0.0,
        "started_per_s": len(started) / (max(started) - acked) if started else 0.0,
        "wall": (max(finished) - acked) if len(finished) >= DAGS else float("nan"),
        "last_queued": (max(queued) - acked) if queued else None,
        "cpu_per_decision": cpu["scheduler_cpu"] / decisions if decisions else float("nan"),
        "done_read": done_read - acked, **cpu,
    }


def report(result: dict) -> None:
    count, variant = result["count"], result["variant"]
    label = f"{variant:<7} {count} sched"
    print(f"     [{label}] {load_before_after(result)}")
    figure(f"{label}: tasks decided (TaskQueued) per second", result["queued_per_s"], "tasks/s")
    if variant == "real":
        figure(f"{label}: tasks started (TaskStarted) per second", result["started_per_s"], "tasks/s")
        figure(f"{label}: first trigger appended -> all {DAGS:,} runs success", result["wall"], "s")
    else:
        figure(f"{label}: first trigger appended -> last of {DAGS * TASKS * DECIDED_ROUNDS:,} TaskQueued",
               result["last_queued"], "s")
    figure(f"{label}: decisions committed (counted in tock.events)", result["decisions"], "events")
    figure(f"{label}: scheduler processes' CPU", result["scheduler_cpu"], "s")
    figure(f"{label}: scheduler CPU per decision", result["cpu_per_decision"] * 1000, "ms")
    if variant == "real":
        figure(f"{label}: launchers + runners CPU (sampled, lower bound)", result["helpers_cpu"], "s")
    if result["commits"]:
        figure(f"{label}: transactions committed (scheduler /metrics)", result["commits"], "txns")
        figure(f"{label}:   decisions per transaction", result["decisions"] / result["commits"], "events")
        figure(f"{label}:   mean commit latency", result["commit_seconds"] / result["commits"] * 1000, "ms")
    figure(f"{label}: Kafka broker JVM CPU in the window (shared broker)", result["broker"], "s")
    figure(f"{label}: broker CPU per decision (shared broker: upper bound)",
           result["broker"] / result["decisions"] * 1000, "ms")
    figure(f"{label}: whole machine busy CPU in the window (all users)", result["machine"], "s")
    print(f"       (window {result['window']:.1f} s from the first trigger to the bench reading the goal; the bench's "
          f"own CPU in it, reading and decoding the log: {result['bench']:.1f} s)")
    print("       decisions by type: " + ", ".join(f"{name} {number}" for name, number in result["by_type"].items()))


def load_before_after(result: dict) -> str:
    return f"{result['load_before']} before, {result['load_after']} after"


def extrapolate(results: list[dict]) -> None:
    print("\n     CPU per decision -> extrapolation (N schedulers on N cores decide ~ N / c decisions/s, "
          "until the broker's\n     transaction rate limits it), for each variant measured:")
    for result in results:
        c = result["cpu_per_decision"]
        if c and c == c:
            rates = ", ".join(f"N={n}: {n / c:,.0f}/s" for n in (1, 4, 16))
            print(f"       {result['variant']:<7} {result['count']} sched: c = {c * 1000:.3f} ms/decision -> {rates}")


# -- takeover when one of 4 dies -------------------------------------------------------------------

def bench_takeover(tmp: Path) -> None:
    settings, fleet, dag_ids = prepare(tmp, 4, "takeover")
    tail = Tail(settings)
    try:
        runs = trigger_all(settings, dag_ids)
        acked = time.time()
        wait(lambda: tail.counts["DagRunFinished"] >= DAGS // 4, RUN_TIMEOUT, f"{DAGS // 4} runs finished",
             every=tail.poll)
        victim = "s1"
        dead = fleet.owned(victim)
        print(f"     ({load()}; {tail.counts['DagRunFinished']} runs finished {time.time() - acked:.1f} s after the "
              f"trigger; killing {victim}, owner of partitions {sorted(dead)}; session timeout "
              f"{settings.scheduler_session_timeout:g} s (TOCK_SCHEDULER_SESSION_TIMEOUT, default))", flush=True)
        killed_at = time.time()
        os.kill(fleet.processes[victim].pid, signal.SIGKILL)
        fleet.processes[victim].wait()
        survivors = [name for name in fleet.processes if name != victim]

        def taken_over() -> bool:
            tail.poll()
            return dead <= set().union(*(fleet.owned(name) for name in survivors))

        wait(taken_over, 120, "the survivors to own the dead scheduler's partitions", every=tail.poll)
        first_seen = len(tail.events)
        assigned = assignment_times(fleet, survivors, dead, killed_at)

        def resumed():
            return [event for event in tail.events[first_seen - 2000 if first_seen > 2000 else 0:]
                    if type(event).__name__ in DECISIONS and event.at > killed_at
                    and getattr(event, "scheduler_id", victim) in survivors
                    and partition_for(event.dag_id, PARTITIONS) in dead]

        wait(lambda: resumed(), 120, "a survivor's decision in a dead partition", every=tail.poll)
        first = min(resumed(), key=lambda event: event.at)
        figure("takeover: kill -9 of 1 of 4 -> last dead partition assigned+replayed (survivor log)",
               max(assigned.values()) - killed_at, "s", "report; session timeout dominates")
        adoptions = adoption_times(fleet, survivors, dead, killed_at)
        if adoptions:
            figure("takeover: kill -9 -> adoption decided for the last dead partition (survivor log)",
                   max(adoptions.values()) - killed_at, "s")
        figure("takeover: kill -9 -> first survivor decision event in a dead partition (event time)",
               first.at - killed_at, "s")
        print(f"       (first: {type(first).__name__} {first.dag_id} by {first.scheduler_id}; partitions "
              f"{sorted(dead)} went to " + ", ".join(f"{name}: {_taken_by(fleet, survivors, dead, name)}"
                                                     for name in survivors) + ")")
        wait(lambda: tail.counts["DagRunFinished"] >= DAGS, RUN_TIMEOUT, "every run to finish", every=tail.poll)
        ours = [event for event in tail.events if getattr(event, "run_id", None) in runs]
        states = Counter(event.state for event in ours if type(event).__name__ == "DagRunFinished")
        kinds = Counter(type(event).__name__ for event in ours)
        figure("takeover: trigger acked -> all 1,000 runs finished (one scheduler killed)",
               max(event.at for event in ours if type(event).__name__ == "DagRunFinished") - acked, "s")
        print(f"       (runs: {dict(states)}; TaskAdopted {kinds['TaskAdopted']}, TaskDeclaredDead "
              f"{kinds['TaskDeclaredDead']}, tries > 1: "
              f"{sum(1 for e in ours if type(e).__name__ == 'TaskQueued' and e.try_number > 1)}; {load()})")
    finally:
        tail.close()
        fleet.stop_all()
        drop_topics(settings)


def assignment_times(fleet: Fleet, survivors: list[str], dead: set[int], since: float) -> dict[int, float]:
    """Dead partition -> time of the survivor log line that says it was assigned (after replay)."""
    found: dict[int, float] = {}
    for name in survivors:
        for line in fleet.log_of(name).splitlines():
            stamp, assigned = STAMP.match(line), ASSIGNED.search(line)
            if stamp and assigned and log_time(stamp.group(1)) >= since:
                for partition in _numbers(assigned.group(1)) & dead:
                    found.setdefault(partition, log_time(stamp.group(1)))
    return found


def adoption_times(fleet: Fleet, survivors: list[str], dead: set[int], since: float) -> dict[int, float]:
    """Dead partition -> time of the survivor's "partition N: K orphan(s), M alive and adopted" line (the
    adoption decided after replay, committed in the next transaction even when empty)."""
    found: dict[int, float] = {}
    for name in survivors:
        for line in fleet.log_of(name).splitlines():
            stamp, adopted = STAMP.match(line), re.search(r"partition (\d+): \d+ orphan", line)
            if stamp and adopted and log_time(stamp.group(1)) >= since and int(adopted.group(1)) in dead:
                found.setdefault(int(adopted.group(1)), log_time(stamp.group(1)))
    return found


def _taken_by(fleet, survivors, dead, name) -> list[int]:
    return sorted(partition for partition, who in owner_of(fleet, survivors, dead).items() if who == name)


def owner_of(fleet: Fleet, survivors: list[str], dead: set[int]) -> dict[int, str]:
    return {partition: name for name in survivors for partition in fleet.owned(name) & dead}


def main(argv: list[str]) -> None:
    variants = [name for name in ("decided", "real", "takeover") if not argv or name in argv]
    counts = [int(arg) for arg in argv if arg.isdigit()] or list(COUNTS)
    print(f"Scale-out: {DAGS:,} DAGs x {TASKS} independent no-op tasks, {PARTITIONS} partitions, real "
          f"`tock scheduler` processes; 2 cores shared with other engineers' tests ({load()})", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
        tmp = Path(folder)
        for variant in [name for name in variants if name != "takeover"]:
            for count in counts:
                result = measure(tmp, count, variant)
                report(result)
                results.append(result)
        if results:
            extrapolate(results)
        if "takeover" in variants:
            bench_takeover(tmp)


if __name__ == "__main__":
    main(sys.argv[1:])
