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
    """CPU time of a process and of its reaped children (its parser children), user + system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def bench_steady_reparse(tmp: Path) -> None:
    """A folder of STEADY_FILES unchanged files, once published: what the processor costs per
    second with the default re-parse interval, against the same folder never re-parsed."""
    costs = {}
    for name, overrides in (("reparse-default", {}), ("reparse-off", {"dag_reparse_interval": "86400"})):
        folder, settings, processor, dags = start_processor(tmp, name, **overrides)
        parsing = Watcher(settings, PARSING)
        try:
            pending = {f"steady_{n:04d}" for n in range(STEADY_FILES)}
            for dag_id in sorted(pending):
                (folder / f"{dag_id}.py").write_text(dag_source(dag_id))
            dags.until(lambda event, pending=pending: isinstance(event, DagParsed)
                       and not _seen(pending, event.dag_id, [], 0.0), 300)
            parsing.count_for(1.0, lambda event: False)  # skip what the first parses wrote
            cpu_before = cpu_seconds(processor.pid)
            parses = parsing.count_for(STEADY_SECONDS, lambda event: isinstance(event, DagFileProcessed))
            costs[name] = (cpu_seconds(processor.pid) - cpu_before) / STEADY_SECONDS, parses / STEADY_SECONDS
        finally:
            parsing.close()
            dags.close()
            processor.stop(signal.SIGTERM)
    (cpu_on, rate_on), (cpu_off, rate_off) = costs["reparse-default"], costs["reparse-off"]
    figure(f"{STEADY_FILES:,} unchanged files, re-parse every 30 s: parses", rate_on, "files/s")
    figure("  processor + its children CPU", 100 * cpu_on, "% of a core")
    figure("  same folder, never re-parsed (scans only): CPU", 100 * cpu_off, "% of a core")
    print(f"      ({rate_off:.2f} parses/s without re-parse; {STEADY_SECONDS:.0f} s windows)", flush=True)


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
