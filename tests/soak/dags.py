"""The soak's DAG folder, and the marker files its user code leaves.

Every task's user code first writes one marker file (a fresh name per start) holding
``dag run task try pid at``: two files for one try mean its user code ran twice. Tasks sleep a
little so faults land on running tries; some fail their first try and succeed on the retry; one
DAG is late on purpose (its deadline is shorter than its tasks), so every run of it owes exactly
one DeadlineMissed.
"""

from __future__ import annotations

from pathlib import Path

from tests.soak.checks import Marker

# Python user code: the marker, then the task's work.
PYTHON_PRELUDE = '''
import os
import pathlib
import time
import uuid

from tock import DAG, BashTask, task

MARKS = pathlib.Path({marks!r})


def mark():
    """Write this start of the try's user code down; returns the try number."""
    env = os.environ
    fields = [env["TOCKRUN_DAG_ID"], env["TOCKRUN_RUN_ID"], env["TOCKRUN_TASK_ID"], env["TOCKRUN_TRY_NUMBER"]]
    (MARKS / uuid.uuid4().hex).write_text(" ".join(fields + [str(os.getpid()), repr(time.time())]) + "\\n")
    return int(env["TOCKRUN_TRY_NUMBER"])


def work(seconds, fail_first_try=False):
    number = mark()
    time.sleep(seconds)
    if fail_first_try and number == 1:
        raise RuntimeError("failing the first try on purpose")
'''


def bash(marks: Path, seconds: float, fail_first_try: bool = False) -> str:
    """A bash command writing the marker, sleeping, and failing its first try if asked."""
    line = (f'echo "$TOCKRUN_DAG_ID $TOCKRUN_RUN_ID $TOCKRUN_TASK_ID $TOCKRUN_TRY_NUMBER $$ $(date +%s.%N)" '
            f'> {marks}/$(cat /proc/sys/kernel/random/uuid | tr -d -); sleep {seconds}')
    return line + ('; [ "$TOCKRUN_TRY_NUMBER" -gt 1 ]' if fail_first_try else "")


DAGS = {
    "soak_local": '''
with DAG("soak_local", retries=3, retry_delay=1) as dag:
    @task
    def extract():
        work(2)

    @task
    def flaky():
        work(1, fail_first_try=True)

    @task
    def load():
        work(1)

    transform = BashTask("transform", {transform!r})
    first = extract()
    first >> [transform, flaky()] >> load()
''',
    "soak_celery": '''
with DAG("soak_celery", retries=3, retry_delay=1) as dag:
    wash = BashTask("wash", {wash!r}, executor="celery")
    dry = BashTask("dry", {dry!r}, executor="celery")

    @task(executor="celery")
    def fold():
        work(1)

    wash >> dry >> fold()
''',
    "soak_kube": '''
with DAG("soak_kube", retries=3, retry_delay=1) as dag:
    @task(executor="kubernetes")
    def score():
        work(3)

    @task(executor="kubernetes")
    def flaky_pod():
        work(1, fail_first_try=True)

    report = BashTask("report", {report!r}, executor="kubernetes")
    score() >> flaky_pod() >> report
''',
    # Late on purpose: deadline 4 s, tasks worth 6 s or more.
    "soak_late": '''
with DAG("soak_late", retries=3, retry_delay=1, deadline=4) as dag:
    @task
    def slow():
        work(3)

    on_celery = BashTask("on_celery", {on_celery!r}, executor="celery")

    @task(executor="kubernetes")
    def in_pod():
        work(1)

    slow() >> on_celery >> in_pod()
''',
}

LATE_DAG = "soak_late"


def write_dags(folder: Path, marks: Path) -> list[str]:
    """Write the soak's DAG files into ``folder``; returns the DAG ids."""
    folder.mkdir(parents=True, exist_ok=True)
    marks.mkdir(parents=True, exist_ok=True)
    commands = {"transform": bash(marks, 2), "wash": bash(marks, 2), "dry": bash(marks, 1, fail_first_try=True),
                "report": bash(marks, 1), "on_celery": bash(marks, 2)}
    for dag_id, body in DAGS.items():
        (folder / f"{dag_id}.py").write_text(PYTHON_PRELUDE.format(marks=str(marks)) + body.format(**commands))
    return sorted(DAGS)


def read_markers(marks: Path) -> list[Marker]:
    """Every marker the user code left (a file being written as this reads is read whole or skipped:
    read after every runner has stopped)."""
    found = []
    for path in sorted(marks.iterdir()):
        fields = path.read_text().split()
        if len(fields) == 6:
            dag_id, run_id, task_id, try_number, pid, at = fields
            found.append(Marker(dag_id, run_id, task_id, int(try_number), int(pid), float(at)))
    return found
