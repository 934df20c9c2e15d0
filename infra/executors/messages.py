"""TryMessage: what an executor hands the runner of one try, declared once for every executor.

On the wire it is one JSON object, ``{"try": {<TryRequest's fields>}, "executor": ..., "queue": ...}``:
- the local executor writes one per line to its warm launcher's stdin (services/runner/launcher.py);
- the Celery executor sends one as its task's only argument (services/worker/tasks.py), and the
  worker's pool process passes it on, one per line, to its resident runner (services/worker/resident.py);
- a pod's runner gets the same fields as ``tock run-task`` arguments (infra/executors/kubernetes.py).

Messages written before this type existed are read as they were: a Celery message had no
``"executor"`` (its reader names the executor it serves), and a missing ``"queue"`` is ``""``.
"""

from __future__ import annotations

import json
import types
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, get_args, get_type_hints

from infra.executors.requests import TryRequest


class BadTryMessage(ValueError):
    """A try message that cannot be read: the error names what is wrong with it."""


@dataclass(frozen=True, slots=True)
class TryMessage:
    """One try to run, the executor that launched it and the queue it was queued on."""

    request: TryRequest
    executor: str
    queue: str = ""

    def to_dict(self) -> dict[str, Any]:
        fields = asdict(self.request)
        for name in ("map_index", "queued_offset"):  # at -1, left out: what a runner of an earlier release reads
            if fields[name] < 0:
                del fields[name]
        return {"try": fields, "executor": self.executor, "queue": self.queue}

    def to_json(self) -> str:
        """One line of JSON (no newline in it)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes, executor: str | None = None) -> TryMessage:
        """Read a message; ``executor``: the one to assume when the message names none (a Celery message
        from before this type existed). Raises BadTryMessage naming what is wrong."""
        try:
            payload = json.loads(text)
        except ValueError as error:
            raise BadTryMessage(f"a try message is not JSON ({error}): {_excerpt(text)}") from None
        return cls.from_dict(payload, executor)

    @classmethod
    def from_dict(cls, payload: Any, executor: str | None = None) -> TryMessage:
        """The same as :meth:`from_json`, from the decoded object (a Celery task's argument)."""
        if not isinstance(payload, dict):
            raise BadTryMessage(f"a try message is a JSON object, not {type(payload).__name__}: {_excerpt(payload)}")
        named = payload.get("executor", executor)
        if not isinstance(named, str) or not named:
            raise BadTryMessage(f"a try message names no executor (its \"executor\" is {named!r})")
        queue = payload.get("queue", "")
        if not isinstance(queue, str):
            raise BadTryMessage(f"a try message's \"queue\" is a string, not {queue!r}")
        return cls(_request(payload.get("try")), named, queue)


def _request(fields_given: Any) -> TryRequest:
    if not isinstance(fields_given, dict):
        raise BadTryMessage(f"a try message's \"try\" is an object of {', '.join(_ALL)}, not {fields_given!r}")
    unknown = sorted(set(fields_given) - set(_ALL))
    missing = [name for name in _REQUIRED if name not in fields_given]
    if unknown or missing:
        wrong = [f"unknown fields {', '.join(unknown)}"] * bool(unknown) + [f"no {', '.join(missing)}"] * bool(missing)
        raise BadTryMessage(f"a try message's \"try\" has {' and '.join(wrong)} (a try has {', '.join(_ALL)})")
    for name, value in fields_given.items():
        if not _fits(value, _KINDS[name]):
            expected = " or ".join("null" if kind is types.NoneType else kind.__name__ for kind in _KINDS[name])
            raise BadTryMessage(f"a try message's \"try\".{name} is {value!r}, not {expected}")
    return TryRequest(**fields_given)


def _accepted(hint: Any) -> tuple[type, ...]:
    """The JSON value types a field of this annotation takes (an int where a float goes)."""
    kinds = get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return (*kinds, int) if float in kinds else tuple(kinds)


def _fits(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


_KINDS = {name: _accepted(hint) for name, hint in get_type_hints(TryRequest).items()}
_ALL = tuple(field.name for field in fields(TryRequest))
_REQUIRED = tuple(field.name for field in fields(TryRequest)
                  if field.default is MISSING and field.default_factory is MISSING)
