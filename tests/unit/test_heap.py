"""infra/heap.py: a burst's freed memory goes back to the OS (glibc's malloc_trim)."""

from __future__ import annotations

from pathlib import Path

from infra.heap import release_freed_memory


def _rss_mib() -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) / 1024


def test_a_burst_freed_around_what_stays_is_given_back():
    """Blocks past pymalloc's size (so malloc's), one in 64 kept, as a replay's records around the state it
    keeps: freeing the rest leaves RSS at the peak (checked first), the trim takes it back down."""
    before = _rss_mib()
    burst = [bytes(1024) for _ in range(150_000)]  # ~150 MiB
    kept = burst[::64]
    peak = _rss_mib()
    del burst
    freed = _rss_mib()
    assert peak - before > 100 and peak - freed < 20, (before, peak, freed)  # free alone gives little back
    assert release_freed_memory() is True
    trimmed = _rss_mib()
    assert trimmed - before < (peak - before) / 3, (before, peak, freed, trimmed)
    assert len(kept) == 2344
