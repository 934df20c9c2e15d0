"""W1 and W2 (bench_scheduler.py) on a three-broker cluster, beside the same on one broker.

Both brokers are private and alike (own home, free ports, same heap), started here, so the two
differ only in the node count: topics 3 replicas / min.insync.replicas 2 against 1 / 1, acks=all
waiting for two replicas, transactions whose state log is replicated three times. The session's
shared broker (other tenants, another heap) is left alone.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.bench_scheduler import bench_w1_w2, load
from tests.scenarios.cluster_support import start_private_cluster

HEAP = "384M"


def bench_on(nodes: int, tmp: Path) -> None:
    print(f"\n  -- W1/W2 on {nodes} broker(s) ({load()} before start)", flush=True)
    started = time.monotonic()
    broker = start_private_cluster(tmp / f"broker-{nodes}", nodes=nodes, heap=HEAP)
    print(f"     {nodes}-node broker ready in {time.monotonic() - started:.1f} s at {broker.address}", flush=True)
    try:
        bench_w1_w2(tmp / f"w1w2-{nodes}", bootstrap=broker.address)
    finally:
        broker.stop()
    print(f"     ({load()} after)", flush=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        for nodes in (1, 3):
            (Path(folder) / f"w1w2-{nodes}").mkdir()
            bench_on(nodes, Path(folder))


if __name__ == "__main__":
    main()
    sys.exit(0)
