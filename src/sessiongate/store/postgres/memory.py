"""Memory items in the PostgreSQL database (store/memory.py): a generated tsvector (GIN,
ts_rank) over the items' text, vectors as float32 BYTEA. The same answers as
SQLiteMemoryStore; shares the session store's pool."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

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
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection

_INSERT = (
    f"INSERT INTO memory_items ({ITEM_COLUMNS})"
    f" VALUES ({', '.join(f'${n}' for n in range(1, 14))}) RETURNING id"
)

# Each word its own plainto_tsquery (no operators: user text is never tsquery syntax),
# OR-ed, as SQLite's FTS5 query does (store/postgres/notes.py's rule).
_KEYWORD_SQL = """
SELECT m.id
FROM (
    SELECT string_agg('(' || t::text || ')', ' | ')::tsquery AS query
    FROM unnest($2::text[]) AS w, plainto_tsquery('english', w) AS t
    WHERE numnode(t) > 0
) q
JOIN memory_items m ON m.document @@ q.query
WHERE m.owner = $1 AND m.invalid_at IS NULL
ORDER BY ts_rank(m.document, q.query) DESC, m.id
LIMIT $3
"""

# Serialises one owner's counted writes: a transaction-scoped advisory lock on the
# owner's name, so two adds at the cap cannot both count before either is kept.
_LOCK_OWNER = "SELECT pg_advisory_xact_lock(hashtextextended('memory:' || $1, 0))"


class PostgresMemoryStore:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

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
        async with self._store.transaction() as db:
            if supersedes is not None:
                status = await db.execute(
                    "UPDATE memory_items SET invalid_at = $1, superseded_by = $2"
                    " WHERE owner = $3 AND memory_id = $4 AND invalid_at IS NULL",
                    _time(supersedes.invalid_at),
                    supersedes.superseded_by,
                    supersedes.user,
                    supersedes.memory_id,
                )
                if status != "UPDATE 1":
                    raise MemoryChanged()
            elif max_items is not None:
                await _check_count(db, item.user, 1, max_items)
            await _insert(db, item, vector, embedder)
            if tombstone is not None:
                await _bury(db, item.user, tombstone, item.created_at)

    async def import_items(
        self,
        owner: str,
        items: Sequence[MemoryItem],
        vectors: Vectors | None,
        embedder: str | None,
        *,
        max_items: int | None,
    ) -> None:
        async with self._store.transaction() as db:
            if max_items is not None:
                await _check_count(db, owner, sum(1 for i in items if i.valid), max_items)
            for index, item in enumerate(items):
                await _insert(db, item, None if vectors is None else vectors[index], embedder)

    async def get_item(self, owner: str, memory_id: str) -> MemoryItem | None:
        row = await self._store.pool.fetchrow(
            f"SELECT {ITEM_COLUMNS} FROM memory_items WHERE owner = $1 AND memory_id = $2",
            owner,
            memory_id,
        )
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
        where = ["owner = $1"]
        args: list[Any] = [owner]
        if not include_invalid:
            where.append("invalid_at IS NULL")
        if scope is not None:
            args.append(scope)
            where.append(f"scope = ${len(args)}")
        if before is not None:
            args.append(before)
            where.append(f"memory_id < ${len(args)}")
        args.append(limit)
        rows = await self._store.pool.fetch(
            f"SELECT {ITEM_COLUMNS} FROM memory_items WHERE {' AND '.join(where)}"
            f" ORDER BY memory_id DESC LIMIT ${len(args)}",
            *args,
        )
        return [_item(r) for r in rows]

    async def valid_items(self, owner: str, *, pinned_only: bool = False) -> list[MemoryItem]:
        pinned = " AND pinned" if pinned_only else ""
        rows = await self._store.pool.fetch(
            f"SELECT {ITEM_COLUMNS} FROM memory_items WHERE owner = $1 AND invalid_at IS NULL"
            f"{pinned} ORDER BY memory_id",
            owner,
        )
        return [_item(r) for r in rows]

    async def update_item(
        self, owner: str, memory_id: str, *, pinned: bool, scope: str, edited_at: datetime
    ) -> bool:
        status = await self._store.pool.execute(
            "UPDATE memory_items SET pinned = $1, scope = $2, edited_at = $3"
            " WHERE owner = $4 AND memory_id = $5",
            pinned,
            scope,
            utc(edited_at),
            owner,
            memory_id,
        )
        return bool(status == "UPDATE 1")

    async def invalidate_item(
        self, owner: str, memory_id: str, invalid_at: datetime
    ) -> MemoryItem | None:
        async with self._store.transaction() as db:
            row = await db.fetchrow(
                f"SELECT {ITEM_COLUMNS} FROM memory_items"
                " WHERE owner = $1 AND memory_id = $2 AND invalid_at IS NULL FOR UPDATE",
                owner,
                memory_id,
            )
            if row is None:
                return None
            await db.execute(
                "UPDATE memory_items SET invalid_at = $1 WHERE owner = $2 AND memory_id = $3",
                utc(invalid_at),
                owner,
                memory_id,
            )
        return _item(row)

    async def forget_item(self, owner: str, memory_id: str, now: datetime) -> list[MemoryItem]:
        async with self._store.transaction() as db:
            chain = [
                int(r[0])
                for r in await db.fetch(
                    CHAIN_SQL.format(owner="$1", memory_id="$2"), owner, memory_id
                )
            ]
            if not chain:
                return []
            # Their vectors go by the foreign key's cascade, in this transaction.
            rows = {
                int(r[0]): _item(tuple(r)[1:])
                for r in await db.fetch(
                    f"DELETE FROM memory_items WHERE id = ANY($1::bigint[])"
                    f" RETURNING id, {ITEM_COLUMNS}",
                    chain,
                )
            }
            items = [rows[i] for i in chain]
            for item in items:
                await _bury(db, owner, forgotten(item), now)
        return items

    async def tombstones(self, owner: str, text_hash: str) -> list[Tombstone]:
        rows = await self._store.pool.fetch(
            f"SELECT {TOMBSTONE_COLUMNS} FROM memory_tombstones"
            " WHERE owner = $1 AND text_hash = $2 ORDER BY id",
            owner,
            text_hash,
        )
        return [tombstone_from_row(r) for r in rows]

    async def keyword_items(self, owner: str, words: Sequence[str], limit: int) -> list[int]:
        if not words:
            return []
        rows = await self._store.pool.fetch(_KEYWORD_SQL, owner, list(words), limit)
        return [int(r[0]) for r in rows]

    async def item_vectors(self, owner: str, embedder: str, dimensions: int) -> ChunkVectors:
        rows = await self._store.pool.fetch(
            "SELECT v.item_id, v.embedding FROM memory_vectors v"
            " JOIN memory_items m ON m.id = v.item_id"
            " WHERE v.owner = $1 AND v.embedder = $2 AND octet_length(v.embedding) = $3"
            " AND m.invalid_at IS NULL ORDER BY v.item_id",
            owner,
            embedder,
            4 * dimensions,
        )
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ChunkVectors(ids, vectors_from([r[1] for r in rows], dimensions))

    async def items_by_row(self, owner: str, row_ids: Sequence[int]) -> dict[int, MemoryItem]:
        if not row_ids:
            return {}
        rows = await self._store.pool.fetch(
            f"SELECT id, {ITEM_COLUMNS} FROM memory_items"
            " WHERE owner = $1 AND id = ANY($2::bigint[])",
            owner,
            list(row_ids),
        )
        return {int(r[0]): _item(tuple(r)[1:]) for r in rows}


async def _check_count(db: Connection, owner: str, adding: int, max_items: int) -> None:
    await db.execute(_LOCK_OWNER, owner)
    kept = await db.fetchval(
        "SELECT count(*) FROM memory_items WHERE owner = $1 AND invalid_at IS NULL", owner
    )
    if kept + adding > max_items:
        raise MemoryLimitReached(max_items)


async def _insert(
    db: Connection, item: MemoryItem, vector: Vectors | None, embedder: str | None
) -> None:
    row_id = await db.fetchval(_INSERT, *item_values(item, utc))
    if vector is not None and embedder is not None:
        await db.execute(
            "INSERT INTO memory_vectors (item_id, owner, embedder, embedding)"
            " VALUES ($1, $2, $3, $4)",
            row_id,
            item.user,
            embedder,
            vector_bytes(vector),
        )


async def _bury(db: Connection, owner: str, tombstone: Tombstone, now: datetime) -> None:
    key, _, message_ids = source_columns(tombstone.source)
    await db.execute(
        "INSERT INTO memory_tombstones"
        " (owner, text_hash, source_key, source_message_ids, reason, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        owner,
        tombstone.text_hash,
        key,
        message_ids,
        tombstone.reason,
        utc(now),
    )


def _time(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


def _item(row: Row) -> MemoryItem:
    return item_from_row(row, utc)
