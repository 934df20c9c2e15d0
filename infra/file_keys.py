"""What a file's stat says of its content, and when to trust it (git's "racily clean" rule).

A reader that caches what it made of a file (its hash) keyed by the file's stat re-reads it only when the
stat changes. Two writes of the same size within one tick of the file system's clock leave the same
stat, so a key taken within SETTLED_SECONDS of the file's last change is not trusted: such a file is read
again until its key has settled.
"""

from __future__ import annotations

import os
from typing import TypeAlias

StatKey: TypeAlias = tuple[int, int, int, int]
"""(mtime, ctime, size, inode), in nanoseconds where times."""

SETTLED_SECONDS = 2.0


def stat_key(stat: os.stat_result) -> StatKey:
    return stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino


def settled(key: StatKey, now: float) -> bool:
    """Whether the file last changed more than SETTLED_SECONDS before ``now`` (time.time()): what was read
    of it now is what is under this key for as long as the key stays the same."""
    limit = int((now - SETTLED_SECONDS) * 1e9)
    return key[0] < limit and key[1] < limit
