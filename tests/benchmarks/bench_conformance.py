"""Conformance with Airflow 3.3.2 (issue 25): the figure. Every conformance DAG ported with `tock port`
and run by `tock dags test`'s path (the scheduler's core deciding, each try's task code in this process;
the same DAGs through the real scheduler, runners and projections are tests/scenarios/test_conformance.py),
compared with what Airflow 3.3.2 did (tests/conformance/recorded.json): DAGs, task instances and values
compared, equal, documented differences, and the seconds it took. `tock dags test` runs one DAG and writes
nothing to the log: a case that waits on another DAG's run (cases.BEFORE) and the runs' effects (asset
events, triggered runs) are compared by the scenario only, and this says how many it left to it."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import figure
from tests.benchmarks.w3_takeover import load
from tests.conformance.cases import BEFORE, CASES, DAGS, DIFFERENCES, LOGICAL_DATE, RECORDED
from tests.conformance.tock_side import compared, ported_file, run_here


def main() -> None:
    recorded = json.loads(RECORDED.read_text())["runs"]
    cases = {dag_id: conf for dag_id, conf in CASES.items() if dag_id not in BEFORE}
    started = time.perf_counter()
    differences: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="tock-conformance-") as folder:
        ported = {source: ported_file(source, Path(folder)) for source in sorted(DAGS.glob("*.py"))}
        for dag_id, conf in cases.items():
            [path] = [path for source, path in ported.items() if f'"{dag_id}"' in source.read_text()]
            ours = run_here(path, dag_id, LOGICAL_DATE, conf)
            differences += [(dag_id, name, what) for name, what, *_ in compared(recorded[dag_id], ours, False)]
    seconds = time.perf_counter() - started
    runs = [recorded[dag_id] for dag_id in cases]
    instances = sum(len(run["tasks"]) for run in runs)
    values = sum(1 for run in runs for task in run["tasks"].values() if task["values"])
    documented = [item for item in differences if item in DIFFERENCES]
    figure("conformance DAGs compared", len(cases), "DAGs")
    print(f"  (of {len(CASES)} cases: {len(BEFORE)} waiting on another DAG's run, and the asset events or "
          f"triggered runs of {sum(1 for run in recorded.values() if set(run) - {'state', 'tasks'})}, are compared "
          "by tests/scenarios/test_conformance.py only)")
    figure("task instances compared (state, try, values)", instances, "instances")
    figure("task instances that passed values", values, "instances")
    figure("equal to Airflow 3.3.2", instances - len({item[:2] for item in differences}), "instances")
    figure("documented differences", len(documented), "differences")
    figure("unexplained differences", len(differences) - len(documented), "differences", "0")
    figure("port + run of every case", seconds, "s")
    print(f"  (tock dags test's path, in one process; {load()})")


if __name__ == "__main__":
    main()
