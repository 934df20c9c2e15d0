"""kombu's Redis transport, with a channel that says "connection lost" once its connection is closed.

Why: with celery/kombu 5.7, a worker that loses Redis while it holds a message (acks late) and
is waiting for the next one (a free pool slot, so a BRPOP is under way) dies of an
``AttributeError: 'NoneType' object has no attribute 'hostname'``. The consumer's
``on_connection_error_after_connected`` first ``collect()``s the connection, which detaches the
transport from it (``transport.client = None``) while the channel, caught inside its BRPOP, is
left open; then it closes the connection, the channel's ``close()`` drops its Redis pools and
restores the unacknowledged message, and building a new pool reads ``transport.client.hostname``.
An AttributeError is no connection error, so nothing on the way catches it: "Unrecoverable
error", and ``tock worker`` exits (kombu#970 and kombu#582 are the same fault on other paths;
the late ack of that message, once the try ends, meets it again).

Here such a channel raises Redis's own ConnectionError instead: kombu and Celery treat it as the
lost connection it is (the close goes on, the consumer reconnects, a late ack is logged as
"Couldn't ack"). Nothing is lost by not restoring at that moment: the message stays in Redis's
unacked index and comes back after the visibility timeout (infra/executors/celery.py), and the
claim refuses a second run of a try that started (services/runner/core/claim.py).

Selected by ``broker_transport`` (a class path, kombu's documented way to name a transport) for
``redis://`` URLs; nothing of kombu is patched.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

TRANSPORT = f"{__name__}:TockRedisTransport"


class DetachedConnection(RedisConnectionError):
    """A channel was asked for a Redis connection after its kombu connection was closed."""


class TockRedisChannel(kombu_redis.Channel):
    """A Redis channel that cannot connect again once its kombu connection is closed, and says so
    with a connection error."""

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise DetachedConnection("the connection to Redis was closed (lost); this channel cannot reconnect")
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
        return params


class TockRedisTransport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`TockRedisChannel`."""

    Channel = TockRedisChannel


def transport_for(broker_url: str) -> str | None:
    """The transport to name in ``broker_transport`` for this broker URL (None: kombu's choice)."""
    return TRANSPORT if broker_url.startswith("redis://") else None
