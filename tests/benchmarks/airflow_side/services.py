"""Airflow 3.3.2 as the bench runs it: a metadata database of its own in the project's PostgreSQL, a private
AIRFLOW_HOME, LocalExecutor, and its real services (`airflow api-server`, `airflow scheduler`,
`airflow dag-processor`) as processes on loopback; runs triggered through its REST API and read back from
its metadata database (dag_run, task_instance, dag), as Tock's are read from its log."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg

from tests.benchmarks.common import REPO
from tests.ports import free_port

# W1 runs 200 tasks at once on Tock with TOCK_PARALLELISM=64 (bench_scheduler): Airflow gets the same
# cap, over its defaults (core.parallelism 32, max_active_tasks_per_dag 16) that would cap it lower.
PARALLELISM = 64


def project_postgres() -> str:
    """Start (or find) the project's PostgreSQL; its libpq URL (postgresql://tock@127.0.0.1:PORT/tock)."""
    started = subprocess.run(["bash", "infra/scripts/postgres.sh", "start"], cwd=REPO, check=True,
                             capture_output=True, text=True)
    return started.stdout.strip().splitlines()[-1]


def fresh_database(admin_url: str, name: str) -> str:
    """Drop and create database ``name`` (the bench's own, never the project's); its libpq URL."""
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + f"/{name}"



@dataclass(frozen=True)
class AirflowSetup:
    """Where one Airflow installation of the bench lives and how its processes are configured."""

    python: Path
    home: Path
    dags_folder: Path
    database_url: str  # libpq form, for this process's reads; Airflow gets the psycopg2 dialect of it
    port: int
    jwt_secret: str

    @classmethod
    def create(cls, python: Path, home: Path, dags_folder: Path, database_url: str) -> AirflowSetup:
        home.mkdir(parents=True, exist_ok=True)
        return cls(python, home, dags_folder, database_url, free_port(), secrets.token_hex(32))

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The process environment of every Airflow command: nothing of Tock's, Airflow's venv first."""
        inherited = {key: value for key, value in os.environ.items()
                     if not key.startswith(("TOCK_", "AIRFLOW", "VIRTUAL_ENV", "PYTHON"))}
        path = f"{self.python.parent}{os.pathsep}{inherited.get('PATH', '')}"
        return {**inherited, "PATH": path, "AIRFLOW_HOME": str(self.home), **{
            f"AIRFLOW__{key}": value for key, value in {
                "DATABASE__SQL_ALCHEMY_CONN": self.database_url.replace("postgresql://", "postgresql+psycopg2://", 1),
                "CORE__EXECUTOR": "LocalExecutor",
                "CORE__DAGS_FOLDER": str(self.dags_folder),
                "CORE__LOAD_EXAMPLES": "False",
                "CORE__PARALLELISM": str(PARALLELISM),
                "CORE__MAX_ACTIVE_TASKS_PER_DAG": str(PARALLELISM),
                "CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
                "CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",  # the REST API without a login
                "API__HOST": "127.0.0.1",
                "API__PORT": str(self.port),
                "API_AUTH__JWT_SECRET": self.jwt_secret,
            }.items()}}

    def command(self, *arguments: str) -> list[str]:
        return [str(self.python.with_name("airflow")), *arguments]


def migrate(setup: AirflowSetup) -> None:
    """`airflow db migrate` on the fresh database; its output in the home's migrate.log."""
    with open(setup.home / "migrate.log", "wb") as output:
        subprocess.run(setup.command("db", "migrate"), env=setup.environment(), cwd=setup.home, stdout=output,
                       stderr=subprocess.STDOUT, check=True, timeout=600)


# Extra arguments per service: the scheduler's log server binds every interface (and a fixed port), and
# nothing here reads task logs through it (the api-server reads them from the shared AIRFLOW_HOME).
SERVICE_ARGUMENTS = {"scheduler": ("--skip-serve-logs",)}


class AirflowServices:
    """Airflow's services as processes, each the leader of a process group of its own (its workers, parsers
    and uvicorn go with it); every one is stopped by ``stop_all``, SIGTERM to its group, then SIGKILL."""

    def __init__(self, setup: AirflowSetup) -> None:
        self.setup = setup
        self.started: list[subprocess.Popen] = []

    def start(self, service: str) -> subprocess.Popen:
        with open(self.setup.home / f"{service}.log", "ab") as output:
            process = subprocess.Popen(self.setup.command(service, *SERVICE_ARGUMENTS.get(service, ())),
                                       env=self.setup.environment(), cwd=self.setup.home,
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append(process)
        return process

    def stop_all(self, grace: float = 60.0) -> None:
        for process in self.started:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.started:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process, signal.SIGKILL)  # what is left of the group (workers, parsers)
            process.wait()
        self.started.clear()


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


class AirflowApi:
    """The few calls of Airflow's REST API (/api/v2) the bench makes."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base_url}/api/v2{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read() or b"{}")

    def wait_for_dag(self, dag_id: str, timeout: float = 600.0) -> None:
        """Until the API answers and the DAG processor has stored ``dag_id``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.call("GET", f"/dags/{dag_id}")
                return
            except (urllib.error.URLError, ConnectionError) as error:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Airflow did not serve DAG {dag_id} within {timeout:g} s: {error}") from error
                time.sleep(0.5)

    def unpause(self, dag_id: str) -> None:
        self.call("PATCH", f"/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str) -> tuple[str, float]:
        """Trigger a manual run; its run id and the moment the API acknowledged it (the run is committed)."""
        run = self.call("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None})
        return run["dag_run_id"], time.time()


@dataclass(frozen=True)
class FinishedRun:
    state: str
    queued_at: datetime
    end_date: datetime


class AirflowDatabase:
    """Reads of Airflow's metadata database: a run's end, its task instances' times, parsed DAGs."""

    def __init__(self, url: str) -> None:
        self.connection = psycopg.connect(url, autocommit=True)

    def close(self) -> None:
        self.connection.close()

    def run_finished(self, dag_id: str, run_id: str, timeout: float) -> FinishedRun:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = self.connection.execute(
                "SELECT state, queued_at, end_date FROM dag_run WHERE dag_id = %s AND run_id = %s "
                "AND state IN ('success', 'failed') AND end_date IS NOT NULL", (dag_id, run_id)).fetchone()
            if row:
                return FinishedRun(*row)
            time.sleep(0.2)
        raise TimeoutError(f"Airflow run {run_id} of {dag_id} did not finish within {timeout:g} s")

    def task_times(self, dag_id: str, run_id: str) -> dict[str, tuple[float, float]]:
        """Each task instance's start_date and end_date (epoch seconds)."""
        rows = self.connection.execute(
            "SELECT task_id, start_date, end_date FROM task_instance WHERE dag_id = %s AND run_id = %s",
            (dag_id, run_id)).fetchall()
        return {task_id: (start.timestamp(), end.timestamp()) for task_id, start, end in rows}

    def parsed(self, prefix: str) -> dict[str, float]:
        """The DAGs whose ids start with ``prefix`` that are stored (serialized), with their last parse time."""
        rows = self.connection.execute(
            "SELECT d.dag_id, d.last_parsed_time FROM dag d WHERE d.dag_id LIKE %s AND d.last_parsed_time IS NOT NULL "
            "AND EXISTS (SELECT 1 FROM serialized_dag s WHERE s.dag_id = d.dag_id)", (prefix + "%",)).fetchall()
        return {dag_id: parsed_at.timestamp() for dag_id, parsed_at in rows}
