"""Big DAGs, end to end with real processes, and where the time goes.

fan-out: one DAG file of one root task -> TASKS no-op tasks (fan-out; the root first, then
  every other task depends on it only), parsed by a real `tock dag-processor`, run by a real
  `tock scheduler` on the local executor (its warm launcher forks runners, each running up to
  8 tries, each try's no-op in a child of its own). Timed from the TriggerDagRun's
  acknowledgement to the run's DagRunFinished. The scheduler is sampled by py-spy (if
  PYSPY names it: ``pip install --target DIR py-spy``, PYSPY=DIR/bin/py-spy) for the whole run.
mapped: the same shape made by dynamic task mapping: one root task returning TASKS numbers and one
  no-op task ``.expand()``ed over them (TASKS instances), on the same processes and settings, so its
  figures stand beside the fan-out's. Also timed: the expansion (the root's TaskSucceeded -> the
  scheduler's TaskMapExpanded, both event times).
Each runs first SMALL (200) wide, then TASKS wide, in the same bench run, and prints the rate of tries started
  at TASKS wide against SMALL's (goal: at least 80 %).
folder: FILES DAG files x 10 tasks written before `tock dag-processor` starts; the clock runs
  from the processor's start to the last of FILES DagParsed read from tock.dags. Parse time per
  file (DagFileProcessed.duration, the child's life) beside the wall time; py-spy samples the
  processor and its parser children.
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
import uuid
from collections import Counter
from pathlib import Path

import psutil

from infra.log import EventReader, KafkaEventLog
from schemas import DAGS, EVENTS, PARSING, DagFileProcessed, DagParsed, TriggerDagRun
from services.scheduler.core import manual_run_id
from tests.benchmarks.common import REPO, bench_settings, children_cpu, figure
from tests.benchmarks.w3_takeover import drop_topics, our_processes
from tests.scenarios.dag_processor_support import ProcessorProcess
from tests.scenarios.scheduler_support import environment

TASKS = 10_000
SMALL = 200  # each workload runs at this width first, in the same bench run: the rate at TASKS is set against it
FILES = 1_000
FILE_TASKS = 10
RUN_TIMEOUT = 1200.0  # a 10,000-task fan-out took 837 s on 2 cores; a run not done by then is reported partially
PYSPY = os.environ.get("PYSPY", "")

FAN_OUT = '''
from tock import DAG, task

def noop():
    pass

with DAG("big_fan_out") as dag:
    root = task(noop, task_id="root")()
    for index in range({tasks}):
        root >> task(noop, task_id=f"leaf_{{index:05d}}")()
'''


MAPPED = '''
from tock import DAG, task

@task
def numbers():
    return list(range({tasks}))

@task
def noop(number):
    pass

with DAG("big_mapped") as dag:
    noop.override(max_map_length={tasks}).expand(number=numbers())
'''

# name, DAG id, DAG file text (formatted with tasks=)
WORKLOADS = {"fan-out": ("big_fan_out", FAN_OUT), "mapped": ("big_mapped", MAPPED)}


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def folder_dag(dag_id: str) -> str:
    lines = ["from tock import DAG, BashTask", f"with DAG({dag_id!r}, schedule='@hourly', retries=1):"]
    lines += [f"    t{n} = BashTask('t{n}', 'echo {dag_id} {n}')" for n in range(FILE_TASKS)]
    lines += [f"    t{n} >> t{n + 1}" for n in range(FILE_TASKS - 1)]
    return "\n".join(lines) + "\n"


class Reader:
    """Committed records of some topics, each event with the time the bench read it."""

    def __init__(self, settings, topics: tuple[str, ...]) -> None:
        self.reader = EventReader(settings, [], client_id="bench-big-reader")
        self.reader.assign([(topic, partition, 0) for topic in topics for partition in range(settings.partitions)])
        self.events: list = []
        self.counts: Counter = Counter()

    def poll(self) -> None:
        now = time.time()
        for record in self.reader.poll(0.2, 10000):
            if record.event is not None:
                self.events.append((now, record.event))
                self.counts[type(record.event).__name__] += 1

    def close(self) -> None:
        self.reader.close()


class Profiler:
    """py-spy record attached to a pid (nonblocking: the target is not paused), raw collapsed stacks."""

    def __init__(self, pid: int, out: Path, subprocesses: bool = False) -> None:
        self.out = out
        self.process = None
        if PYSPY and Path(PYSPY).exists():
            command = [PYSPY, "record", "--pid", str(pid), "--rate", "50", "--nonblocking", "--format", "raw",
                       "-o", str(out)] + (["--subprocesses"] if subprocesses else [])
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop_and_summarize(self, title: str, top: int = 14) -> None:
        if self.process is None:
            print(f"     (no profile of {title}: set PYSPY to a py-spy binary)")
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        summarize_profile(self.out, title, top)


def summarize_profile(path: Path, title: str, top: int) -> None:
    """Self and inclusive sample shares by function from py-spy's collapsed stacks."""
    if not path.exists():
        print(f"     (py-spy wrote no profile for {title})")
        return
    own, inclusive, total = Counter(), Counter(), 0
    for line in path.read_text().splitlines():
        stack, _space, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_function(frame) for frame in stack.split(";")]
        samples = int(count)
        total += samples
        own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    if not total:
        print(f"     (py-spy: no samples of {title})")
        return
    print(f"     py-spy profile of {title}: {total:,} samples at 50 Hz over the main and librdkafka-calling "
          "threads; py-spy leaves out idle (sleeping) samples but counts a thread waiting for a CPU as active; "
          f"{path})")
    print("       inclusive (function on the stack):")
    for frame, samples in inclusive.most_common(top):
        print(f"         {100 * samples / total:5.1f} %  {frame}")
    print("       self (function on top of the stack):")
    for frame, samples in own.most_common(top):
        print(f"         {100 * samples / total:5.1f} %  {frame}")


def _function(frame: str) -> str:
    """'name (path/to/file.py:123)' -> 'name (file.py)': lines merged per function."""
    name, _space, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rstrip(")")
    return f"{name} ({'/'.join(Path(file).parts[-2:])})"


def cpu_of(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except psutil.NoSuchProcess:
        return 0.0


# -- fan-out and mapped ---------------------------------------------------------------------------

def bench_fan_out(tmp: Path, workload: str, tasks: int, parallelism: int) -> float | None:
    """One run of ``workload``'s DAG (1 root + ``tasks`` no-op tries) on a fresh processor and scheduler; its
    tries started per second (None if none started)."""
    dag_id, text = WORKLOADS[workload]
    dags_folder = tmp / "dags"
    dags_folder.mkdir(parents=True)
    settings = bench_settings(tmp / "home", partitions=12, dags_folder=str(dags_folder), parallelism=parallelism,
                              warm_runners=min(parallelism, 64), dag_reparse_interval=3600)
    print(f"     ({workload} of {tasks:,}: topic prefix {settings.topic_prefix}; TOCK_PARALLELISM={parallelism}; "
          f"logs in {tmp}; {load()})", flush=True)
    reader = Reader(settings, (EVENTS, DAGS))
    processor = scheduler = profiler = None
    try:
        written = time.time()
        (dags_folder / f"{dag_id}.py").write_text(text.format(tasks=tasks))
        processor = ProcessorProcess(settings, tmp / "dag-processor.log")
        scheduler = start_scheduler(settings, tmp)
        wait(reader, lambda: reader.counts["DagParsed"] >= 1, 120, "the DAG to be parsed")
        parsed = next(event for _read, event in reader.events if isinstance(event, DagParsed))
        figure(f"{workload} {tasks:,}: file written -> DagParsed (processor start incl.)", parsed.at - written, "s")
        wait_for_text(tmp / "scheduler.log", "assigned partitions", 60)
        time.sleep(1.0)
        profiler = Profiler(scheduler.pid, tmp / "scheduler.pyspy")
        cpu0 = cpu_of(scheduler.pid)
        run_id, acked = trigger(settings, dag_id)
        progress = Progress(reader, acked, tasks)
        progress.scheduler_pid = scheduler.pid
        try:
            wait(reader, lambda: reader.counts["DagRunFinished"] >= 1, RUN_TIMEOUT, "the run to finish",
                 progress.tick)
        except TimeoutError:
            print(f"     !! the run did not finish within {RUN_TIMEOUT:g} s: partial figures below", flush=True)
        scheduler_cpu = cpu_of(scheduler.pid) - cpu0
        progress.sample()
        rate = report_fan_out(reader, workload, run_id, acked, tasks, scheduler_cpu, progress)
        profiler.stop_and_summarize(f"the scheduler during the {tasks:,}-task run")
        profiler = None
        return rate
    finally:
        if profiler is not None:
            profiler.stop_and_summarize("the scheduler (interrupted)")
        for process in (scheduler,):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(60)
        if processor is not None:
            processor.stop()
        reader.close()
        left = our_processes(settings.topic_prefix)
        for process in left:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        drop_topics(settings)


class Progress:
    """Prints progress every 15 s and samples the CPU of the scheduler's launcher and runners."""

    def __init__(self, reader: Reader, acked: float, tasks: int) -> None:
        self.reader, self.acked, self.tasks = reader, acked, tasks
        self.next_print = time.monotonic() + 15
        self.next_sample = 0.0
        self.helpers: dict[int, float] = {}
        self.scheduler_pid = 0

    def tick(self) -> None:
        if time.monotonic() >= self.next_sample:
            self.next_sample = time.monotonic() + 1.0
            self.sample()
        if time.monotonic() >= self.next_print:
            self.next_print = time.monotonic() + 15
            counts = self.reader.counts
            print(f"       ... {time.time() - self.acked:5.0f} s: queued {counts['TaskQueued']:,}, launched "
                  f"{counts['TaskLaunched']:,}, started {counts['TaskStarted']:,}, succeeded "
                  f"{counts['TaskSucceeded']:,} of {self.tasks + 1:,} ({load()})", flush=True)

    def sample(self) -> None:
        if self.scheduler_pid:
            children_cpu(self.scheduler_pid, self.helpers)


def report_fan_out(reader: Reader, workload: str, run_id: str, acked: float, tasks: int, scheduler_cpu: float,
                   progress: Progress) -> float | None:
    events = [event for _read, event in reader.events if getattr(event, "run_id", None) == run_id]
    last: dict[str, float] = {}
    kinds = Counter()
    for event in events:
        name = type(event).__name__
        kinds[name] += 1
        last[name] = max(last.get(name, 0.0), event.at)
    name = f"{workload} {tasks:,}"
    finished = next((event for event in events if type(event).__name__ == "DagRunFinished"), None)
    if finished is not None:
        figure(f"{name}: trigger acked -> run {finished.state}", finished.at - acked, "s")
    else:
        succeeded = kinds["TaskSucceeded"]
        figure(f"{name}: NOT finished; tries succeeded in {time.time() - acked:.0f} s", succeeded, "tries")
        rate = succeeded / (time.time() - acked)
        figure(f"{name}:   at that rate, trigger -> success would take", (tasks + 1) / rate, "s")
    report_expansion(events, name)
    print(f"       ({load()}; last of each, from the trigger: " + ", ".join(
        f"{kind} +{last[kind] - acked:.1f} s" for kind in ("DagRunCreated", "TaskQueued", "TaskLaunched",
                                                           "TaskStarted", "TaskSucceeded") if kind in last) + ")")
    started = sorted(event.at for event in events if type(event).__name__ == "TaskStarted")
    rate = (len(started) - 1) / (started[-1] - started[0]) if len(started) > 1 else None
    if rate is not None:
        figure(f"{name}: tries started per second (first -> last TaskStarted)", rate, "tries/s")
    decisions = sum(kinds[kind] for kind in ("DagRunCreated", "TaskMapExpanded", "TaskQueued", "TaskLaunched",
                                             "DagRunFinished"))
    figure(f"{name}: scheduler CPU", scheduler_cpu, "s")
    figure(f"{name}: scheduler CPU per decision", 1000 * scheduler_cpu / decisions, "ms")
    figure(f"{name}: scheduler CPU per task try", 1000 * scheduler_cpu / max(1, kinds["TaskSucceeded"]), "ms")
    figure(f"{name}: launcher + runners CPU (own, sampled each 1 s, lower bound)",
           sum(progress.helpers.values()), "s")
    print(f"       (decisions: {decisions:,} = DagRunCreated + TaskMapExpanded + TaskQueued + TaskLaunched + "
          "DagRunFinished; events " + ", ".join(f"{kind} {count:,}" for kind, count in sorted(kinds.items())) + ")")
    return rate


def report_rates(workload: str, rates: dict[int, float | None]) -> None:
    """The rate of tries started at the widest run against the narrowest, same bench run (goal: >= 80 %)."""
    (small, small_rate), (wide, wide_rate) = min(rates.items()), max(rates.items())
    if small != wide and small_rate and wide_rate:
        figure(f"{workload}: tries/s at {wide:,} wide against at {small:,} wide", 100 * wide_rate / small_rate, "%",
               ">= 80 %")


def report_expansion(events: list, name: str) -> None:
    """For a mapped run: its upstream's success -> the expansion, and the expansion -> its last TaskQueued."""
    expanded = next((event for event in events if type(event).__name__ == "TaskMapExpanded"), None)
    if expanded is None:
        return
    upstream = max(event.at for event in events if type(event).__name__ == "TaskSucceeded"
                   and event.task_id != expanded.task_id)
    figure(f"{name}: upstream TaskSucceeded -> TaskMapExpanded ({expanded.count:,})", expanded.at - upstream, "s")
    queued = [event.at for event in events if type(event).__name__ == "TaskQueued"
              and event.task_id == expanded.task_id]
    figure(f"{name}: TaskMapExpanded -> last instance TaskQueued (paced by slots)", max(queued) - expanded.at, "s")


def start_scheduler(settings, tmp: Path) -> subprocess.Popen:
    with open(tmp / "scheduler.log", "ab") as output:
        return subprocess.Popen([sys.executable, "-m", "tock_cli", "scheduler", "--id", "big"],
                                env=environment(settings), stdout=output, stderr=subprocess.STDOUT, cwd=REPO)


def trigger(settings, dag_id: str) -> tuple[str, float]:
    request_id = uuid.uuid4().hex
    with KafkaEventLog(settings, client_id="bench-trigger") as event_log:
        event_log.append(TriggerDagRun(dag_id=dag_id, request_id=request_id, requested_by="bench", at=time.time()))
        event_log.flush()
        return manual_run_id(request_id), time.time()


def wait(reader: Reader, condition, timeout: float, what: str, every=None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        reader.poll()
        if every is not None:
            every()


def wait_for_text(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and text in path.read_text(errors="replace")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {text!r} in {path} after {timeout:g} s")
        time.sleep(0.2)


# -- folder of many files ------------------------------------------------------------------------

def bench_folder(tmp: Path, files: int) -> None:
    dags_folder = tmp / "dags"
    dags_folder.mkdir(parents=True)
    for number in range(files):
        (dags_folder / f"dag_{number:04d}.py").write_text(folder_dag(f"dag_{number:04d}"))
    settings = bench_settings(tmp / "home", partitions=12, dags_folder=str(dags_folder), dag_reparse_interval=3600)
    print(f"     ({files:,} files x {FILE_TASKS} tasks written before the processor starts; default "
          f"TOCK_PARSE_PARALLELISM={settings.parse_parallelism}; {load()})", flush=True)
    reader = Reader(settings, (DAGS, PARSING))
    started = time.time()
    processor = ProcessorProcess(settings, tmp / "dag-processor.log")
    profiler = Profiler(processor.pid, tmp / "dag-processor.pyspy", subprocesses=True)
    try:
        wait(reader, lambda: len({event.dag_id for _read, event in reader.events if isinstance(event, DagParsed)})
             >= files, 600, f"{files} DagParsed")
        read_at = max(read for read, event in reader.events if isinstance(event, DagParsed))
        processor_cpu = cpu_times_with_children(processor.pid)
        parsed = [event for _read, event in reader.events if isinstance(event, DagParsed)]
        processed = [event for _read, event in reader.events if isinstance(event, DagFileProcessed)]
        figure(f"{files:,}-file folder: processor start -> last DagParsed read", read_at - started, "s")
        figure(f"{files:,}-file folder: first -> last DagParsed (event times)",
               max(event.at for event in parsed) - min(event.at for event in parsed), "s")
        figure(f"{files:,}-file folder: files per second (start -> last read)", files / (read_at - started), "files/s")
        durations = [event.duration for event in processed]
        if durations:
            figure(f"{files:,}-file folder: parse child life per file (median, DagFileProcessed.duration)",
                   statistics.median(durations) * 1000, "ms")
            figure(f"{files:,}-file folder:   sum of child lives / parallelism", sum(durations) /
                   settings.parse_parallelism, "s")
        figure(f"{files:,}-file folder: processor + reaped children CPU", processor_cpu, "s")
        print(f"       ({load()})")
    finally:
        profiler.stop_and_summarize(f"the DAG processor (and parser children) over {files:,} files")
        processor.stop()
        reader.close()
        drop_topics(settings)


def cpu_times_with_children(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system + times.children_user + times.children_system
    except psutil.NoSuchProcess:
        return 0.0


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_big_dags")
    parser.add_argument("workloads", nargs="*", default=["fan-out", "mapped", "folder"],
                        help="fan-out, mapped and/or folder")
    parser.add_argument("--tasks", type=int, default=TASKS, help="fan-out width, and the mapped task's instances")
    parser.add_argument("--files", type=int, default=FILES, help="files in the folder")
    parser.add_argument("--parallelism", type=int, default=64, help="TOCK_PARALLELISM of the fan-out's scheduler")
    parser.add_argument("--small", type=int, default=SMALL,
                        help="the width each workload runs at first, in the same run, for the rate's ratio (0: not)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (logs, profiles)")
    options = parser.parse_args(argv)
    print(f"Big DAGs (2 cores shared with other engineers' tests; {load()})", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-big-") as folder:
        tmp = options.keep or Path(folder)
        for workload in WORKLOADS:
            if workload in options.workloads:
                widths = [width for width in (options.small, options.tasks) if width]
                rates = {width: bench_fan_out(tmp / f"{workload}-{width}", workload, width, options.parallelism)
                         for width in widths}
                report_rates(workload, rates)
        if "folder" in options.workloads:
            bench_folder(tmp / f"folder-{options.files}", options.files)


if __name__ == "__main__":
    main(sys.argv[1:])
