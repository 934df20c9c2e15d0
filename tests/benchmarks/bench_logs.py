"""Task logs shipped to tock.logs by the real runner: (a) lines per second a try can write with shipping
on, to its end and until every line is readable from the topic; (b) delay from a line written to the
try's log file to the line readable in the topic (p50 / p99). Figures only, no pass/fail."""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

from infra.log import KeyedPartitionReader, partition_for
from infra.settings import Settings
from schemas import LOGS, try_log_key
from services.api.task_logs import ShippedLog, TryRef, shipped_texts, take
from services.runner import TryRequest, run_try
from tests.benchmarks.common import bench_settings, figure

LINES = 100_000  # ~5 MB: inside the default 10 MiB budget
TIMED_LINES = 600
DAG_FILE = '''
import time
from tock import DAG, task

with DAG("bench_logs") as dag:
    @task
    def flood():
        for index in range({lines}):
            print(f"line {{index:06d}} of the flood, some text to make it a typical log line")

    @task
    def timed():
        for index in range({timed}):
            print(f"{{time.time():.6f}} line {{index}}", flush=True)
            time.sleep(0.01)

    flood(); timed()
'''


def bench_throughput(settings: Settings, dag_file: Path) -> None:
    request = TryRequest("bench_logs", "r1", "flood", 1, str(dag_file))
    started = time.perf_counter()
    assert run_try(settings, request) == 0
    ended = time.perf_counter() - started
    lines = sum(text.count("\n") for batch in shipped_texts(settings, TryRef("bench_logs", "r1", "flood", 1), 0.0)
                for text in batch.texts)
    readable = time.perf_counter() - started
    assert lines == LINES, f"{lines} lines readable, {LINES} written"
    figure(f"try writing {LINES:,} lines, shipping on: lines/s to the try's end", LINES / ended, "lines/s")
    figure(f"  ... until all {LINES:,} lines are readable from tock.logs", LINES / readable, "lines/s")


def bench_delay(settings: Settings, dag_file: Path) -> None:
    delays: list[float] = []
    reader = KeyedPartitionReader(settings, LOGS, partition_for("bench_logs", settings.partitions),
                                  try_log_key("bench_logs", "r1", "timed", 1), time.time() - 60)
    thread = threading.Thread(target=_collect_delays, args=(reader, delays), daemon=True)
    thread.start()
    assert run_try(settings, TryRequest("bench_logs", "r1", "timed", 1, str(dag_file))) == 0
    thread.join(60)
    reader.close()
    delays.sort()
    assert len(delays) == TIMED_LINES, f"{len(delays)} of {TIMED_LINES} lines seen"
    figure(f"delay line written -> readable in tock.logs, p50 ({len(delays)} lines)",
           statistics.median(delays) * 1000, "ms")
    figure("  ... p99", delays[int(len(delays) * 0.99) - 1] * 1000, "ms", "<= 500 ms")
    figure("  ... max", delays[-1] * 1000, "ms")


def _collect_delays(reader: KeyedPartitionReader, delays: list[float]) -> None:
    state = ShippedLog()
    while not state.ended:
        records = reader.poll(0.05)
        now = time.time()
        state, texts = take(state, [record.event for record in records])
        delays.extend(now - float(line.split()[0]) for text in texts for line in text.splitlines())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(Path(tmp), partitions=4)
        dag_file = Path(tmp) / "bench_logs.py"
        dag_file.write_text(DAG_FILE.format(lines=LINES, timed=TIMED_LINES))
        bench_throughput(settings, dag_file)
        bench_delay(settings, dag_file)


if __name__ == "__main__":
    main()
