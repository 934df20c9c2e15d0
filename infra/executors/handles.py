"""The handle of a try on each executor, as a pure function of what its runner knows: its request (the
try's key and the installation's prefix) and, on the local executor, its own process. The executors
name their launches with these, and a runner states its own in its TaskStarted, so a try whose launch
was never recorded (its scheduler killed between the launch and the commit of its TaskLaunched) still
has a handle a successor can probe and adopt.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid

from infra.executors.requests import TryRequest
from infra.procfs import process_start_time

_CELERY_NAMESPACE = uuid.UUID("6f1c3b52-7a0e-4c59-9b7e-2a4d7c0e9f11")


def local_handle(pid: int, hostname: str, start: int) -> str:
    """``pid@host:start``: a process of this host, by its pid and start time (pids are reused)."""
    return f"{int(pid)}@{hostname}:{int(start)}"


def celery_task_id(prefix: str, request: TryRequest) -> str:
    """The try's Celery task id: the same for every send of the same try."""
    return str(uuid.uuid5(_CELERY_NAMESPACE, "\x1f".join([prefix, *map(str, request.key)])))


def pod_name(prefix: str, request: TryRequest) -> str:
    """``tock-<dag>-<task>-<try>-<hash>``: readable, valid DNS-1123, at most 63 characters, and
    unique per try (the hash covers the prefix and the whole try key, run id included)."""
    digest = hashlib.sha1("\x1f".join([prefix, *map(str, request.key)]).encode()).hexdigest()[:10]
    tail = f"-{request.try_number}-{digest}"
    stem = _dns(f"{request.dag_id}-{request.task_id}")[:63 - len("tock-") - len(tail)].strip("-")
    return f"tock-{stem}{tail}" if stem else f"tock{tail}"


def _dns(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


def own_handle(executor: str, prefix: str, request: TryRequest, hostname: str) -> str:
    """The handle this process's try has on ``executor`` ("" for an executor this does not know)."""
    if executor == "local":
        return local_handle(os.getpid(), hostname, process_start_time(os.getpid()) or 0)
    if executor == "celery":
        return celery_task_id(prefix, request)
    if executor == "kubernetes":
        return pod_name(prefix, request)
    return ""
