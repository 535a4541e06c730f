"""Memory items in the SQLite database (store/memory.py): FTS5 (bm25) over the items'
text, vectors as float32 BLOBs. Shares the session store's connection and transactions.

A user keeps at most `[limits] max_memory_items_per_user` valid items (a thousand by
default), so a keyword query runs inline: it scores only the matches of one user's few
items, well under a millisecond."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from sessiongate.core.memory import MemoryItem
from sessiongate.core.notes import Vectors
from sessiongate.store.base import Row
from sessiongate.store.memory import (
    CHAIN_SQL,
    ITEM_COLUMNS,
    TOMBSTONE_COLUMNS,
    MemoryChanged,
    MemoryLimitReached,
    Tombstone,
    forgotten,
    item_from_row,
    item_values,
    source_columns,
    tombstone_from_row,
)
from sessiongate.store.notes import ChunkVectors, vector_bytes, vectors_from
from sessiongate.store.sqlite.notes import fts_match
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore

_INSERT = f"INSERT INTO memory_items ({ITEM_COLUMNS}) VALUES ({', '.join('?' * 13)})"


class SQLiteMemoryStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def add_item(
        self,
        item: MemoryItem,
        vector: Vectors | None,
        embedder: str | None,
        *,
        max_items: int | None = None,
        supersedes: MemoryItem | None = None,
        tombstone: Tombstone | None = None,
    ) -> None:
        # BEGIN IMMEDIATE: the count below and the insert see no other writer between them.
        with self._store.transaction() as db:
            if supersedes is not None:
                changed = db.execute(
                    "UPDATE memory_items SET invalid_at = ?, superseded_by = ?"
                    " WHERE owner = ? AND memory_id = ? AND invalid_at IS NULL",
                    (
                        _micros(supersedes.invalid_at),
                        supersedes.superseded_by,
                        supersedes.user,
                        supersedes.memory_id,
                    ),
                ).rowcount
                if changed != 1:
                    raise MemoryChanged()
            elif max_items is not None:
                _check_count(db, item.user, 1, max_items)
            _insert(db, item, vector, embedder)
            if tombstone is not None:
                _bury(db, item.user, tombstone, item.created_at)

    async def import_items(
        self,
        owner: str,
        items: Sequence[MemoryItem],
        vectors: Vectors | None,
        embedder: str | None,
        *,
        max_items: int | None,
    ) -> None:
        with self._store.transaction() as db:
            if max_items is not None:
                _check_count(db, owner, sum(1 for i in items if i.valid), max_items)
            for index, item in enumerate(items):
                _insert(db, item, None if vectors is None else vectors[index], embedder)

    async def get_item(self, owner: str, memory_id: str) -> MemoryItem | None:
        row = self._conn.execute(
            f"SELECT {ITEM_COLUMNS} FROM memory_items WHERE owner = ? AND memory_id = ?",
            (owner, memory_id),
        ).fetchone()
        return None if row is None else _item(row)

    async def list_items(
        self,
        owner: str,
        *,
        include_invalid: bool,
        scope: str | None,
        limit: int,
        before: str | None,
    ) -> list[MemoryItem]:
        where = ["owner = ?"]
        args: list[Any] = [owner]
        if not include_invalid:
            where.append("invalid_at IS NULL")
        if scope is not None:
            where.append("scope = ?")
            args.append(scope)
        if before is not None:
            where.append("memory_id < ?")
            args.append(before)
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS} FROM memory_items WHERE {' AND '.join(where)}"
            " ORDER BY memory_id DESC LIMIT ?",
            (*args, limit),
        ).fetchall()
        return [_item(r) for r in rows]

    async def valid_items(self, owner: str, *, pinned_only: bool = False) -> list[MemoryItem]:
        pinned = " AND pinned = 1" if pinned_only else ""
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS} FROM memory_items WHERE owner = ? AND invalid_at IS NULL"
            f"{pinned} ORDER BY memory_id",
            (owner,),
        ).fetchall()
        return [_item(r) for r in rows]

    async def update_item(
        self, owner: str, memory_id: str, *, pinned: bool, scope: str, edited_at: datetime
    ) -> bool:
        with self._store.transaction() as db:
            changed = db.execute(
                "UPDATE memory_items SET pinned = ?, scope = ?, edited_at = ?"
                " WHERE owner = ? AND memory_id = ?",
                (int(pinned), scope, to_micros(edited_at), owner, memory_id),
            ).rowcount
        return changed == 1

    async def invalidate_item(
        self, owner: str, memory_id: str, invalid_at: datetime
    ) -> MemoryItem | None:
        with self._store.transaction() as db:
            row = db.execute(
                f"SELECT {ITEM_COLUMNS} FROM memory_items"
                " WHERE owner = ? AND memory_id = ? AND invalid_at IS NULL",
                (owner, memory_id),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE memory_items SET invalid_at = ? WHERE owner = ? AND memory_id = ?",
                (to_micros(invalid_at), owner, memory_id),
            )
        return _item(row)

    async def forget_item(self, owner: str, memory_id: str, now: datetime) -> list[MemoryItem]:
        with self._store.transaction() as db:
            chain = [
                int(r[0])
                for r in db.execute(
                    CHAIN_SQL.format(owner="?1", memory_id="?2"), (owner, memory_id)
                ).fetchall()
            ]
            if not chain:
                return []
            placeholders = ",".join("?" for _ in chain)
            rows = {
                int(r[0]): _item(r[1:])
                for r in db.execute(
                    f"SELECT id, {ITEM_COLUMNS} FROM memory_items WHERE id IN ({placeholders})",
                    chain,
                ).fetchall()
            }
            # Vectors first and explicitly, whatever the connection's foreign keys.
            db.execute(f"DELETE FROM memory_vectors WHERE item_id IN ({placeholders})", chain)
            db.execute(f"DELETE FROM memory_items WHERE id IN ({placeholders})", chain)
            items = [rows[i] for i in chain]
            for item in items:
                _bury(db, owner, forgotten(item), now)
        return items

    async def tombstones(self, owner: str, text_hash: str) -> list[Tombstone]:
        rows = self._conn.execute(
            f"SELECT {TOMBSTONE_COLUMNS} FROM memory_tombstones"
            " WHERE owner = ? AND text_hash = ? ORDER BY id",
            (owner, text_hash),
        ).fetchall()
        return [tombstone_from_row(r) for r in rows]

    async def keyword_items(self, owner: str, words: Sequence[str], limit: int) -> list[int]:
        if not words:
            return []
        rows = self._conn.execute(
            "SELECT m.id FROM memory_items_fts f JOIN memory_items m ON m.id = f.rowid"
            " WHERE memory_items_fts MATCH ? AND m.owner = ? AND m.invalid_at IS NULL"
            " ORDER BY bm25(memory_items_fts), m.id LIMIT ?",
            (fts_match(words), owner, limit),
        ).fetchall()
        return [int(r[0]) for r in rows]

    async def item_vectors(self, owner: str, embedder: str, dimensions: int) -> ChunkVectors:
        rows = self._conn.execute(
            "SELECT v.item_id, v.embedding FROM memory_vectors v"
            " JOIN memory_items m ON m.id = v.item_id"
            " WHERE v.owner = ? AND v.embedder = ? AND length(v.embedding) = ?"
            " AND m.invalid_at IS NULL ORDER BY v.item_id",
            (owner, embedder, 4 * dimensions),
        ).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ChunkVectors(ids, vectors_from([r[1] for r in rows], dimensions))

    async def items_by_row(self, owner: str, row_ids: Sequence[int]) -> dict[int, MemoryItem]:
        if not row_ids:
            return {}
        placeholders = ",".join("?" for _ in row_ids)
        rows = self._conn.execute(
            f"SELECT id, {ITEM_COLUMNS} FROM memory_items"
            f" WHERE id IN ({placeholders}) AND owner = ?",
            (*row_ids, owner),
        ).fetchall()
        return {int(r[0]): _item(r[1:]) for r in rows}


def _check_count(db: sqlite3.Connection, owner: str, adding: int, max_items: int) -> None:
    (kept,) = db.execute(
        "SELECT count(*) FROM memory_items WHERE owner = ? AND invalid_at IS NULL", (owner,)
    ).fetchone()
    if kept + adding > max_items:
        raise MemoryLimitReached(max_items)


def _insert(
    db: sqlite3.Connection, item: MemoryItem, vector: Vectors | None, embedder: str | None
) -> None:
    cursor = db.execute(_INSERT, item_values(item, to_micros))
    if vector is not None and embedder is not None:
        db.execute(
            "INSERT INTO memory_vectors (item_id, owner, embedder, embedding) VALUES (?, ?, ?, ?)",
            (cursor.lastrowid, item.user, embedder, vector_bytes(vector)),
        )


def _bury(db: sqlite3.Connection, owner: str, tombstone: Tombstone, now: datetime) -> None:
    key, _, message_ids = source_columns(tombstone.source)
    db.execute(
        "INSERT INTO memory_tombstones"
        " (owner, text_hash, source_key, source_message_ids, reason, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (owner, tombstone.text_hash, key, message_ids, tombstone.reason, to_micros(now)),
    )


def _micros(value: datetime | None) -> int | None:
    return None if value is None else to_micros(value)


def _item(row: Row) -> MemoryItem:
    return item_from_row(row, from_micros)
