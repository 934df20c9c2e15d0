"""DAG processor: parse throughput, change-to-DagParsed latency, memory over many parses,
and the steady cost of parsing unchanged files again (TOCK_DAG_REPARSE_INTERVAL).

Runs `tock dag-processor` as a real process on the local broker with default
parallelism and scan interval, and watches what it writes to Kafka.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from confluent_kafka import OFFSET_BEGINNING

from infra.log import EventReader
from schemas import DAGS, PARSING, DagFileProcessed, DagParsed
from tests.benchmarks.common import bench_settings, figure, spread
from tests.scenarios.dag_processor_support import ProcessorProcess

FILES = 500
TASKS = 10
LATENCY_SAMPLES = 10
RSS_FILES = 100
# 10,000 parses take ~3 minutes on 2 shared cores; a smaller count keeps the run short (printed).
RSS_PARSES = 10_000
RSS_WARM_UP = 1_000
STEADY_FILES = 1_000
STEADY_SECONDS = 60.0  # two default re-parse intervals


def dag_source(dag_id: str, version: int = 0) -> str:
    lines = ["from tock import DAG, BashTask", f"with DAG({dag_id!r}, schedule='@hourly', retries=1):"]
    lines += [f"    t{n} = BashTask('t{n}', 'echo {dag_id} {n} v{version}')" for n in range(TASKS)]
    lines += [f"    t{n} >> t{n + 1}" for n in range(TASKS - 1)]
    return "\n".join(lines) + "\n"


class Watcher:
    """Reads a topic from the beginning, handing each new record's event to a callback."""

    def __init__(self, settings, logical_topic: str) -> None:
        self.reader = EventReader(settings, [], client_id="bench-watcher")
        self.reader.assign([(logical_topic, partition, OFFSET_BEGINNING) for partition in range(settings.partitions)])

    def until(self, done, timeout: float = 120.0) -> None:
        """Poll until ``done(event)`` returns True for some event."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for record in self.reader.poll(0.05, 5000):
                if record.event is not None and done(record.event):
                    return
        raise TimeoutError("the DAG processor did not produce the expected events in time")

    def count_for(self, seconds: float, counted) -> int:
        """Poll for ``seconds``; the number of events for which ``counted(event)`` is true."""
        deadline, count = time.monotonic() + seconds, 0
        while time.monotonic() < deadline:
            count += sum(1 for record in self.reader.poll(0.05, 5000)
                         if record.event is not None and counted(record.event))
        return count

    def count_until(self, wanted: int, seconds: float, counted) -> int:
        """Poll until ``wanted`` events for which ``counted(event)`` is true arrived, or ``seconds``."""
        deadline, count = time.monotonic() + seconds, 0
        while count < wanted and time.monotonic() < deadline:
            count += sum(1 for record in self.reader.poll(0.05, 5000)
                         if record.event is not None and counted(record.event))
        return count

    def close(self) -> None:
        self.reader.close()


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def start_processor(tmp: Path, name: str, **overrides: str):
    folder = tmp / name
    folder.mkdir()
    settings = bench_settings(tmp / f"{name}-home", dags_folder=str(folder), **overrides)
    processor = ProcessorProcess(settings, tmp / f"{name}.log")
    (folder / "warm_up.py").write_text(dag_source("warm_up"))
    dags = Watcher(settings, DAGS)
    dags.until(lambda event: isinstance(event, DagParsed) and event.dag_id == "warm_up", 60)
    return folder, settings, processor, dags


def full_parse_rate(folder: Path, dags: Watcher) -> tuple[float, float]:
    """Files/s to publish FILES new files: from writing them to receiving the last DagParsed
    (incl. the scan wait and this reader), and between the first and last DagParsed's own times."""
    pending = {f"dag_{n:04d}" for n in range(FILES)}
    stamps: list[float] = []
    started = time.time()
    for dag_id in sorted(pending):
        (folder / f"{dag_id}.py").write_text(dag_source(dag_id))
    dags.until(lambda event: isinstance(event, DagParsed) and not _seen(pending, event.dag_id, stamps, event.at))
    return FILES / (time.time() - started), (FILES - 1) / (max(stamps) - min(stamps))


def bench_parallelism_4(tmp: Path) -> None:
    folder, _settings, processor, dags = start_processor(tmp, "parallel4", parse_parallelism="4")
    try:
        wall, own = full_parse_rate(folder, dags)
        figure(f"full parse of {FILES} files, TOCK_PARSE_PARALLELISM=4 (wall)", wall, "files/s")
        figure("  same, first to last DagParsed (processor's own clock)", own, "files/s")
    finally:
        dags.close()
        processor.stop(signal.SIGTERM)


def bench_throughput_and_latency(tmp: Path) -> None:
    folder, settings, processor, dags = start_processor(tmp, "throughput")
    try:
        wall, own = full_parse_rate(folder, dags)
        figure(f"full parse of {FILES} new files x {TASKS} tasks (wall, incl. scan wait)", wall,
               "files/s", "≥ 100 files/s on 2 cores")
        figure("  same, first to last DagParsed (processor's own clock)", own, "files/s")
        latencies = [_one_change(folder, dags, version) for version in range(1, LATENCY_SAMPLES + 1)]
        figure("file change -> its DagParsed in Kafka (median)", statistics.median(latencies), "s",
               "≤ 1 s with the default scan interval")
        print(f"      latency over {LATENCY_SAMPLES} changes: {spread(latencies)} s", flush=True)
    finally:
        dags.close()
        processor.stop(signal.SIGTERM)


def _seen(pending: set[str], dag_id: str, stamps: list[float], at: float) -> bool:
    if dag_id in pending:
        stamps.append(at)
        pending.discard(dag_id)
    return bool(pending)


def _one_change(folder: Path, dags: Watcher, version: int) -> float:
    time.sleep(random.uniform(0.0, 0.5))  # land anywhere in the scan interval
    dag_id = f"dag_{random.randrange(FILES):04d}"
    changed = time.time()
    (folder / f"{dag_id}.py").write_text(dag_source(dag_id, version))
    dags.until(lambda event: isinstance(event, DagParsed) and event.dag_id == dag_id
               and f"v{version}" in event.definition.tasks[0].command, 30)
    return time.time() - changed


def bench_memory(tmp: Path) -> None:
    folder, settings, processor, dags = start_processor(tmp, "memory")
    parsing = Watcher(settings, PARSING)
    count = [0]
    seen: set[tuple[str, str]] = set()  # (file, content) parsed: periodic re-parses of it are not counted
    try:
        rounds = RSS_PARSES // RSS_FILES
        started = time.time()
        warm_rss = None
        for round_number in range(rounds):
            for n in range(RSS_FILES):
                (folder / f"mem_{n:03d}.py").write_text(dag_source(f"mem_{n:03d}", round_number))
            goal = (round_number + 1) * RSS_FILES
            parsing.until(lambda event, goal=goal: _count_processed(event, count, "mem_", seen) >= goal, 120)
            if warm_rss is None and count[0] >= RSS_WARM_UP:
                warm_rss = rss_kb(processor.pid)
        end_rss = rss_kb(processor.pid)
        elapsed = time.time() - started
        figure(f"processor RSS after {RSS_WARM_UP:,} parses (warm)", warm_rss / 1024, "MiB")
        figure(f"processor RSS after {count[0]:,} parses", end_rss / 1024, "MiB")
        figure("RSS growth after warm-up", 100.0 * (end_rss - warm_rss) / warm_rss, "%", "< 10 %")
        figure(f"re-parse rate over {count[0]:,} parses (rounds of {RSS_FILES} files + scan wait)",
               count[0] / elapsed, "files/s")
    finally:
        parsing.close()
        dags.close()
        processor.stop(signal.SIGTERM)


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of the processor, of its reaped children (its parser
    children: ``children_*``) and of the descendants alive now (psutil)."""
    process = psutil.Process(pid)
    times = process.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in process.children(recursive=True):
        try:
            child_times = child.cpu_times()
        except psutil.NoSuchProcess:  # reaped since listed: now in children_* (the next sample sees it)
            continue
        total += child_times.user + child_times.system
    return total


def load_average() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def forced_period(settings) -> float:
    """Seconds in which every unchanged file is parsed again at least once: K re-parse
    intervals when unchanged files are skipped (TOCK_DAG_FORCED_REPARSE_EVERY), else one."""
    return settings.dag_reparse_interval * getattr(settings, "dag_forced_reparse_every", 1)


def bench_steady_reparse(tmp: Path) -> None:
    """A folder of STEADY_FILES unchanged files, once published: what the processor and its
    children cost per second with the default settings, over two re-parse intervals and over
    a whole forced re-parse period (every file parsed again at least once), against the same
    folder never re-parsed. Cumulative CPU (psutil) sampled after the first full parse."""
    costs = {}
    for name, overrides in (("reparse-default", {}), ("reparse-off", {"dag_reparse_interval": "86400"})):
        folder, settings, processor, dags = start_processor(tmp, name, **overrides)
        parsing = Watcher(settings, PARSING)
        try:
            publish_steady_folder(folder, dags, parsing)
            costs[name] = steady_windows(processor.pid, parsing, STEADY_SECONDS if name == "reparse-off" else
                                         max(STEADY_SECONDS, forced_period(settings)))
        finally:
            parsing.close()
            dags.close()
            processor.stop(signal.SIGTERM)
    report_steady(costs)


def publish_steady_folder(folder: Path, dags: Watcher, parsing: Watcher) -> None:
    pending = {f"steady_{n:04d}" for n in range(STEADY_FILES)}
    for dag_id in sorted(pending):
        (folder / f"{dag_id}.py").write_text(dag_source(dag_id))
    dags.until(lambda event: isinstance(event, DagParsed) and not _seen(pending, event.dag_id, [], 0.0), 300)
    parsing.count_for(1.0, lambda event: False)  # skip what the first parses wrote


def steady_windows(pid: int, parsing: Watcher, period: float) -> list[tuple[float, float, float, str]]:
    """(seconds, CPU fraction of a core, parses/s, load average) over the first STEADY_SECONDS and,
    when unchanged files are parsed again less often than that, from the same start until every
    file was parsed again once (a whole forced re-parse period, so the average counts its parses)."""
    started, cpu_before, windows = time.monotonic(), cpu_seconds(pid), []
    parses = parsing.count_for(STEADY_SECONDS, lambda event: isinstance(event, DagFileProcessed))
    windows.append(_window(started, cpu_before, pid, parses))
    if period > STEADY_SECONDS:
        parses += parsing.count_until(STEADY_FILES - parses, started + 1.5 * period - time.monotonic(),
                                      lambda event: isinstance(event, DagFileProcessed))
        windows.append(_window(started, cpu_before, pid, parses))
    return windows


def _window(started: float, cpu_before: float, pid: int, parses: int) -> tuple[float, float, float, str]:
    elapsed = time.monotonic() - started
    return elapsed, (cpu_seconds(pid) - cpu_before) / elapsed, parses / elapsed, load_average()


def report_steady(costs) -> None:
    for elapsed, cpu, rate, load in costs["reparse-default"]:
        figure(f"re-parse of {STEADY_FILES:,} unchanged files, default settings, {elapsed:.0f} s: parses",
               rate, "files/s")
        print(f"      ({rate * elapsed:,.0f} parses in the window)", flush=True)
        figure("  DAG processor + its children CPU", 100 * cpu, "% of a core", "≤ 5 % of a core")
        print(f"      load average (1/5/15 min) at the window's end: {load}", flush=True)
    for elapsed, cpu, rate, load in costs["reparse-off"]:
        figure(f"  same folder, never re-parsed (scans only), {elapsed:.0f} s: CPU", 100 * cpu, "% of a core")
        print(f"      ({rate:.2f} parses/s; load average at the window's end: {load})", flush=True)


def _count_processed(event, count: list[int], prefix: str, seen: set[tuple[str, str]]) -> int:
    if (isinstance(event, DagFileProcessed) and Path(event.file_path).name.startswith(prefix)
            and (event.file_path, event.file_hash) not in seen):
        seen.add((event.file_path, event.file_hash))
        count[0] += 1
    return count[0]


BENCHES = {"throughput": bench_throughput_and_latency, "parallelism": bench_parallelism_4, "memory": bench_memory,
           "steady": bench_steady_reparse}


def main(selected: list[str]) -> None:
    """Every bench, or those named on the command line (throughput, parallelism, memory, steady)."""
    print("DAG processor (`tock dag-processor`, default parallelism 2, scan interval 0.5 s, "
          "re-parse interval 30 s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-dag-processor-") as tmp:
        for name, bench in BENCHES.items():
            if not selected or name in selected:
                bench(Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
