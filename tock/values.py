"""Task values as they travel in the log: JSON, with the Python types Airflow serializes tagged.

A try's values (its return value, what it pushed) are one JSON object, key -> encoded value, in its
TaskSucceeded (``values_json``). Plain JSON (str, int, float, bool, None, lists, dicts with str
keys) is written as is; datetimes, dates, times, timedeltas, tuples, sets, frozensets, Decimals,
bytes, non-finite floats, dataclasses and dicts with other keys are written as
``{"__tock__": TAG, "value": ...}`` and read back as the same type (a dataclass whose class cannot be
imported where it is read comes back as a dict of its fields). Anything else is refused with the
type's name, so a try fails saying what it returned rather than passing something lossy on.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import importlib
import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

TAG = "__tock__"
RETURN_VALUE = "return_value"  # Airflow's key for a task's return value


class ValueNotSerializable(TypeError):
    """A value cannot be passed on through the log; the message names the type and where it is."""


class ValueTooLarge(ValueError):
    """A try's values, encoded, are larger than the limit (TOCK_XCOM_MAX_BYTES)."""


def encode_values(values: dict[str, Any], limit: int) -> str:
    """The JSON text of a try's values (key -> value); "" when there are none.

    Raises ValueNotSerializable naming the key and the type, or ValueTooLarge naming the size."""
    if not values:
        return ""
    encoded = {key: _encode(value, f"value {key!r}") for key, value in values.items()}
    text = json.dumps(encoded, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    size = len(text.encode())
    if size > limit:
        sizes = ", ".join(f"{key!r}: {len(json.dumps(item).encode()):,} bytes" for key, item in encoded.items())
        raise ValueTooLarge(f"its values are {size:,} bytes encoded, more than the {limit:,} allowed "
                            f"(TOCK_XCOM_MAX_BYTES): {sizes}")
    return text


def decode_values(text: str) -> dict[str, Any]:
    """A try's values from their JSON text ("" -> none)."""
    if not text:
        return {}
    return {key: _decode(value) for key, value in json.loads(text).items()}


def encode_value(value: Any, where: str) -> str:
    """The JSON text of one value, encoded as a try's values are (a literal a mapped task expands over)."""
    return json.dumps(_encode(value, where), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def decode_value(text: str) -> Any:
    """One value from the JSON text ``encode_value`` wrote."""
    return _decode(json.loads(text))


def _encode(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _tagged("float", repr(value))
    if isinstance(value, list):
        return [_encode(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, dict):
        return _encode_dict(value, where)
    encoder = _encoder_of(value)
    if encoder is None:
        raise ValueNotSerializable(f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which "
                                   "cannot be passed through the log (JSON values, datetimes, dates, timedeltas, "
                                   "tuples, sets, Decimals, bytes and dataclasses can)")
    tag, encode = encoder
    return _tagged(tag, encode(value, where))


def _encode_dict(value: dict[Any, Any], where: str) -> Any:
    if all(isinstance(key, str) for key in value) and TAG not in value:
        return {key: _encode(item, f"{where}[{key!r}]") for key, item in value.items()}
    return _tagged("dict", [[_encode(key, f"a key of {where}"), _encode(item, f"{where}[{key!r}]")]
                            for key, item in value.items()])


def _tagged(tag: str, value: Any) -> dict[str, Any]:
    return {TAG: tag, "value": value}


def _items(value: Any, where: str) -> list[Any]:
    return [_encode(item, f"an item of {where}") for item in value]


def _dataclass(value: Any, where: str) -> dict[str, Any]:
    cls = type(value)
    fields = {item.name: _encode(getattr(value, item.name), f"{where}.{item.name}")
              for item in dataclasses.fields(value)}
    return {"class": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}


Encoder = tuple[str, Callable[[Any, str], Any]]


def _encoder_of(value: Any) -> Encoder | None:
    # datetime before date: a datetime is a date.
    if isinstance(value, dt.datetime):
        return "datetime", lambda moment, _where: moment.isoformat()
    if isinstance(value, dt.date):
        return "date", lambda day, _where: day.isoformat()
    if isinstance(value, dt.time):
        return "time", lambda moment, _where: moment.isoformat()
    if isinstance(value, dt.timedelta):
        return "timedelta", lambda delta, _where: [delta.days, delta.seconds, delta.microseconds]  # exact
    if isinstance(value, tuple):
        return "tuple", _items
    if isinstance(value, frozenset):
        return "frozenset", _items
    if isinstance(value, set):
        return "set", _items
    if isinstance(value, Decimal):
        return "decimal", lambda number, _where: str(number)
    if isinstance(value, bytes):
        return "bytes", lambda data, _where: base64.b64encode(data).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "dataclass", _dataclass
    return None


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(TAG)
    if tag is None:
        return {key: _decode(item) for key, item in value.items()}
    return _DECODERS[tag](value["value"])


def _decoded_dataclass(body: dict[str, Any]) -> Any:
    fields = {name: _decode(item) for name, item in body["fields"].items()}
    module, _, qualname = body["class"].partition(":")
    try:
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        return cls(**fields)
    except Exception:  # noqa: BLE001 - a class not importable here: its fields still reach the reader
        return fields


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda parts: dt.timedelta(*parts),
    "tuple": lambda items: tuple(_decode(item) for item in items),
    "set": lambda items: {_decode(item) for item in items},
    "frozenset": lambda items: frozenset(_decode(item) for item in items),
    "decimal": Decimal,
    "bytes": lambda text: base64.b64decode(text),
    "float": float,
    "dict": lambda pairs: {_decode(key): _decode(item) for key, item in pairs},
    "dataclass": _decoded_dataclass,
}
