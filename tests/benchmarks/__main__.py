"""`make bench`: run every tests/benchmarks/bench_*.py in turn, each in its own process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main(selected: list[str]) -> int:
    failures = 0
    for path in sorted(HERE.glob("bench_*.py")):
        if selected and not any(name in path.stem for name in selected):
            continue
        print(f"\n== {path.stem} ==", flush=True)
        result = subprocess.run([sys.executable, "-m", f"tests.benchmarks.{path.stem}"], cwd=HERE.parents[1])
        if result.returncode != 0:
            print(f"  !! {path.stem} exited with {result.returncode}", flush=True)
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
