"""A try's child starts warm: forked from a runner that imported, as the warm launcher does, everything a
no-op try imports, and with the heap it inherited frozen out of its garbage collections. And the launcher's
warm-up, which builds the codec a runner uses before any runner is forked, holds to the declarations.

Each is otherwise a cost paid in every child (bench_scheduler W1): a module imported per try (the secrets
store's cryptography alone ~4 ms of CPU), and a collection that walks every inherited object and writes its
header, copying the runner's memory page by page (half of W1's CPU). Real forked children, in a fresh
interpreter that imports only what the launcher imports (the test process has imported far more); no broker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services.runner.warm_up import warm_up_runner

REPO = Path(__file__).resolve().parents[2]

# Run as ``python -c``: the DAG's tasks read BEFORE and TRACKED from this __main__, which their child inherits.
DRIVER = '''
import gc, json, sys
import services.runner, tock  # what the warm launcher imports before it forks (services/runner/launcher.py)
from infra.executors.requests import TryRequest
from infra.secrets import secrets_backends
from infra.settings import load_settings
from infra.task_environment import TaskEnvironment
from services.runner.child import ChildSetup
from services.runner.supervise import supervise_all

home, dag_file, log_path, task_id = sys.argv[1:5]
settings = load_settings({"TOCK_HOME": home})
setup = ChildSetup(TaskEnvironment.of(settings),
                   secrets=lambda environ, writer: secrets_backends(settings, environ, writer=writer))
outcomes = []
BEFORE, TRACKED = frozenset(sys.modules), len(gc.get_objects())
supervise_all([(TryRequest("warm", "r1", task_id, 1, dag_file), log_path)], 10.0, lambda _running: None,
              lambda _request, outcome: outcomes.append(outcome), setup=setup)
print(json.dumps({"succeeded": outcomes[0].succeeded, "error": outcomes[0].error,
                  "values": outcomes[0].values_json}))
'''

DAG_FILE = '''
import gc, sys
import __main__
from tock import DAG, task

with DAG("warm") as dag:
    @task
    def imports():
        """The modules this try imported that its runner had not (its own DAG file's module aside)."""
        return sorted(name for name in set(sys.modules) - __main__.BEFORE if not name.startswith("tock_dagfile_"))

    @task(templates_dict={"day": "{{ ds }}"})
    def templated(templates_dict=None):
        return sorted(name for name in set(sys.modules) - __main__.BEFORE if not name.startswith("tock_dagfile_"))

    @task
    def frozen():
        return [gc.get_freeze_count(), __main__.TRACKED]

    imports(); templated(); frozen()
'''


def run_in_fresh_runner(tmp_path: Path, task_id: str):
    """Run one try of the DAG above from a fresh interpreter that imported what the launcher imports; the
    value it returned."""
    dag_file = tmp_path / "warm.py"
    dag_file.write_text(DAG_FILE)
    done = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "home"), str(dag_file),
                           str(tmp_path / f"{task_id}.log"), task_id],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome["succeeded"], (outcome["error"], (tmp_path / f"{task_id}.log").read_text())
    return json.loads(outcome["values"])["return_value"]


@pytest.mark.parametrize("task_id", ["imports", "templated"])
def test_a_try_imports_no_module_its_runner_has_not(tmp_path, task_id):
    assert run_in_fresh_runner(tmp_path, task_id) == [], (
        "a try's child imported these itself: import them where the runner imports its child "
        "(services/runner/child.py), so every child inherits them")


def test_a_try_never_collects_the_heap_it_inherited(tmp_path):
    frozen, tracked = run_in_fresh_runner(tmp_path, "frozen")
    assert frozen >= tracked  # everything the runner held at the fork, out of the child's collections


def test_the_launchers_warm_up_encodes_and_decodes_what_a_runner_does():
    warm_up_runner()  # raises if a sample event no longer fits its declaration: the launcher would not start
