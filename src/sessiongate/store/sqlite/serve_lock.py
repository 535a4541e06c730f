"""One gateway per SQLite file.

A SQLite gateway serialises each key's turns in its own memory (store/locks.py) and keeps
each key's recent context there too: a second `sessiongate serve` on the same file would
interleave the two processes' turns on a key. Several gateways share a PostgreSQL
database instead (docs/operations.md, "Several gateways behind a load balancer").

`serve` therefore takes an advisory `flock` on `<database>.serve-lock` for as long as it
runs; a second `serve` on the file is refused at start-up with that advice. The lock goes
with the process, however it ends. Other commands (`users`, `backup`, `gc`, …) never take
it: they run beside the gateway as before.
"""

from __future__ import annotations

import fcntl
import os

from sessiongate.errors import ConfigError


class ServeLock:
    """The held lock; `release()` (or the process's end) gives it back."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock


def claim_serving(database_path: str) -> ServeLock | None:
    """Take the SQLite file's serve lock, or raise ConfigError when another gateway
    process serves the file. None for an in-memory database (nothing to share)."""
    if database_path == ":memory:":
        return None
    path = database_path + ".serve-lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(
            f"another gateway already serves the SQLite database {database_path}: one"
            " gateway per SQLite file. To run several gateways, move the data to PostgreSQL"
            " (`sessiongate migrate --to postgresql://…`) and give every gateway that"
            " database.url"
        ) from None
    return ServeLock(fd)
