"""The SQLite database and its WAL files are readable by their owner only, whatever the
umask (store/private_files.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sessiongate.core.keys import KeyRef
from sessiongate.store.sqlite.store import SQLiteStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # files 0644 and directories 0755 unless we say otherwise
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("permissive_umask")
async def test_a_new_database_and_its_wal_are_owner_only(tmp_path: Path) -> None:
    db = tmp_path / "fresh" / "data" / "sessiongate.db"
    store = SQLiteStore.open(db)
    try:
        now = datetime(2026, 1, 1, tzinfo=UTC)
        await store.create_key(
            KeyRef("alice", "chat:alice"), "01890000-0000-7000-8000-00000000000a", now
        )
        wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
        assert (mode(db), mode(wal), mode(shm)) == (0o600, 0o600, 0o600)
        assert mode(db.parent) == 0o700
    finally:
        await store.close()


@pytest.mark.usefixtures("permissive_umask")
async def test_an_existing_readable_database_is_narrowed_and_its_directory_left_alone(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    db = shared / "sessiongate.db"
    await SQLiteStore.open(db).close()
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            path.chmod(0o644)
    store = SQLiteStore.open(db)
    try:
        assert mode(db) == 0o600
        assert mode(shared) == 0o755  # the operator's directory, maybe their home
    finally:
        await store.close()
