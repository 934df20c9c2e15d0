"""Every client of the log is a context manager that closes itself."""

from __future__ import annotations

from typing import Self


class Closing:
    """``with Client(...) as client:`` calls ``client.close()`` on the way out."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
