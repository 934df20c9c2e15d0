"""The Fernet key of Tock's store of variables and connections, and encryption with it.

The key is ``TOCK_FERNET_KEY``, else the one in ``<home>/fernet.key`` (``tock standalone`` writes it
the first time: :func:`ensure_key_file`). Every process that reads or writes tock.secrets needs the
same key; production sets the setting on every host.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from infra.settings import Settings

KEY_FILE = "fernet.key"


class FernetKeyMissing(RuntimeError):
    """Neither TOCK_FERNET_KEY nor <home>/fernet.key; the message says what to do."""


class NotDecrypted(RuntimeError):
    """A value of tock.secrets that this key does not decrypt (written with another key)."""


def key_path(settings: Settings) -> Path:
    return settings.home / KEY_FILE


def fernet_of(settings: Settings) -> Fernet:
    """The Fernet of ``settings``: its key setting, else the home's key file."""
    if settings.fernet_key:
        return _fernet(settings.fernet_key, "TOCK_FERNET_KEY")
    path = key_path(settings)
    try:
        return _fernet(path.read_text().strip(), str(path))
    except FileNotFoundError:
        raise FernetKeyMissing(f"no Fernet key: set TOCK_FERNET_KEY (e.g. to the output of `python -c "
                               f"\"from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())\"`) "
                               f"or let `tock standalone` write {path}") from None


def _fernet(key: str, origin: str) -> Fernet:
    try:
        return Fernet(key.encode())
    except ValueError as error:
        raise FernetKeyMissing(f"the Fernet key of {origin} is not valid ({error}): it must be 32 bytes in "
                               "url-safe base64") from None


def ensure_key_file(settings: Settings) -> Path | None:
    """Write a new key to ``<home>/fernet.key`` (mode 0600) unless the setting or the file has one;
    returns the path when it wrote it."""
    path = key_path(settings)
    if settings.fernet_key or path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(Fernet.generate_key().decode() + "\n")
    return path


def encrypt(fernet: Fernet, text: str) -> str:
    return fernet.encrypt(text.encode()).decode()


def decrypt(fernet: Fernet, token: str, what: str) -> str:
    try:
        return fernet.decrypt(token.encode()).decode()
    except InvalidToken:
        raise NotDecrypted(f"{what} in tock.secrets does not decrypt with this Fernet key (TOCK_FERNET_KEY or "
                           "<home>/fernet.key): it was written with another key") from None
