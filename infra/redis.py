"""The local Redis (the Celery broker), started through infra/scripts/redis.sh when the broker URL
points at this machine's default port."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from infra.settings import Settings

SCRIPT = Path(__file__).resolve().parent / "scripts" / "redis.sh"
LOCAL_HOSTS = ("127.0.0.1", "localhost")


class RedisError(RuntimeError):
    """The local Redis could not be started; the message says why."""


def is_local(settings: Settings) -> bool:
    return (urlsplit(settings.celery_broker_url).hostname or "") in LOCAL_HOSTS


def ensure_local_redis(settings: Settings) -> str:
    """Start the local Redis if it is not running (idempotent); returns its URL."""
    port = urlsplit(settings.celery_broker_url).port or 6379
    environment = {**os.environ, "TOCK_HOME": str(settings.home), "REDIS_PORT": str(port)}
    result = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, env=environment)
    if result.returncode != 0:
        raise RedisError(f"infra/scripts/redis.sh start failed: {result.stderr.strip()}")
    return result.stdout.strip().splitlines()[-1]
