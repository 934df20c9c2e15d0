"""Give memory a burst freed back to the operating system.

A replay decodes millions of records on several threads; the objects die as they are folded, but glibc's
malloc keeps the freed pages (per-thread arenas) for later use, so a process's RSS stays at the burst's
peak: a scheduler that replayed 1,000,000 finished tries kept ~1 GiB of RSS for a state of a few MiB
(`bench_scheduler memory`). ``malloc_trim(0)`` returns the free pages; elsewhere than glibc it is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache
from typing import Any


@cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def release_freed_memory() -> bool:
    """Hand the allocator's free pages back to the OS; whether it could. (No gc.collect: a full collection
    on a scheduler's thread would pause the decision thread for nothing that refcounting did not free.)"""
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is None:
        return False
    trim(0)
    return True
