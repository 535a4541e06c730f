"""The SQLite files hold every conversation: only the user the gateway runs as may read
them, whatever the umask.

A missing data directory is created owner-only (0700). An existing directory is left as
the operator made it (it may be a home directory), but the database file is created 0600
before SQLite opens it, and an existing one (with its `-wal` and `-shm`) is narrowed to
0600. SQLite gives the `-wal` and `-shm` files it creates later the database file's own
permissions.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

OWNER_ONLY_FILE = 0o600
OWNER_ONLY_DIRECTORY = 0o700
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def prepare_private_database(path: Path) -> None:
    """Make `path`'s directory if needed and leave `path` (and its companions) 0600."""
    directory = path.parent
    if not directory.exists():
        directory.mkdir(mode=OWNER_ONLY_DIRECTORY, parents=True, exist_ok=True)
        directory.chmod(OWNER_ONLY_DIRECTORY)  # mkdir's mode is filtered by the umask
    # O_EXCL-free create: an existing file is kept, a new one never exists group-readable.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, OWNER_ONLY_FILE)
    os.close(fd)
    for candidate in (path, *(Path(f"{path}{suffix}") for suffix in SQLITE_COMPANIONS)):
        try:
            mode = stat.S_IMODE(candidate.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            candidate.chmod(mode & 0o700 or OWNER_ONLY_FILE)
