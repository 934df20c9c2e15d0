"""W3 takeover: a scheduler is killed with kill -9 while its tries run; the next owner adopts them.

W3-real, the honest figure. Real `tock scheduler` processes, default timeouts (session 10 s,
task heartbeat every 5 s, heartbeat timeout 60 s). Scheduler A launches TRIES sleeping bash
tries through the local executor: real runners in their own sessions, each heartbeating to
Kafka, each try's user code in its own process group, watched by its runner's watcher.
Scheduler B is either a standby in A's
consumer group from the start (one partition, which the sticky assignor leaves with A), or
started right after the kill (default partitions). Once every try has started, its launch is
committed and its heartbeats are in the log, A is killed with SIGKILL; the clock runs from
the kill to the last TaskAdopted read committed from the log. The log is then watched for a
whole heartbeat timeout more: any TaskDeclaredDead, second try or second start is a re-run.
Every process the bench started (schedulers, launcher, runners, watchers, user code: all
carry its fresh topic prefix in their environment) is killed at the end and its topics go.

W3 synthetic, kept for its scale: the log a killed scheduler would leave is written by the
bench itself for 1,000 bare `sleep` processes (no runners, so no heartbeats after the first,
hence a 600 s heartbeat timeout), and a Scheduler thread in the bench's process takes over;
the clock runs from its assignment (no group member to time out), not from a kill.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil
from confluent_kafka.admin import AdminClient

from infra.executors import LocalExecutor
from infra.log import EventReader, KafkaEventLog
from infra.procfs import process_start_time
from infra.settings import Settings
from infra.topics import TopicNames
from schemas import (
    EVENTS,
    HEARTBEATS,
    DagRunCreated,
    TaskAdopted,
    TaskDeclaredDead,
    TaskFailed,
    TaskHeartbeat,
    TaskLaunched,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    TriggerDagRun,
)
from services.runner import local_launcher_command
from services.scheduler.core import manual_run_id
from services.scheduler.shell import Scheduler
from tests.benchmarks.common import REPO, bench_settings, figure
from tests.scenarios.scheduler_support import LogTail, environment, publish_dags

TRIES = 1000  # fits on 2 cores: ~3 % of a core heartbeating, ~2.5 GB PSS; 2,000 measured too
DAGS = 4
SLEEP_SECONDS = 1800  # outlives every bounded wait below together; the bench kills the tries long before
LAUNCH_TIMEOUT = 240.0
GROUP_TIMEOUT = 60.0
ADOPTION_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")

SLEEPERS = '''
from tock import DAG, BashTask

for number in range({dags}):
    with DAG(f"w3_sleepers_{{number}}") as dag:
        for index in range({per_dag}):
            BashTask(f"sleep_{{index:04d}}",
                     'echo "$TOCKRUN_DAG_ID $TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER" >> {ran}; exec sleep {seconds}')
'''


# -- W3-real ---------------------------------------------------------------------------------------

class Tail:
    """Committed records of tock.events and tock.heartbeats, each with the time the bench read it."""

    def __init__(self, settings: Settings) -> None:
        self.reader = EventReader(settings, [], client_id="bench-w3-tail")
        self.reader.assign([(topic, partition, 0) for topic in (EVENTS, HEARTBEATS)
                            for partition in range(settings.partitions)])
        self.read: list[tuple[float, object]] = []

    def poll(self, timeout: float = 0.2) -> None:
        records = self.reader.poll(timeout, 5000)
        now = time.time()
        self.read += [(now, record.event) for record in records if record.event is not None]

    def wait_for(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
            self.poll()

    def of_type(self, kind: type, since: float = 0.0) -> list[tuple[float, object]]:
        return [(read_at, event) for read_at, event in self.read if isinstance(event, kind) and read_at >= since]

    def tries(self, kind: type, since: float = 0.0) -> set[tuple]:
        return {try_of(event) for _read_at, event in self.of_type(kind, since)}

    def close(self) -> None:
        self.reader.close()


def try_of(event) -> tuple:
    return (event.dag_id, event.run_id, event.task_id, event.try_number)


@dataclass
class Bench:
    """One W3-real measurement: its settings, the processes it started and what it read."""

    settings: Settings
    folder: Path
    tries: int
    standby: bool
    schedulers: dict[str, subprocess.Popen] = field(default_factory=dict)
    a_peak_rss: float = 0.0  # MiB, read just before the kill

    @property
    def group(self) -> str:
        return f"{self.settings.topic_prefix}tock-scheduler"

    def start_scheduler(self, name: str) -> None:
        with open(self.folder / f"scheduler-{name}.log", "ab") as output:
            self.schedulers[name] = subprocess.Popen(
                [sys.executable, "-m", "tock_cli", "scheduler", "--id", name], env=environment(self.settings),
                stdout=output, stderr=subprocess.STDOUT, cwd=REPO)

    def log_of(self, name: str) -> str:
        path = self.folder / f"scheduler-{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def bench_w3_real(tmp: Path, tries: int = TRIES, standby: bool = True) -> None:
    """kill -9 a real scheduler whose real runners heartbeat; time to the last committed TaskAdopted."""
    settings = bench_settings(tmp / "home", partitions=1 if standby else 12, parallelism=tries)
    bench = Bench(settings, tmp, tries, standby)
    tail = Tail(settings)
    print(f"     (topic prefix {settings.topic_prefix}; logs in {tmp}; {load()})", flush=True)
    try:
        run_ids = launch_all(bench, tail)
        steady_state(bench)
        killed_at = kill_a(bench)
        adopted = await_adoption(bench, tail, killed_at)
        report_takeover(bench, tail, adopted, killed_at)
        watch_for_reruns(bench, tail, run_ids, adopted)
    finally:
        clean_up(bench, tail)


def launch_all(bench: Bench, tail: Tail) -> list[str]:
    """Publish the DAGs, start A (and standby B), trigger, and wait until every try is started,
    launched (committed) and heartbeating. Returns the run ids."""
    per_dag = bench.tries // DAGS
    assert per_dag * DAGS == bench.tries, f"tries must be a multiple of {DAGS}"
    dag_file = bench.folder / "w3_sleepers.py"
    dag_file.write_text(SLEEPERS.format(dags=DAGS, per_dag=per_dag, ran=bench.folder / "ran.txt",
                                        seconds=SLEEP_SECONDS))
    dag_ids = publish_dags(bench.settings, dag_file)
    bench.start_scheduler("A")
    wait_until(lambda: "assigned partitions" in bench.log_of("A"), GROUP_TIMEOUT, "scheduler A's assignment")
    if bench.standby:
        bench.start_scheduler("B")
        wait_until(lambda: group_members(bench) == 2, GROUP_TIMEOUT, "standby B to join A's group")
    run_ids, acked = trigger_all(bench.settings, dag_ids), time.time()
    count = bench.tries
    tail.wait_for(lambda: len(tail.tries(TaskStarted)) >= count and len(tail.tries(TaskLaunched)) >= count,
                  LAUNCH_TIMEOUT, f"{count} tries started and launched")
    last_started = max(read_at for read_at, _event in tail.of_type(TaskStarted))
    tail.wait_for(lambda: len(tail.tries(TaskHeartbeat)) >= count, LAUNCH_TIMEOUT, f"{count} tries heartbeating")
    figure(f"W3-real launch: trigger acked -> {count} tries started (read)", last_started - acked, "s")
    runners = {event.pid for _read_at, event in tail.of_type(TaskStarted)}
    print(f"     ({len(runners)} runners; every try heartbeating {time.time() - acked:.1f} s after the trigger)")
    return run_ids


def trigger_all(settings: Settings, dag_ids: list[str]) -> list[str]:
    run_ids = []
    with KafkaEventLog(settings, client_id="bench-trigger") as event_log:
        for dag_id in dag_ids:
            request_id = uuid.uuid4().hex
            event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, requested_by="bench",
                                           at=time.time()))
            run_ids.append(manual_run_id(request_id))
        event_log.flush()
    return run_ids


def group_members(bench: Bench) -> int:
    admin = AdminClient({"bootstrap.servers": bench.settings.bootstrap, "log_level": 4})
    description = admin.describe_consumer_groups([bench.group])[bench.group].result(timeout=10)
    return len(description.members)


def steady_state(bench: Bench) -> None:
    """Processes, their memory and CPU while every try runs and heartbeats (before the kill)."""
    processes = our_processes(bench.settings.topic_prefix)
    pss = sum(proportional_set_size(process.pid) for process in processes) / 1024
    busy = cpu_seconds(processes)
    time.sleep(10.0)
    busy = (cpu_seconds(processes) - busy) / 10.0
    figure("W3-real processes (schedulers, launcher, runners, watchers, tasks)", len(processes), "processes")
    figure("W3-real their memory, summed PSS", pss, "MiB")
    figure("W3-real their CPU while heartbeating (of one core)", busy * 100, "%")
    print(f"     ({load()})")


def kill_a(bench: Bench) -> float:
    scheduler = bench.schedulers["A"]
    bench.a_peak_rss = peak_rss(scheduler.pid)
    killed_at = time.time()
    os.kill(scheduler.pid, signal.SIGKILL)
    scheduler.wait()
    if not bench.standby:
        bench.start_scheduler("B")
    return killed_at


def await_adoption(bench: Bench, tail: Tail, killed_at: float) -> dict[tuple, tuple]:
    """Every try TaskAdopted by B, read committed: try -> (read at, event). Fails naming what came instead."""
    wanted = {try_of(event) for _read_at, event in tail.of_type(TaskStarted)}

    def adopted() -> dict[tuple, tuple]:
        return {try_of(event): (read_at, event) for read_at, event in tail.of_type(TaskAdopted, killed_at)
                if event.by_scheduler == "B"}

    try:
        tail.wait_for(lambda: wanted <= adopted().keys(), ADOPTION_TIMEOUT, f"{len(wanted)} tries adopted by B")
    except TimeoutError as error:
        dead = tail.of_type(TaskDeclaredDead, killed_at)
        raise AssertionError(f"{error}: {len(adopted())} adopted, {len(dead)} declared dead; "
                             f"see {bench.folder}/scheduler-B.log and {bench.settings.home}/logs/runners.log") from None
    return adopted()


def report_takeover(bench: Bench, tail: Tail, adopted: dict[tuple, tuple], killed_at: float) -> None:
    last_read, last_event = max(adopted.values(), key=lambda pair: pair[0])
    settings = bench.settings
    figure(f"W3-real kill -9 A -> last of {len(adopted):,} TaskAdopted read committed", last_read - killed_at, "s",
           "report; the session timeout dominates")
    where = "a standby in A's group from the start" if bench.standby else "started right after the kill"
    print(f"     (B {where}; {settings.partitions} partition(s); default timeouts: session "
          f"{settings.scheduler_session_timeout:g} s, heartbeat every {settings.task_heartbeat_seconds:g} s, "
          f"dead after {settings.task_heartbeat_timeout:g} s)")
    parts = takeover_parts(bench.log_of("B"), killed_at)
    if parts is None:
        print("     (B's log names no takeover: no parts)")
        return
    assigned_at, replay, decided_at = parts
    figure("W3-real   kill -> B assigned (group sees A silent)", assigned_at - killed_at, "s")
    figure("W3-real   B settles and replays", replay, "s")
    figure("W3-real   replayed -> adoption decided (probes)", decided_at - assigned_at - replay, "s")
    figure("W3-real   decided -> last TaskAdopted read committed", last_read - last_event.at, "s")


def takeover_parts(log: str, killed_at: float) -> tuple[float, float, float] | None:
    """From B's log: (assignment started, replay seconds, last adoption decided) of its first takeover
    after the kill (one "alive and adopted" line per partition follows the replay)."""
    assigned, decided = None, []
    for line in log.splitlines():
        stamp = LOG_TIME.match(line)
        if stamp is None or log_time(stamp.group(1)) < killed_at:
            continue
        found = re.search(r"assigned partitions .*: replayed in ([\d.]+) s", line)
        if found and assigned is not None:
            break
        if found:
            assigned = (log_time(stamp.group(1)), float(found.group(1)))
        elif assigned is not None and re.search(r" [1-9]\d* alive and adopted", line):
            decided.append(log_time(stamp.group(1)))
    if assigned is None or not decided:
        return None
    finished_at, replay = assigned
    return finished_at - replay, replay, max(decided)


def log_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def watch_for_reruns(bench: Bench, tail: Tail, run_ids: list[str], adopted: dict[tuple, tuple]) -> None:
    """Read on for a whole heartbeat timeout after the last adoption: a try silent since then would
    be declared dead in that time. Counts every sign of a re-run."""
    settings = bench.settings
    last_adopted = max(read_at for read_at, _event in adopted.values())
    watch = settings.task_heartbeat_timeout + 2 * settings.task_heartbeat_seconds + 5
    tail.wait_for(lambda: time.time() > last_adopted + watch, watch + 30, "the watch to end")
    ours = set(run_ids)
    events = [event for _read_at, event in tail.read if getattr(event, "run_id", None) in ours]
    starts = Counter(try_of(event) for event in events if isinstance(event, TaskStarted))
    ran = Counter((bench.folder / "ran.txt").read_text().splitlines())
    reruns = {
        "TaskDeclaredDead": sum(isinstance(event, TaskDeclaredDead) for event in events),
        "tries numbered > 1": len({try_of(event) for event in events if getattr(event, "try_number", 1) > 1}),
        "second TaskStarted of a try": sum(count - 1 for count in starts.values()),
        "user code started twice": sum(count - 1 for count in ran.values()),
        "tries ended (none may: they sleep)": sum(isinstance(event, TaskSucceeded | TaskFailed) for event in events),
    }
    figure(f"W3-real re-runs within {watch:g} s after the last adoption", sum(reruns.values()), "re-runs", "0")
    print("     (" + ", ".join(f"{name}: {count}" for name, count in reruns.items())
          + f"; user code started {sum(ran.values())} times for {bench.tries} tries)")
    beating = tail.tries(TaskHeartbeat, since=last_adopted + settings.task_heartbeat_seconds)
    figure("W3-real tries heartbeating after the takeover", len(beating), "tries", f"{bench.tries}")
    figure("W3-real peak RSS of scheduler A (before the kill)", bench.a_peak_rss, "MiB")
    figure("W3-real peak RSS of scheduler B (after the takeover)", peak_rss(bench.schedulers["B"].pid), "MiB")


def clean_up(bench: Bench, tail: Tail) -> None:
    """Stop B, kill every process carrying the bench's topic prefix (tries included), drop the topics."""
    tail.close()
    for scheduler in bench.schedulers.values():
        if scheduler.poll() is None:
            scheduler.send_signal(signal.SIGTERM)
            try:
                scheduler.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                scheduler.kill()
                scheduler.wait()
    left = our_processes(bench.settings.topic_prefix)
    for process in left:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    _gone, alive = psutil.wait_procs(left, timeout=10)
    print(f"     (cleaned up: {len(left)} processes killed, {len(alive)} still alive)")
    drop_topics(bench.settings)


def our_processes(prefix: str) -> list[psutil.Process]:
    """Every process started for this bench: they all inherit its fresh TOCK_TOPIC_PREFIX."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get("TOCK_TOPIC_PREFIX") == prefix:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def proportional_set_size(pid: int) -> int:
    """kB of memory attributable to the process (shared pages split among their sharers)."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def peak_rss(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


def drop_topics(settings: Settings) -> None:
    admin = AdminClient({"bootstrap.servers": settings.bootstrap, "log_level": 4})
    for future in admin.delete_topics(TopicNames(settings.topic_prefix).all, operation_timeout=30).values():
        future.result()


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


# -- W3 synthetic ----------------------------------------------------------------------------------

def previous_owners_log(settings: Settings, dag_path: Path, handles: list[str]) -> str:
    """The log a killed scheduler "old" left behind: one run whose tries all run on these handles."""
    [dag_id] = publish_dags(settings, dag_path)
    run_id, now = "manual__takeover", time.time()
    key = {"dag_id": dag_id, "run_id": run_id}
    with KafkaEventLog(settings, client_id="bench-old") as event_log:
        event_log.append(DagRunCreated(**key, logical_date=now, run_type="manual", dag_fingerprint="fp",
                                       scheduler_id="old", at=now))
        for index, handle in enumerate(handles):
            ids = {**key, "task_id": f"task_{index:04d}", "try_number": 1}
            event_log.append(TaskQueued(**ids, executor="local", queue="default", scheduler_id="old", at=now))
            event_log.append(TaskLaunched(**ids, executor="local", handle=handle, scheduler_id="old", at=now))
            event_log.append(TaskStarted(**ids, runner_id="r", hostname="h", pid=int(handle.split("@")[0]), at=now))
            event_log.append(TaskHeartbeat(**ids, runner_id="r", at=now))
    return run_id


def bench_w3_synthetic(tmp: Path, tries: int = 1000) -> None:
    """1,000 running tries left by a "killed scheduler" that never ran; a Scheduler thread takes over.

    The tries are real processes (``sleep``) with real pid@host:start handles, but nothing runs
    them: their runners' events are written by the bench, once, so the heartbeat timeout is
    600 s, and the clock starts at the new owner's assignment, not at a kill.
    """
    settings = bench_settings(tmp / "w3", partitions=1, task_heartbeat_timeout=600)
    source = "from tock import DAG, BashTask\nwith DAG('takeover') as dag:\n" + "".join(
        f"    BashTask('task_{index:04d}', 'sleep 600')\n" for index in range(tries))
    sleepers = [subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in range(tries)]
    try:
        handles = [f"{process.pid}@{socket.gethostname()}:{process_start_time(process.pid)}" for process in sleepers]
        dag_path = tmp / "takeover.py"
        dag_path.write_text(source)
        run_id = previous_owners_log(settings, dag_path, handles)
        take_over_in_process(settings, run_id, tries)
    finally:
        for process in sleepers:
            process.kill()
            process.wait()
        drop_topics(settings)


def take_over_in_process(settings: Settings, run_id: str, tries: int) -> None:
    scheduler = Scheduler(settings, {"local": LocalExecutor(settings, local_launcher_command())}, scheduler_id="new")
    thread, tail = threading.Thread(target=scheduler.run), LogTail(settings)
    thread.start()
    try:
        tail.wait_for(lambda _events: len(tail.of_type(TaskAdopted, run_id=run_id)) >= tries, 120, "adoption")
        adopted_at = max(event.at for event in tail.of_type(TaskAdopted, run_id=run_id))
        figure(f"W3 synthetic: assignment -> {tries:,} tries adopted (decided)", adopted_at - scheduler.assigned_at[0],
               "s", "<= 2 s")
        print(f"     (synthetic: the log written by the bench, {tries:,} bare sleeps without runners, a Scheduler "
              "thread in the\n      bench's process, heartbeat timeout 600 s, no kill and no session timeout)")
        until = time.monotonic() + 2  # would a re-run show up?
        tail.wait_for(lambda _events: time.monotonic() > until, 10, "2 s more of the log")
        reruns = [event for event in tail.events if isinstance(event, TaskQueued | TaskLaunched | TaskDeclaredDead)
                  and getattr(event, "scheduler_id", "") == "new"]
        figure("W3 synthetic: tries re-run or declared dead within 2 s", len(reruns), "tries", "0")
    finally:
        scheduler.stop()
        thread.join(30)
        tail.close()
