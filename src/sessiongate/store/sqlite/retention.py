"""Retention queries over the SQLite store, and the run lock: an advisory `flock` on a
file beside the database (`<database>.gc-lock`), which excludes the gateway's scheduled
run and `sessiongate gc` run from another process alike."""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

from sessiongate.core.keys import KeyRef
from sessiongate.store.retention import IdleKey
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore


class SQLiteRetentionStore:
    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._memory_lock = False  # `:memory:` databases: one process, one flag

    async def idle_keys(self, cutoff: datetime, *, with_context: bool, limit: int) -> list[IdleKey]:
        sql = (
            "SELECT k.key, s.last_activity_at FROM session_keys k"
            " JOIN segments s ON s.session_id = k.latest_session_id"
            " WHERE s.last_activity_at < ?"
        )
        if with_context:
            sql += " AND (s.message_count > s.cleared_after_seq OR s.continues != '[]')"
        sql += " ORDER BY s.last_activity_at, k.key LIMIT ?"
        rows = self._store.connection.execute(sql, (to_micros(cutoff), limit)).fetchall()
        return [IdleKey(KeyRef.from_storage_id(r[0]), from_micros(r[1])) for r in rows]

    @asynccontextmanager
    async def exclusive_run(self) -> AsyncIterator[bool]:
        if self._store.path == ":memory:":
            if self._memory_lock:
                yield False
                return
            self._memory_lock = True
            try:
                yield True
            finally:
                self._memory_lock = False
            return
        fd = os.open(self._store.path + ".gc-lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
