"""`make bench-airflow`: Tock beside Apache Airflow 3.3.2 (LocalExecutor, PostgreSQL), the same workloads in
one run, alternating, each figure printed for both with the load average beside it and the ratio
Airflow / Tock; saved to $TOCK_HOME/bench-airflow.json, whose ratios `make bench` prints.

W1: 200 independent no-op Python tasks, trigger acknowledged -> run success (median of 3, alternating
    Tock, Airflow, Tock, ...). W2: a 50-task chain of them: trigger -> success / 50, and the median hop
    from one task's end to the next's start. The same DAG shapes, written for each (bench_scheduler's
    FAN_OUT and CHAIN; airflow_side/dags). Tock: bench_scheduler's scheduler process, runs timed from the
    TriggerDagRun's acknowledgement to DagRunFinished, tries from TaskStarted / TaskSucceeded. Airflow: its
    api-server, scheduler and dag-processor as processes, runs triggered through the REST API and timed
    from its answer to dag_run.end_date, tries from task_instance.start_date / end_date.
Parse: a folder of FILES DAG files of bench_dag_processor's shape (10 Bash tasks) in each syntax: the
    processor started on it -> every DAG published (Tock: DagParsed in Kafka; Airflow: the dag row,
    serialized), then the CPU of the processor and its parsers re-parsing the unchanged files over a
    WINDOW (both re-parse every 30 s with 2 parsers by default).

Both systems' W1/W2 services are up together (the one not measured idles); the parse workload runs
each processor alone. Usage: python -m tests.benchmarks.bench_airflow [w1w2] [parse] [--window SECONDS]
(Airflow's venv: built once by infra/scripts/airflow-venv.sh).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from schemas import DAGS, PARSING, DagFileProcessed, DagParsed
from tests.benchmarks.airflow_side import parse_dags
from tests.benchmarks.airflow_side.report import (
    SAVED_NAME,
    Comparison,
    comparison_lines,
    load_text,
    save,
    summary_lines,
    to_json,
)
from tests.benchmarks.airflow_side.services import (
    PARALLELISM,
    AirflowApi,
    AirflowDatabase,
    AirflowServices,
    AirflowSetup,
    fresh_database,
    migrate,
    project_postgres,
)
from tests.benchmarks.bench_dag_processor import Watcher, _seen, cpu_seconds, dag_source
from tests.benchmarks.bench_scheduler import CHAIN, FAN_OUT, full_hops, hop_times, start_scheduler, stop, write_dag
from tests.benchmarks.common import REPO, bench_settings, infra_home, spread, timed_run
from tests.benchmarks.w3_takeover import drop_topics
from tests.scenarios.dag_processor_support import ProcessorProcess
from tests.scenarios.scheduler_support import LogTail, publish_dags

AIRFLOW_VERSION = "3.3.2"
AIRFLOW_DAGS = Path(__file__).parent / "airflow_side" / "dags"
W1_REPEATS = 3
FILES = 200
WINDOW = 60.0
RUN_TIMEOUT = 900.0

Load = tuple[float, float, float]


def loadavg() -> Load:
    one, five, fifteen = os.getloadavg()
    return one, five, fifteen


def airflow_venv() -> Path:
    """Airflow 3.3.2's python, its venv built once by infra/scripts/airflow-venv.sh (cached; pip's errors
    go to stderr)."""
    built = subprocess.run(["bash", "infra/scripts/airflow-venv.sh"], cwd=REPO, check=True, stdout=subprocess.PIPE,
                           text=True)
    return Path(built.stdout.strip().splitlines()[-1])


def show(comparison: Comparison) -> Comparison:
    print("\n".join(comparison_lines(comparison)), flush=True)
    return comparison


class TockSide:
    """Tock's W1/W2 as bench_scheduler runs them: a scheduler process on the local broker (3 partitions,
    TOCK_PARALLELISM=64, 64 warm runners), DAGs published as the DAG processor would."""

    def __init__(self, tmp: Path) -> None:
        self.settings = bench_settings(tmp / "tock-home", partitions=3, parallelism=64, warm_runners=64)
        publish_dags(self.settings, write_dag(tmp, "fan_out", FAN_OUT))
        publish_dags(self.settings, write_dag(tmp, "chain", CHAIN))
        self.scheduler, self.tail = start_scheduler(self.settings, tmp, "bench"), LogTail(self.settings)

    def run(self, dag_id: str) -> tuple[float, str]:
        return timed_run(self.settings, self.tail, dag_id)

    def hops(self, run_id: str) -> tuple[list[float], list[float]]:
        """Per hop: upstream TaskSucceeded -> next TaskStarted, and TaskSucceeded -> next TaskSucceeded."""
        return hop_times(self.tail, run_id), full_hops(self.tail, run_id)

    def close(self) -> None:
        stop(self.scheduler)
        self.tail.close()
        drop_topics(self.settings)


class AirflowSide:
    """Airflow's W1/W2: api-server, scheduler and dag-processor over airflow_side/dags, a fresh database."""

    def __init__(self, setup: AirflowSetup) -> None:
        self.setup, self.services = setup, AirflowServices(setup)
        self.api, self.database = AirflowApi(setup.api_url), None

    def start(self) -> None:
        migrate(self.setup)
        for service in ("api-server", "scheduler", "dag-processor"):
            self.services.start(service)
        self.database = AirflowDatabase(self.setup.database_url)
        for dag_id in ("fan_out", "chain"):
            self.api.wait_for_dag(dag_id)
            self.api.unpause(dag_id)

    def run(self, dag_id: str) -> tuple[float, str]:
        """Seconds from the REST API's answer to the trigger to dag_run.end_date, and the run id."""
        run_id, acknowledged = self.api.trigger(dag_id)
        finished = self.database.run_finished(dag_id, run_id, RUN_TIMEOUT)
        if finished.state != "success":
            raise RuntimeError(f"Airflow run {run_id} of {dag_id} ended {finished.state} (logs: {self.setup.home})")
        return finished.end_date.timestamp() - acknowledged, run_id

    def hops(self, run_id: str) -> tuple[list[float], list[float]]:
        """Per hop: task_instance.end_date -> next start_date, and end_date -> next end_date."""
        times = self.database.task_times("chain", run_id)
        steps = [times[f"step_{index:02d}"] for index in range(50)]
        return ([after[0] - before[1] for before, after in zip(steps, steps[1:], strict=False)],
                [after[1] - before[1] for before, after in zip(steps, steps[1:], strict=False)])

    def close(self) -> None:
        try:
            if self.database is not None:
                self.database.close()
        finally:
            self.services.stop_all()


def bench_w1_w2(tmp: Path, airflow_python: Path, work: Path, admin_url: str) -> list[Comparison]:
    database = fresh_database(admin_url, "tock_bench_airflow")
    airflow = AirflowSide(AirflowSetup.create(airflow_python, work / "w1w2", AIRFLOW_DAGS, database))
    tock = None
    try:
        tock = TockSide(tmp)
        airflow.start()
        print(f"  Airflow up ({airflow.setup.home}); warm-up: one W1 run on each, not counted", flush=True)
        tock.run("fan_out")
        airflow.run("fan_out")
        return [bench_w1(tock, airflow), *bench_w2(tock, airflow)]
    finally:
        try:
            airflow.close()
        finally:
            if tock is not None:
                tock.close()


def bench_w1(tock: TockSide, airflow: AirflowSide) -> Comparison:
    tock_runs, airflow_runs = [], []
    for repeat in range(W1_REPEATS):
        tock_runs.append((tock.run("fan_out")[0], loadavg()))
        airflow_runs.append((airflow.run("fan_out")[0], loadavg()))
        print(f"     W1 #{repeat + 1}: Tock {tock_runs[-1][0]:.3f} s (load {tock_runs[-1][1][0]:.2f}), "
              f"Airflow {airflow_runs[-1][0]:.3f} s (load {airflow_runs[-1][1][0]:.2f})", flush=True)
    (tock_seconds, tock_load), (airflow_seconds, airflow_load) = _median_run(tock_runs), _median_run(airflow_runs)
    print(f"     Tock {spread([s for s, _ in tock_runs])}; Airflow {spread([s for s, _ in airflow_runs])}")
    return show(Comparison(f"W1 200 no-op tasks, trigger acked -> success (median of {W1_REPEATS})", "s",
                           tock_seconds, airflow_seconds, tock_load, airflow_load))


def _median_run(runs: list[tuple[float, Load]]) -> tuple[float, Load]:
    """The median run (the lower middle one of an even count), with the load it ended at."""
    return sorted(runs)[(len(runs) - 1) // 2]


def bench_w2(tock: TockSide, airflow: AirflowSide) -> list[Comparison]:
    tock_total, tock_run = tock.run("chain")
    tock_load, tock_hops = loadavg(), tock.hops(tock_run)
    airflow_total, airflow_run = airflow.run("chain")
    airflow_load, airflow_hops = loadavg(), airflow.hops(airflow_run)
    loads = {"tock_load": tock_load, "airflow_load": airflow_load}
    return [show(Comparison("W2 50-task chain, trigger acked -> success / 50", "ms/hop",
                            tock_total / 50 * 1000, airflow_total / 50 * 1000, **loads)),
            show(Comparison("W2 median hop: a task's end -> the next one's start", "ms",
                            statistics.median(tock_hops[0]) * 1000, statistics.median(airflow_hops[0]) * 1000,
                            **loads)),
            show(Comparison("W2 median hop: a task's end -> the next one's end", "ms",
                            statistics.median(tock_hops[1]) * 1000, statistics.median(airflow_hops[1]) * 1000,
                            **loads)),
            show(Comparison("W2 whole chain, trigger acked -> success", "s", tock_total, airflow_total, **loads))]


def write_folder(folder: Path, source) -> list[str]:
    folder.mkdir(parents=True)
    dag_ids = [f"parse_{n:04d}" for n in range(FILES)]
    for dag_id in dag_ids:
        (folder / f"{dag_id}.py").write_text(source(dag_id))
    return dag_ids


def parse_tock(tmp: Path, window: float) -> tuple[float, float, float, float, Load]:
    """Processor start -> last DagParsed read; first -> last DagParsed.at; CPU share and parses/s over WINDOW."""
    folder = tmp / "tock-parse"
    pending = set(write_folder(folder, dag_source))
    settings = bench_settings(tmp / "tock-parse-home", dags_folder=str(folder))
    dags, parsing = Watcher(settings, DAGS), Watcher(settings, PARSING)
    started, stamps = time.time(), []
    processor = ProcessorProcess(settings, tmp / "tock-parse.log")
    try:
        dags.until(lambda event: isinstance(event, DagParsed) and not _seen(pending, event.dag_id, stamps, event.at),
                   RUN_TIMEOUT)
        first_parse, load = time.time() - started, loadavg()
        parsing.count_for(1.0, lambda event: False)  # what the first parses wrote
        cpu_before = cpu_seconds(processor.pid)
        parses = parsing.count_for(window, lambda event: isinstance(event, DagFileProcessed))
        cpu = (cpu_seconds(processor.pid) - cpu_before) / window
    finally:
        parsing.close()
        dags.close()
        processor.stop()
        drop_topics(settings)
    return first_parse, max(stamps) - min(stamps), cpu, parses / window, load


def parse_airflow(tmp: Path, airflow_python: Path, work: Path, admin_url: str,
                  window: float) -> tuple[float, float, float, float, Load]:
    """`airflow dag-processor` start -> every dag row parsed and serialized; first -> last parse time; CPU
    share and parses/s (changes of dag.last_parsed_time, polled each second) over WINDOW."""
    folder = tmp / "airflow-parse"
    dag_ids = set(write_folder(folder, parse_dags.dag_source))
    setup = AirflowSetup.create(airflow_python, work / "parse", folder,
                                fresh_database(admin_url, "tock_bench_airflow_parse"))
    migrate(setup)
    services, database = AirflowServices(setup), AirflowDatabase(setup.database_url)
    try:
        started = time.time()
        processor = services.start("dag-processor")
        first_seen = _wait_parsed(database, dag_ids)
        first_parse, load = time.time() - started, loadavg()
        cpu_before, seen = cpu_seconds(processor.pid), set(database.parsed("parse_").items())
        window_end = time.monotonic() + window
        while time.monotonic() < window_end:
            time.sleep(1.0)
            seen |= set(database.parsed("parse_").items())
        cpu = (cpu_seconds(processor.pid) - cpu_before) / window
    finally:
        database.close()
        services.stop_all()
    parses = len(seen) - len(dag_ids)
    return first_parse, max(first_seen.values()) - min(first_seen.values()), cpu, parses / window, load


def _wait_parsed(database: AirflowDatabase, dag_ids: set[str]) -> dict[str, float]:
    """Poll until every DAG is parsed; each one's first parse time."""
    first_seen: dict[str, float] = {}
    deadline = time.monotonic() + RUN_TIMEOUT
    while len(first_seen) < len(dag_ids):
        if time.monotonic() > deadline:
            raise TimeoutError(f"Airflow parsed {len(first_seen)} of {len(dag_ids)} DAGs in {RUN_TIMEOUT:g} s")
        for dag_id, parsed_at in database.parsed("parse_").items():
            first_seen.setdefault(dag_id, parsed_at)
        time.sleep(0.2)
    return first_seen


def bench_parse(tmp: Path, airflow_python: Path, work: Path, admin_url: str, window: float) -> list[Comparison]:
    tock = parse_tock(tmp, window)
    print(f"     Tock: all {FILES} published in {tock[0]:.3f} s; {window:.0f} s of unchanged files: CPU "
          f"{100 * tock[2]:.2f} % of a core, {tock[3]:.2f} parses/s ({load_text(tock[4])})", flush=True)
    airflow = parse_airflow(tmp, airflow_python, work, admin_url, window)
    print(f"     Airflow: all {FILES} published in {airflow[0]:.3f} s; {window:.0f} s of unchanged files: CPU "
          f"{100 * airflow[2]:.2f} % of a core, {airflow[3]:.2f} parses/s ({load_text(airflow[4])})", flush=True)
    loads = {"tock_load": tock[4], "airflow_load": airflow[4]}
    return [show(Comparison(f"parse {FILES} files x 10 tasks: processor start -> all published", "s",
                            tock[0], airflow[0], **loads)),
            show(Comparison("  same, first -> last DAG published (processor's own clock)", "s",
                            tock[1], airflow[1], **loads)),
            show(Comparison(f"  then {window:.0f} s of the files unchanged: processor + parsers CPU",
                            "% core", 100 * tock[2], 100 * airflow[2], **loads))]


WORKLOADS = ("w1w2", "parse")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_airflow")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                        help=f"any of {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--airflow-python", type=Path, metavar="PATH",
                        help="the python of Airflow's venv (default: what infra/scripts/airflow-venv.sh builds)")
    parser.add_argument("--window", type=float, default=WINDOW, metavar="SECONDS",
                        help=f"parse: the window of unchanged files whose CPU is measured (default {WINDOW:g})")
    options = parser.parse_args(argv)
    if set(options.workloads) - set(WORKLOADS):
        parser.error(f"known workloads: {', '.join(WORKLOADS)}")
    airflow_python = options.airflow_python or airflow_venv()
    work = infra_home() / "bench-airflow"  # Airflow's homes and service logs, kept until the next run
    shutil.rmtree(work, ignore_errors=True)
    admin_url = project_postgres()
    print(f"Tock beside Airflow {AIRFLOW_VERSION} (LocalExecutor, PostgreSQL {admin_url.rsplit('/', 1)[0]}), "
          f"{os.cpu_count()} cores; Airflow's homes and logs in {work}", flush=True)
    comparisons: list[Comparison] = []
    with tempfile.TemporaryDirectory(prefix="bench-airflow-") as folder:
        if not options.workloads or "w1w2" in options.workloads:
            comparisons += bench_w1_w2(Path(folder), airflow_python, work, admin_url)
        if not options.workloads or "parse" in options.workloads:
            comparisons += bench_parse(Path(folder), airflow_python, work, admin_url, options.window)
    saved = to_json(datetime.now(UTC).isoformat(timespec="seconds"), AIRFLOW_VERSION, comparisons,
                    [f"workloads: {', '.join(options.workloads or WORKLOADS)}",
                     f"W1/W2: Tock TOCK_PARALLELISM=64, 64 warm runners, 3 partitions; Airflow LocalExecutor, "
                     f"core.parallelism and max_active_tasks_per_dag {PARALLELISM}",
                     f"parse: {FILES} files x 10 tasks, window {options.window:g} s"])
    save(infra_home() / SAVED_NAME, saved)
    print("\n" + "\n".join(summary_lines(saved)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
