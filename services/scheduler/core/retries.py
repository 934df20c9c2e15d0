"""How long a failed try waits before its retry: the task's ``retry_delay``, or with
``retry_exponential_backoff`` Airflow's exponential backoff.

Airflow's formula: the try's base is ``retry_delay * 2 ** (try_number - 1)`` whole seconds (rounded
up, at least 1); a jitter from 0 to the base (less one second) is added, derived from a hash of the
try's identity; the sum is at most a day, and at most ``max_retry_delay`` when the task sets one. Its
hash reads the try's logical date; Tock's reads the run id (which holds it, and names manual runs
apart), so the delay is a function of what the log holds: a replay or a takeover waits the same. The
decision is written anyway (TaskRetryScheduled's ``delay`` and ``not_before``).
"""

from __future__ import annotations

import hashlib
import math

from schemas import TaskDefinition

MOST_BACKOFF = 24 * 60 * 60  # Airflow's MAX_RETRY_DELAY: a backed-off delay never exceeds a day
_MOST_DOUBLINGS = 1_000  # 2.0 ** 1000 is still a float: past it the base is over a day anyway


def retry_delay(task: TaskDefinition, dag_id: str, run_id: str, try_number: int) -> float:
    """Seconds after try ``try_number`` ended before the next may be queued."""
    if not task.retry_exponential_backoff:
        return task.retry_delay
    delay = min(_base(task.retry_delay, try_number), MOST_BACKOFF)
    delay = min(delay + _jitter(f"{dag_id}#{task.task_id}#{run_id}#{try_number}", delay), MOST_BACKOFF)
    return float(min(delay, task.max_retry_delay) if task.max_retry_delay else delay)


def _base(retry_delay: float, try_number: int) -> int:
    scaled = retry_delay * 2.0 ** min(max(try_number - 1, 0), _MOST_DOUBLINGS)
    return max(math.ceil(scaled), 1) if math.isfinite(scaled) and scaled < MOST_BACKOFF else MOST_BACKOFF


def _jitter(identity: str, base: int) -> int:
    """From 0 to ``base - 1`` whole seconds, the same for the same try everywhere."""
    digest = int(hashlib.sha1(identity.encode(), usedforsecurity=False).hexdigest(), 16)
    return digest % base
