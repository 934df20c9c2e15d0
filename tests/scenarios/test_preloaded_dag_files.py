"""Preloaded DAG files (services/runner/file_launchers.py) through the real local launcher and broker: a file
launched from again is imported once, in a launcher of its own, and its tries find their task loaded; a
change to the file is run by the very next try; whatever goes wrong with a file's launcher (its import
raises, exits or hangs there; it is killed) costs the tries nothing.

Each DAG file here appends a line to a file beside it at every import: the importing process's pid and the
try it imports for (``-``: none, the file's launcher)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from infra.log import replay
from schemas import EVENTS, SecretAccessed, TaskFailed, TaskSucceeded
from tests.scenarios.scheduler_support import create_topics

pytestmark = pytest.mark.scenario

DAG_FILE = '''
import os, pathlib, sys, time
from tock import DAG, Variable, task

with open(pathlib.Path(__file__).with_suffix(".imports"), "a") as out:
    out.write(f"{{os.getpid()}} {{os.environ.get('TOCKRUN_RUN_ID', '-')}}\\n")
if "TOCKRUN_RUN_ID" not in os.environ:  # only in the file's launcher: what a test makes go wrong there
    {in_launcher}
VERSION = "{version}"
SECRET = Variable.get("preload_secret", default="unset")  # at import: read where the file is imported

with DAG("preloads") as dag:
    @task
    def says():
        print("the secret is", SECRET)
        return VERSION

    says()
'''


def write_dag(folder: Path, version: str = "one", in_launcher: str = "pass", name: str = "preloads") -> Path:
    path = folder / f"{name}.py"
    path.write_text(DAG_FILE.format(version=version, in_launcher=in_launcher))
    return path


def imports(dag_file: Path) -> list[tuple[int, str]]:
    """(pid, run id or "-") of each import of the file so far."""
    marks = dag_file.with_suffix(".imports")
    text = marks.read_text() if marks.exists() else ""
    return [(int(pid), run_id) for pid, run_id in (line.split() for line in text.splitlines())]


class Launches:
    """Batches of two tries of ``says`` (runs r1, r2, ...) through one real local launcher, each waited for."""

    def __init__(self, settings, dag_file: Path) -> None:
        from infra.executors import LocalExecutor
        from services.runner import local_launcher_command

        self.settings, self.dag_file, self.count = settings, dag_file, 0
        self.executor = LocalExecutor(settings, local_launcher_command())

    def batch(self) -> list[str]:
        """Launch two new tries, wait for their outcomes; the runs launched."""
        from services.runner import TryRequest

        runs = [f"r{self.count + 1}", f"r{self.count + 2}"]
        self.count += 2
        self.executor.launch_many([(TryRequest("preloads", run_id, "says", 1, str(self.dag_file)), "default")
                                   for run_id in runs])
        wait_for_outcomes(self.settings, runs)
        return runs

    def batches_until(self, condition, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"{what}: not after {timeout} s; imports {imports(self.dag_file)[-6:]}"
            self.batch()

    def close(self) -> None:
        self.executor.close()


def outcomes(settings) -> dict[str, TaskSucceeded | TaskFailed]:
    return {record.event.run_id: record.event for record in replay(settings, EVENTS)
            if isinstance(record.event, TaskSucceeded | TaskFailed)}


def wait_for_outcomes(settings, runs: list[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not set(runs) <= set(outcomes(settings)):
        assert time.monotonic() < deadline, f"no outcome of {runs} after {timeout} s"
        time.sleep(0.1)


def values(settings, runs: list[str]) -> list[str]:
    found = outcomes(settings)
    assert all(isinstance(found[run_id], TaskSucceeded) for run_id in runs), [found[run_id] for run_id in runs]
    return [found[run_id].values_json for run_id in runs]  # type: ignore[union-attr]


def ran_preloaded(launch: Launches) -> bool:
    """Whether a new batch runs without importing the file (launched here)."""
    count = len(imports(launch.dag_file))
    launch.batch()
    return len(imports(launch.dag_file)) == count


def secret_reads(settings) -> list[SecretAccessed]:
    return [record.event for record in replay(settings, EVENTS) if isinstance(record.event, SecretAccessed)
            and (record.event.kind, record.event.name, record.event.backend) == ("variable", "preload_secret", "env")]


def launcher_imports(dag_file: Path) -> list[int]:
    return [pid for pid, run_id in imports(dag_file) if run_id == "-"]


@pytest.fixture
def launches(make_settings, tmp_path, monkeypatch):
    monkeypatch.setenv("TOCK_VAR_PRELOAD_SECRET", "s3cr3t-value")  # the scheduler's, passed to its runners
    made: list[Launches] = []

    def start(dag_file: Path, **overrides) -> Launches:
        settings = make_settings(**{"task_heartbeat_seconds": 0.2, "warm_runners": 1, **overrides})
        create_topics(settings)
        made.append(Launches(settings, dag_file))
        return made[-1]

    yield start
    for each in made:
        each.close()


def test_a_file_launched_from_again_is_imported_once_and_a_change_runs_in_the_next_try(launches, tmp_path):
    dag_file = write_dag(tmp_path)
    launch = launches(dag_file)
    launch.batch()  # the first sighting: the tries import the file themselves
    assert sorted(run_id for _pid, run_id in imports(dag_file)) == ["r1", "r2"]
    # The next: the file gets a launcher of its own, which imports it; its tries go there once it is ready.
    launch.batches_until(lambda: launcher_imports(dag_file), "the file's launcher imported it")
    launch.batches_until(lambda: ran_preloaded(launch), "a batch ran without importing the file")
    for _ in range(6):  # and from then on every batch does
        count = len(imports(dag_file))
        runs = launch.batch()
        assert (len(imports(dag_file)), values(launch.settings, runs)) == (count, ['{"return_value":"one"}'] * 2)
    # What the file read at its import is each try's read too (audited), and masked in each try's log.
    assert {run_id for run_id in runs} <= {event.run_id for event in secret_reads(launch.settings)}
    log = launch.settings.home / "tries" / "preloads" / runs[0] / "says" / "1.log"
    assert log.read_text() == "the secret is ***\n"

    write_dag(tmp_path, version="two")  # the same size: only the bytes differ
    runs = launch.batch()
    assert values(launch.settings, runs) == ['{"return_value":"two"}'] * 2
    assert {run_id for _pid, run_id in imports(dag_file)} >= set(runs)  # they imported the new file themselves
    # and the new version is preloaded in turn
    launch.batches_until(lambda: len(launcher_imports(dag_file)) == 2, "the changed file preloaded")
    count = len(imports(dag_file))
    runs = launch.batch()
    assert (len(imports(dag_file)), values(launch.settings, runs)) == (count, ['{"return_value":"two"}'] * 2)


@pytest.mark.parametrize("in_launcher", [
    "raise ValueError('not here')", "os._exit(3)", "time.sleep(600)",
    "import threading; threading.Thread(target=time.sleep, args=(600,), daemon=True).start()"])
def test_a_file_whose_launcher_cannot_import_it_still_runs_its_tries(launches, tmp_path, in_launcher):
    dag_file = write_dag(tmp_path, in_launcher=in_launcher)
    launch = launches(dag_file, parse_timeout=2.0)
    launch.batches_until(lambda: launcher_imports(dag_file), "the file's launcher tried to import it")
    [launcher] = launcher_imports(dag_file)
    deadline = time.monotonic() + 30
    while process_runs(launcher):  # given up (a hung import once TOCK_DAG_PARSE_TIMEOUT has passed)
        assert time.monotonic() < deadline, f"launcher {launcher} still runs"
        launch.batch()
    runs = [run for _ in range(3) for run in launch.batch()]
    assert values(launch.settings, runs) == ['{"return_value":"one"}'] * 6
    assert launcher_imports(dag_file) == [launcher]  # that version of the file is not tried again
    assert {run_id for _pid, run_id in imports(dag_file)} >= set(runs)


def test_a_file_that_fails_everywhere_fails_each_try_with_its_error(launches, tmp_path):
    dag_file = tmp_path / "broken.py"
    dag_file.write_text("raise ValueError('this file is broken')\n")
    launch = launches(dag_file)
    runs = [run for _ in range(4) for run in launch.batch()]
    found = outcomes(launch.settings)
    assert {type(found[run_id]).__name__ for run_id in runs} == {"TaskFailed"}
    assert all(found[run_id].error == "ValueError: this file is broken" for run_id in runs)  # type: ignore[union-attr]


def test_a_killed_file_launcher_costs_its_next_tries_nothing(launches, tmp_path):
    dag_file = write_dag(tmp_path)
    launch = launches(dag_file)
    launch.batches_until(lambda: launcher_imports(dag_file), "the file's launcher imported it")
    launch.batch()
    [launcher] = launcher_imports(dag_file)
    os.kill(launcher, 9)
    runs = [run for _ in range(3) for run in launch.batch()]
    assert values(launch.settings, runs) == ['{"return_value":"one"}'] * 6
    launch.batches_until(lambda: len(launcher_imports(dag_file)) == 2, "a new launcher for the file")


def process_runs(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


CONFIG_DAG = '''
import json, os, pathlib
from tock import DAG, task

with open(pathlib.Path(__file__).with_suffix(".imports"), "a") as out:
    out.write(f"{os.getpid()} {os.environ.get('TOCKRUN_RUN_ID', '-')}\\n")
SETTING = json.loads(pathlib.Path(__file__).with_name("config.json").read_text())["value"]  # no module: no digest

with DAG("preloads") as dag:
    @task
    def says():
        return SETTING

    says()
'''


def test_what_a_file_reads_at_import_reaches_its_tries_within_the_reparse_interval(launches, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"value": "old"}')
    dag_file = tmp_path / "preloads.py"
    dag_file.write_text(CONFIG_DAG)
    launch = launches(dag_file, dag_reparse_interval=2.0)
    launch.batches_until(lambda: ran_preloaded(launch), "a batch ran without importing the file")
    assert values(launch.settings, [f"r{launch.count - 1}", f"r{launch.count}"]) == ['{"return_value":"old"}'] * 2
    config.write_text('{"value": "new"}')  # the file itself is unchanged: only a re-import sees this
    first = len(launcher_imports(dag_file))

    def new_value_preloaded() -> bool:
        runs = launch.batch()
        return values(launch.settings, runs) == ['{"return_value":"new"}'] * 2
    launch.batches_until(new_value_preloaded, "the new config reached the tries")
    assert len(launcher_imports(dag_file)) > first  # a successor imported the file again
    assert {run_id for _pid, run_id in imports(dag_file)}.isdisjoint({f"r{launch.count - 1}", f"r{launch.count}"})


def test_a_file_launcher_retired_for_another_file_ends_with_its_runners(launches, tmp_path):
    """TOCK_PRELOADED_DAG_FILES=1: the second file's launcher retires the first's, which then ends (no process
    forked by the warm launcher may hold its requests' pipe open), and the first file's tries run on."""
    first, second = write_dag(tmp_path, name="first"), write_dag(tmp_path, version="two", name="second")
    launch = launches(first, preloaded_dag_files=1, warm_runners=4)  # idle warm runners forked after its start
    launch.batches_until(lambda: ran_preloaded(launch), "the first file preloaded")
    [retired] = launcher_imports(first)
    launch.dag_file = second
    launch.batches_until(lambda: ran_preloaded(launch), "the second file preloaded")
    deadline = time.monotonic() + 30
    while process_runs(retired) or any(process_runs(pid) for pid in children_of(retired)):
        assert time.monotonic() < deadline, f"the retired launcher {retired} (or a runner of it) still runs"
        time.sleep(0.2)
    launch.dag_file = first
    runs = launch.batch()
    assert values(launch.settings, runs) == ['{"return_value":"one"}'] * 2


def children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(child) for child in children.read().split()]
    except FileNotFoundError:
        return []
