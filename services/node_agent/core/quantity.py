"""Kubernetes resource quantities (``64Mi``, ``1G``, ``1.5Gi``, ``128974848``, ``129e6``, ``500m``)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES: dict[str, int | Decimal] = {
    "": 1, "m": Decimal("0.001"),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|([a-zA-Z]*))$")


class QuantityError(ValueError):
    """A text that is not a Kubernetes quantity."""


def parse_quantity(text: str) -> Decimal:
    """The value of a quantity as an exact decimal."""
    match = _QUANTITY.match(text.strip())
    if not match or (match.group(3) or "") not in _SUFFIXES:
        raise QuantityError(f"not a Kubernetes quantity: {text!r}")
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number + (exponent or ""))
    except InvalidOperation:
        raise QuantityError(f"not a Kubernetes quantity: {text!r}") from None
    return value * _SUFFIXES[suffix or ""]


def memory_bytes(text: str) -> int:
    """A memory quantity in whole bytes (rounded up, as Kubernetes does)."""
    value = parse_quantity(text)
    whole = int(value)
    return whole + 1 if value > whole else whole
