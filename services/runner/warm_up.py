"""Make each runner cheaper: build once in the warm launcher, before any fork, what every runner builds on
first use and would otherwise build again in each.

That is the codec's Avro writers and readers (schemas/codec.py caches them per process) of the events a
runner writes (its claim, heartbeats, outcomes, log lines) and reads in its claim (TaskQueued, rivals'
TaskStarted, kill requests and deaths): ~4 ms of CPU per runner, and a W2 hop is one runner. Only fixed
sample events are encoded and decoded here; nothing is sent.
"""

from __future__ import annotations

from infra.registry import attach
from infra.settings import Settings
from infra.topics import topic_name
from schemas import (
    Event,
    TaskDeclaredDead,
    TaskFailed,
    TaskHeartbeat,
    TaskKillRequested,
    TaskLogShipped,
    TaskQueued,
    TaskStarted,
    TaskSucceeded,
    decode,
    encode,
)
from schemas.codec import encode_record

_TRY = {"dag_id": "tock_warm_up", "run_id": "warm_up", "task_id": "warm_up", "try_number": 1}


def warm_up_runner(settings: Settings | None = None) -> None:
    """Encode and decode one of each event a runner writes or reads (raises if the codec cannot), in both
    frames; with ``settings``, first point the codec at their schema registry and learn the ids passed down
    (each runner would otherwise build every topic's union to check them)."""
    if settings is not None:
        attach(settings)
    for event in _samples():
        decode(encode(event))
        if settings is not None:
            decode(encode_record(event, topic_name(settings.topic_prefix, event.TOPIC),
                                    wire=settings.schema_registry_url is not None))


def _samples() -> list[Event]:
    return [
        TaskQueued(**_TRY, executor="local", queue="default", scheduler_id="warm_up", at=0.0),
        TaskStarted(**_TRY, runner_id="warm_up", hostname="warm_up", pid=0, at=0.0),
        TaskKillRequested(**_TRY, reason="warm_up", scheduler_id="warm_up", at=0.0),
        TaskDeclaredDead(**_TRY, reason="warm_up", scheduler_id="warm_up", at=0.0),
        TaskHeartbeat(**_TRY, runner_id="warm_up", at=0.0),
        TaskSucceeded(**_TRY, runner_id="warm_up", at=0.0),
        TaskFailed(**_TRY, runner_id="warm_up", error="warm_up", at=0.0),
        TaskLogShipped(**_TRY, runner_id="warm_up", offset=0, text="", at=0.0),
    ]
