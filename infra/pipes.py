"""Lines over pipes between a runner and the process that hands it tries (the local launcher, a Celery
pool process)."""

from __future__ import annotations

import os


def read_line(descriptor: int) -> str:
    """One line without its newline, read byte by byte so nothing after it is consumed; "" when the
    other end closed before a whole line came."""
    line = b""
    while (byte := os.read(descriptor, 1)) not in (b"", b"\n"):
        line += byte
    return line.decode() if byte == b"\n" else ""
