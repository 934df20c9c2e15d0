"""Which partition a record goes to: the Java client's default partitioner on the partition key.

Every scheduling topic puts a record in ``murmur2(dag_id) % N`` whatever its record key,
so partition p of every topic concerns the same DAGs and any Kafka client (Java,
librdkafka's ``murmur2_random``) computes the same answer.
"""

from __future__ import annotations

from functools import lru_cache

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` as a signed 32-bit int (same bits as the Java result)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        # The Java switch falls through: byte 2, then 1, then 0, then one multiply.
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=65536)
def partition_for(partition_key: str, partitions: int) -> int:
    """The Java client's default partitioner: ``(murmur2(utf8) & 0x7fffffff) % partitions``."""
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    return (murmur2(partition_key.encode("utf-8")) & 0x7FFFFFFF) % partitions
