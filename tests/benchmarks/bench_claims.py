"""A runner's claim read in a burst of queued tries (issue 26): the CPU one claim costs when 10,000 tries
of one DAG were queued at once, reading from where its try was queued by time (queued_at - 1 s, decoding
the DAG's TaskQueued until its own) against from its TaskQueued's offset (handed over by the scheduler:
decoding only its own), on the real broker.

The burst: N TaskQueued of one DAG appended at once, then one TaskStarted for each sampled try (its
runner's claim). Each sampled try is claimed by a fresh ClaimReader (a runner's), both ways, alternating;
the figure is the claim's CPU (this process: the reader's decoding and librdkafka's threads), median and
spread over the samples, with the load average beside it.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from infra.log import partition_for
from infra.topics import topic_name
from schemas import EVENTS, TaskQueued, TaskStarted, encode
from services.runner.claim_reader import ClaimReader
from tests.benchmarks.common import bench_settings, figure, spread
from tests.benchmarks.w3_takeover import load

DAG = "fan_out"
SAMPLES = 12


def main(queued: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tock-bench-claims-") as tmp:
        settings = bench_settings(Path(tmp))
        burst_at = time.time()
        sampled = [round(index * (queued - 1) / (SAMPLES - 1)) for index in range(SAMPLES)]
        offsets = _burst(settings, queued, burst_at, sampled)
        by_time, by_offset = [], []
        for index in sampled:
            key = (DAG, "r1", f"t{index}", 1)
            by_time.append(_claim_cpu(settings, key, {key: burst_at}, {}))
            by_offset.append(_claim_cpu(settings, key, {key: burst_at}, {key: offsets[index]}))
        figure(f"claim CPU, {queued:,} tries queued, read by time (median)", statistics.median(by_time) * 1000, "ms")
        print(f"    ({spread([seconds * 1000 for seconds in by_time])} ms)")
        figure(f"claim CPU, {queued:,} tries queued, from its offset (median)", statistics.median(by_offset) * 1000,
               "ms")
        print(f"    ({spread([seconds * 1000 for seconds in by_offset])} ms)")
        print(f"  ({SAMPLES} tries spread over the burst, each claimed both ways by a fresh reader; {load()})")


def _burst(settings, queued: int, at: float, sampled: list[int]) -> list[int]:
    """N TaskQueued of one DAG, then a TaskStarted of each sampled try; the offset of each TaskQueued."""
    producer = Producer({"bootstrap.servers": settings.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    topic, partition = topic_name(settings.topic_prefix, EVENTS), partition_for(DAG, settings.partitions)
    offsets: dict[int, int] = {}
    for index in range(queued):
        event = TaskQueued(dag_id=DAG, run_id="r1", task_id=f"t{index}", try_number=1, executor="local",
                           queue="default", scheduler_id="s1", params_json='{"a": 1, "b": "two"}',
                           conf_json='{"who": "bench"}', at=at)
        producer.produce(topic, encode(event), DAG, partition, on_delivery=lambda error, message, index=index:
                         offsets.__setitem__(index, message.offset()))
        producer.poll(0)
    for index in sampled:
        started = TaskStarted(dag_id=DAG, run_id="r1", task_id=f"t{index}", try_number=1, runner_id="me",
                              hostname="h", pid=1, at=time.time())
        producer.produce(topic, encode(started), DAG, partition)
    assert producer.flush(60) == 0, "the burst was not appended"
    return [offsets[index] for index in range(queued)]


def _claim_cpu(settings, key, queued_at, offsets) -> float:
    with ClaimReader(settings) as reader:
        reader.warm()
        before = time.process_time()
        claims = reader.claim({key: "me"}, queued_at, queued_offsets=offsets)
        spent = time.process_time() - before
    assert claims.won == {key}, claims
    return spent


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
