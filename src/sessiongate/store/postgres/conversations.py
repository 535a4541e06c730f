"""The conversation index in the PostgreSQL database: the same answers as
SQLiteConversationIndex (store/conversations.py)."""

from __future__ import annotations

from collections.abc import Sequence

from sessiongate.core.keys import KeyRef
from sessiongate.store.conversations import (
    NODE_COLUMNS,
    ConversationHead,
    ConversationNode,
    node_from_row,
    node_values,
)
from sessiongate.store.postgres.store import PostgresStore

_RECORD_NODE = """
INSERT INTO conversation_nodes
    (key, owner, hash, parent, position, role, session_id, message_ids)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (key, hash) DO UPDATE SET
    session_id = excluded.session_id, message_ids = excluded.message_ids
"""

_MOVE_HEAD = """
INSERT INTO conversation_heads (key, owner, hash, position, moved_at)
VALUES ($1, $2, $3, $4, clock_timestamp())
ON CONFLICT (key) DO UPDATE SET
    hash = excluded.hash, position = excluded.position, moved_at = excluded.moved_at
"""


_FIND = f"""
(SELECT 0, key, hash, NULL::text, position, NULL::text, NULL::text, NULL::text
 FROM conversation_heads WHERE owner = $1 AND hash = ANY($2::text[])
 ORDER BY position DESC, moved_at DESC LIMIT 1)
UNION ALL
(SELECT 1, {NODE_COLUMNS} FROM conversation_nodes WHERE owner = $1 AND hash = ANY($2::text[])
 ORDER BY position DESC, id DESC LIMIT 1)
"""


class PostgresConversationIndex:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def head(self, key: KeyRef) -> ConversationHead | None:
        row = await self._store.pool.fetchrow(
            "SELECT hash, position FROM conversation_heads WHERE key = $1", key.storage_id
        )
        return None if row is None else ConversationHead(key, row[0], int(row[1]))

    async def heads_at(self, owner: str, hashes: Sequence[str]) -> list[ConversationHead]:
        rows = await self._store.pool.fetch(
            "SELECT key, hash, position FROM conversation_heads"
            " WHERE owner = $1 AND hash = ANY($2::text[])"
            " ORDER BY position DESC, moved_at DESC",
            owner,
            list(hashes),
        )
        return [ConversationHead(KeyRef.from_storage_id(r[0]), r[1], int(r[2])) for r in rows]

    async def deepest(self, owner: str, hashes: Sequence[str]) -> ConversationNode | None:
        row = await self._store.pool.fetchrow(
            f"SELECT {NODE_COLUMNS} FROM conversation_nodes"
            " WHERE owner = $1 AND hash = ANY($2::text[])"
            " ORDER BY position DESC, id DESC LIMIT 1",
            owner,
            list(hashes),
        )
        return None if row is None else node_from_row(row)

    async def find(
        self, owner: str, hashes: Sequence[str]
    ) -> tuple[ConversationHead | None, ConversationNode | None]:
        # Both look-ups in one statement: a miss of the first costs no second round trip.
        rows = await self._store.pool.fetch(_FIND, owner, list(hashes))
        head = node = None
        for row in rows:
            if row[0] == 0:
                head = ConversationHead(KeyRef.from_storage_id(row[1]), row[2], int(row[4]))
            else:
                node = node_from_row(row[1:])
        return (head, None) if head is not None else (None, node)

    async def nodes(self, key: KeyRef, hashes: Sequence[str]) -> list[ConversationNode]:
        rows = await self._store.pool.fetch(
            f"SELECT {NODE_COLUMNS} FROM conversation_nodes"
            " WHERE key = $1 AND hash = ANY($2::text[])",
            key.storage_id,
            list(hashes),
        )
        return [node_from_row(r) for r in rows]

    async def record(self, nodes: Sequence[ConversationNode], head: ConversationHead) -> None:
        async with self._store.transaction() as db:
            if nodes:
                await db.executemany(_RECORD_NODE, [node_values(n) for n in nodes])
            await db.execute(
                _MOVE_HEAD, head.key.storage_id, head.key.owner, head.hash, head.position
            )

    async def erase(self, key: KeyRef) -> None:
        async with self._store.transaction() as db:
            await db.execute("DELETE FROM conversation_nodes WHERE key = $1", key.storage_id)
            await db.execute("DELETE FROM conversation_heads WHERE key = $1", key.storage_id)
