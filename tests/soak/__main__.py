"""``python -m tests.soak``: the chaos soak for SOAK_MINUTES (default 3), seeded by SOAK_SEED (default:
a fresh seed, printed), under SOAK_ROOT (default: a new folder in TOCK_HOME). Exit 1 on any violation."""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

from tests.soak.harness import run_soak


def main() -> int:
    minutes = float(os.environ.get("SOAK_MINUTES") or 3)
    seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(2**32))
    home = Path(os.environ.get("TOCK_HOME") or Path.home() / ".tock")
    root = Path(os.environ.get("SOAK_ROOT") or home / f"soak-{time.strftime('%Y%m%d-%H%M%S')}-{seed}")
    result = run_soak(minutes, seed, root, say=lambda line: print(line, flush=True))
    print(result.report(), flush=True)
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
