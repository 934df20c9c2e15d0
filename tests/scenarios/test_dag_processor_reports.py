"""A DAG file that writes to its parser's result pipe (a pickle that would run code, garbage,
more than the size limit, half a report and then nothing) costs that file one parse error:
the manager never unpickles, never reads past the limit, keeps its deadline, stays healthy.
And a task on an executor this installation does not run is a parse error."""

from __future__ import annotations

import signal

import pytest

from schemas import DagParseFailed
from services.dag_processor.report import MAX_REPORT
from tests.scenarios.dag_processor_support import (
    NO_REPARSE,
    ProcessorProcess,
    check_one_parse,
    dags_published,
    good_dag_source,
    outcomes,
    parsing_events,
    still_serves_good_files,
    stop_cleanly,
    wait_for,
    write_file,
)

pytestmark = pytest.mark.scenario

HANG_TIMEOUT = 3

FIND_PIPE = """\
import os, struct

def result_pipe():
    # The parser child keeps one descriptor besides stdio: the pipe to the manager.
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                return int(name)
        except OSError:
            pass
    raise RuntimeError("no result pipe")
"""


def smuggles_a_pickle(marker) -> str:
    return FIND_PIPE + f"""
import pickle

class RunsInTheManager:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))

payload = pickle.dumps(RunsInTheManager())
os.write(result_pipe(), struct.pack(">Q", len(payload)) + payload)
os._exit(0)
"""


def garbage_before_its_report(_marker) -> str:
    return FIND_PIPE + """
os.write(result_pipe(), struct.pack(">Q", 12) + b"\\xff garbage \\x00")
""" + good_dag_source("garbage")


def writes_past_the_limit(_marker) -> str:
    megabytes = (MAX_REPORT >> 20) + 1
    return FIND_PIPE + f"""
fd, chunk = result_pipe(), b"x" * (1 << 20)
os.write(fd, struct.pack(">Q", {megabytes} << 20))
for _ in range({megabytes}):
    os.write(fd, chunk)
"""


def half_a_report_then_hangs(_marker) -> str:
    return FIND_PIPE + """
import time
os.write(result_pipe(), struct.pack(">Q", 100) + b"{" * 10)
time.sleep(600)
"""


def names_an_executor_not_run_here(_marker) -> str:
    return ("from tock import DAG, BashTask\nwith DAG('on_celery', schedule='@hourly'):\n"
            "    BashTask('spark', 'echo', executor='celery')\n")


BAD_REPORTS = {
    # name: (source, text in the parse error)
    "smuggles_a_pickle": (smuggles_a_pickle, "malformed (not JSON"),
    "garbage_before_its_report": (garbage_before_its_report, "the parser's report is malformed"),
    "writes_past_the_limit": (writes_past_the_limit, f"more than {MAX_REPORT:,} bytes of report, over the limit"),
    "half_a_report_then_hangs": (half_a_report_then_hangs, f"longer than {HANG_TIMEOUT} s"),
    "names_an_executor_not_run_here": (names_an_executor_not_run_here,
                                       "task 'spark' of DAG 'on_celery' names executor 'celery', which this "
                                       "installation does not run (available: local"),
}


@pytest.mark.parametrize("name", sorted(BAD_REPORTS))
def test_a_file_tampering_with_its_report_costs_one_parse_error_and_the_manager_stays_healthy(
        kafka_settings, make_settings, tmp_path, name):
    folder = tmp_path / "dags"
    folder.mkdir()
    write_file(folder, "good_a.py", good_dag_source("good_a"))
    marker = tmp_path / "code-ran-in-the-manager"
    make_source, error_text = BAD_REPORTS[name]
    bad = write_file(folder, f"{name}.py", make_source(marker))
    timeout = HANG_TIMEOUT if "hangs" in name else 30
    settings = make_settings(dags_folder=folder, dag_scan_interval=0.1, parse_timeout=timeout, executors="local",
                             **NO_REPARSE)
    processor = ProcessorProcess(settings, tmp_path / "processor.log")
    try:
        wait_for(dags_published(settings, "good_a"), 30, "the good DAG")
        wait_for(lambda: outcomes(parsing_events(settings), bad), 30, f"the outcome of {name}.py")
        _end, outcome = check_one_parse(parsing_events(settings), bad)
        assert isinstance(outcome, DagParseFailed) and error_text in outcome.error, outcome.error
        assert not marker.exists(), "a DAG file ran code inside the manager"
        still_serves_good_files(settings, folder)
        stop_cleanly(processor)
    finally:
        processor.stop(signal.SIGKILL)


def test_a_10000_task_dag_is_published_whole_though_its_record_is_over_a_megabyte(make_settings, tmp_path):
    """A definition bigger than the broker's 1 MB default record (tock.dags takes up to 16 MiB): the
    10,000-task fan-out of bench_big_dags, which the processor refused before."""
    from schemas import encode
    from tests.scenarios.scheduler_support import create_topics

    folder = tmp_path / "dags"
    folder.mkdir()
    write_file(folder, "wide.py", "from tock import DAG, task\n\ndef noop():\n    pass\n\n"
                                  "with DAG('wide') as dag:\n    root = task(noop, task_id='root')()\n"
                                  "    for index in range(10_000):\n"
                                  "        root >> task(noop, task_id=f'leaf_{index:05d}')()\n")
    settings = make_settings(dags_folder=folder, dag_scan_interval=0.1, executors="local", **NO_REPARSE)
    create_topics(settings)
    processor = ProcessorProcess(settings, tmp_path / "processor.log")
    try:
        latest = wait_for(dags_published(settings, "wide"), 60, "the 10,000-task DAG")
        parsed = latest["wide"]
        assert len(parsed.definition.tasks) == 10_001 and len(encode(parsed)) > 1_048_576
        stop_cleanly(processor)
    finally:
        processor.stop(signal.SIGKILL)
