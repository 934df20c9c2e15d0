"""What the operator commands share: request ids, dates, checks against the tables, appending with retries.

A command is checked against the projection tables first (an unknown DAG, run or task exits 1
with a message; bad input exits 2), then appended to ``tock.events``. A delivery failure is
retried with the same request id, so the scheduler applies the command once however many
copies reach the log.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from tock_cli import settings_of

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from infra.settings import Settings

# sqlalchemy, confluent_kafka and the API's checks are imported where they are used: `tock scheduler`
# imports this module for its options and should not pay for them.

REQUESTED_BY = "cli"
ATTEMPTS = 3
ACK_TIMEOUT = 5.0  # seconds the broker gets to acknowledge one attempt


def _request_id(value: str | None) -> str:
    from services.api.targets import check_request_id

    if value is None:
        return uuid.uuid4().hex
    try:
        return check_request_id(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


REQUEST_ID_OPTION = typer.Option(
    None, "--request-id", callback=_request_id,
    help="The command's request id (default: a new one). Run the command again with the same id after a "
         "failure and the scheduler still applies it once.")
YES_OPTION = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")


def date_option(flag: str, help_text: str, *, required: bool = False) -> Any:
    """An option taking an ISO 8601 date or date-time; a bad one exits 2 with the reason."""
    return typer.Option(... if required else None, flag, parser=_parse_instant, metavar="DATE",
                        help=f"{help_text} ISO 8601: 2024-01-31, 2024-01-31T06:00 or 2024-01-31T06:00:00+02:00 "
                             "(UTC unless an offset is given).")


def _parse_instant(text: str) -> float:
    from services.api.targets import parse_instant

    return parse_instant(text)


def derived_request_id(base: str, *names: str) -> str:
    """The request id of one of several commands asked at once: stable, so repeating the whole
    command with the same --request-id appends the same ids again."""
    digest = hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]
    return f"{base[:100]}.{digest}"


@contextmanager
def tables(ctx: typer.Context, command: str) -> Iterator[Engine]:
    """The projection tables, with refusals (unknown or impossible targets) as exit 1."""
    from sqlalchemy.exc import SQLAlchemyError

    from projections.db import create_tables, open_engine
    from services.api.targets import Refused

    engine = open_engine(settings_of(ctx))
    try:
        create_tables(engine)
        yield engine
    except Refused as refused:
        fail(command, refused.reason)
    except SQLAlchemyError as error:
        fail(command, f"cannot read the projections database: {error.__class__.__name__}: {error}")
    finally:
        engine.dispose()


def fail(command: str, message: str, code: int = 1) -> None:
    typer.echo(f"tock {command}: {message}", err=True)
    raise typer.Exit(code)


def append_commands(settings: Settings, events: Sequence[Any], command: str, *,
                    sleep: Callable[[float], None] = time.sleep) -> None:
    """Append ``events`` and wait for the broker's acknowledgement, retrying a failed delivery up to
    ATTEMPTS times with the same events (so the same request ids); exit 1 if every attempt fails."""
    from confluent_kafka import KafkaException

    from infra.log import DeliveryFailed

    for attempt in range(1, ATTEMPTS + 1):
        try:
            _append_once(settings, events)
            return
        except (DeliveryFailed, KafkaException) as error:
            if attempt == ATTEMPTS:
                ids = sorted({getattr(event, "request_id", "") for event in events} - {""})
                again = f"; run it again with --request-id {ids[0]} (it is applied once)" if len(ids) == 1 else ""
                fail(command, f"the log did not acknowledge the command after {ATTEMPTS} attempts: {error} "
                              f"(is the broker at {settings.bootstrap} up, and were the topics created with "
                              f"`tock topics create`?){again}")
            typer.echo(f"tock {command}: the log did not acknowledge the command ({error}); retrying with the "
                       f"same request id ({attempt + 1}/{ATTEMPTS})", err=True)
            sleep(attempt)


def _append_once(settings: Settings, events: Sequence[Any]) -> None:
    from infra.log import KafkaEventLog

    config = {"message.timeout.ms": int(ACK_TIMEOUT * 1000)}
    with KafkaEventLog(settings, client_id="tock-cli", config=config) as event_log:
        for event in events:
            event_log.append(event)
        event_log.flush(ACK_TIMEOUT + 5)


ENDED_RUN_STATES = ("success", "failed")
TABLE_CHECK_SECONDS = 2.0  # how often a wait also asks the dag_run table


def wait_for_run(settings: Settings, dag_id: str, run_id: str, start: int, timeout: float | None = None) -> str | None:
    """The state a run ends in, or None when ``timeout`` seconds passed first. Reads the DAG's partition of
    tock.events from ``start`` (the end offset before the trigger was appended) for its DagRunFinished, and
    the dag_run table every TABLE_CHECK_SECONDS: a trigger repeated with a used request id names a run that
    may have ended before ``start``, which the log after it will never mention again."""
    from infra.log import EventReader, partition_for
    from schemas import EVENTS, DagRunFinished

    deadline = None if timeout is None else time.monotonic() + timeout
    next_check = time.monotonic()
    with EventReader(settings, [], client_id="tock-trigger-wait") as reader:
        reader.assign([(EVENTS, partition_for(dag_id, settings.partitions), start)])
        while deadline is None or time.monotonic() < deadline:
            if time.monotonic() >= next_check:
                if (state := ended_run_state(settings, dag_id, run_id)) is not None:
                    return state
                next_check = time.monotonic() + TABLE_CHECK_SECONDS
            for record in reader.poll(0.5):
                event = record.event
                if isinstance(event, DagRunFinished) and (event.dag_id, event.run_id) == (dag_id, run_id):
                    return event.state
    return None


def ended_run_state(settings: Settings, dag_id: str, run_id: str) -> str | None:
    """The run's state if the dag_run table shows it ended; None when it does not (or cannot be read:
    then the log alone answers)."""
    from sqlalchemy.exc import SQLAlchemyError

    from projections import queries
    from projections.db import open_engine

    engine = open_engine(settings)
    try:
        run = queries.run(engine, dag_id, run_id)
    except SQLAlchemyError:
        return None
    finally:
        engine.dispose()
    if run is None or run["end_date"] is None or run["state"] not in ENDED_RUN_STATES:
        return None
    return run["state"]


def show_request(request_id: str) -> str:
    return f"request id {request_id} (see `tock commands show {request_id}`)"
