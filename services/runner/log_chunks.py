"""Which chunks of a try's log file are shipped to ``tock.logs``: pure, no I/O.

Chunks hold whole lines (a line longer than a record is cut in pieces) and at most
``max_chunk`` bytes. A try ships at most ``limit`` bytes: past it one truncation marker
says how much was shipped and where the whole file is, and nothing more is shipped. The
try's end ships what is left (a last line without its newline too), marked final.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_CHUNK = 64 * 1024  # bytes of log text per record at most


@dataclass(frozen=True, slots=True)
class Chunk:
    offset: int  # byte offset in the try's log file where ``text`` starts
    text: str
    truncated: bool = False
    final: bool = False


@dataclass(frozen=True, slots=True)
class ShipState:
    """How far a try's log is shipped."""

    offset: int = 0  # file offset of ``pending``'s first byte: everything before it is shipped
    pending: bytes = b""  # read but not shipped yet (a line without its newline so far)
    shipped: int = 0  # bytes shipped, counted against the budget
    done: bool = False  # the final record or the truncation marker is out: nothing more ships


@dataclass(frozen=True, slots=True)
class Budget:
    limit: int  # bytes a try ships at most
    where: str  # host:path of the whole log file, named by the truncation marker
    max_chunk: int = MAX_CHUNK


def plan_chunks(state: ShipState, data: bytes, ended: bool, budget: Budget) -> tuple[ShipState, list[Chunk]]:
    """Ship the whole lines of ``state.pending + data`` (all of it once the try ``ended``)."""
    if state.done:
        return state, []
    buffer = state.pending + data
    cut = len(buffer) if ended else _whole_lines(buffer, budget.max_chunk)
    ready, rest = buffer[:cut], buffer[cut:]
    if state.shipped + len(ready) > budget.limit:
        return _truncated(state, ready, budget)
    chunks = pieces(ready, state.offset, budget.max_chunk)
    if ended:
        chunks = [*chunks[:-1], _final(chunks[-1])] if chunks else [Chunk(state.offset + cut, "", final=True)]
    return ShipState(state.offset + cut, rest, state.shipped + cut, ended), chunks


def pieces(data: bytes, offset: int, max_chunk: int) -> list[Chunk]:
    """``data`` in chunks of at most ``max_chunk`` bytes, cut after a newline where one is in reach."""
    chunks = []
    while data:
        piece = data[:max_chunk]
        if len(data) > max_chunk:
            piece = piece[:piece.rindex(b"\n") + 1] if b"\n" in piece else data[:utf8_boundary(data, max_chunk)]
        chunks.append(Chunk(offset, piece.decode("utf-8", "replace")))
        offset, data = offset + len(piece), data[len(piece):]
    return chunks


def truncation_marker(shipped: int, budget: Budget) -> str:
    return (f"[tock] log truncated: {shipped} bytes shipped to tock.logs, the limit is {budget.limit} "
            f"(TOCK_TASK_LOG_SHIP_LIMIT_BYTES); the whole log is at {budget.where}\n")


def _whole_lines(buffer: bytes, max_chunk: int) -> int:
    """Where the whole lines of ``buffer`` end; a line already longer than a record goes too."""
    cut = buffer.rfind(b"\n") + 1
    return utf8_boundary(buffer, len(buffer)) if len(buffer) - cut >= max_chunk else cut


def utf8_boundary(data: bytes, cut: int) -> int:
    """``cut``, moved back to the start of the UTF-8 character it would split (never to 0)."""
    for back in range(1, min(4, cut + 1)):
        byte = data[cut - back]
        if byte & 0xC0 != 0x80:  # the first byte of the character that holds data[cut - 1]
            length = 1 if byte < 0xC0 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return cut if back >= length or back == cut else cut - back
    return cut


def _truncated(state: ShipState, ready: bytes, budget: Budget) -> tuple[ShipState, list[Chunk]]:
    fits = ready[:budget.limit - state.shipped]
    fits = fits[:fits.rfind(b"\n") + 1]  # whole lines only
    shipped = state.shipped + len(fits)
    marker = Chunk(state.offset + len(fits), truncation_marker(shipped, budget), truncated=True)
    return (ShipState(state.offset + len(fits), b"", shipped, True),
            [*pieces(fits, state.offset, budget.max_chunk), marker])


def _final(chunk: Chunk) -> Chunk:
    return Chunk(chunk.offset, chunk.text, chunk.truncated, final=True)
