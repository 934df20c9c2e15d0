"""`make bench`: run every tests/benchmarks/bench_*.py in turn, each in its own process; then the ratios of
the last `make bench-airflow` run, when there was one (bench_airflow runs only when named, as
`make bench-airflow` does: it builds Airflow's venv and runs it beside Tock)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.benchmarks.airflow_side.report import SAVED_NAME, read_saved, summary_lines
from tests.benchmarks.common import infra_home

HERE = Path(__file__).parent
ONLY_WHEN_NAMED = {"bench_airflow"}


def main(selected: list[str]) -> int:
    failures = 0
    for path in sorted(HERE.glob("bench_*.py")):
        if selected and not any(name in path.stem for name in selected):
            continue
        if path.stem in ONLY_WHEN_NAMED and not selected:
            continue
        print(f"\n== {path.stem} ==", flush=True)
        result = subprocess.run([sys.executable, "-m", f"tests.benchmarks.{path.stem}"], cwd=HERE.parents[1])
        if result.returncode != 0:
            print(f"  !! {path.stem} exited with {result.returncode}", flush=True)
            failures += 1
    print_last_airflow_comparison()
    return 1 if failures else 0


def print_last_airflow_comparison() -> None:
    saved = read_saved(infra_home() / SAVED_NAME)
    if saved is not None:
        print("\n== Tock / Airflow ==\n" + "\n".join(summary_lines(saved)), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
