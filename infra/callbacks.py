"""CallbackCaller: the one port the monitor calls a DAG's callbacks through.

A target is a webhook URL (http or https: infra/webhooks.py) or a ``module:function`` (or
``/path/dag_file.py:function``) path (infra/callables.py, in a subprocess); both give a Future of a
CallOutcome. An Airflow-style callback (``context``) is a callable, given a context, never a webhook.
"""

from __future__ import annotations

from concurrent.futures import Future

from infra.callables import CallableCaller
from infra.webhooks import WebhookCaller


def is_webhook(target: str) -> bool:
    return target.startswith(("http://", "https://"))


class CallbackCaller:
    """Routes each call to the webhook or the callable caller."""

    def __init__(self, *, callable_timeout: float) -> None:
        self.webhooks = WebhookCaller()
        self.callables = CallableCaller(timeout=callable_timeout)

    def call(self, target: str, payload: dict, *, context: bool = False) -> Future:
        if is_webhook(target):
            return self.webhooks.call(target, payload)
        return self.callables.call(target, payload, context=context)

    def close(self) -> None:
        self.webhooks.close()
        self.callables.close()
