"""The conversation index in the SQLite database (store/conversations.py)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence

from sessiongate.core.keys import KeyRef
from sessiongate.store.conversations import (
    NODE_COLUMNS,
    ConversationHead,
    ConversationNode,
    node_from_row,
    node_values,
)
from sessiongate.store.sqlite.store import SQLiteStore

#: Hashes per query (SQLite caps the number of bound parameters).
_CHUNK = 500

_RECORD_NODE = """
INSERT INTO conversation_nodes
    (key, owner, hash, parent, position, role, session_id, message_ids)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key, hash) DO UPDATE SET
    session_id = excluded.session_id, message_ids = excluded.message_ids
"""

_MOVE_HEAD = """
INSERT INTO conversation_heads (key, owner, hash, position, moved_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    hash = excluded.hash, position = excluded.position, moved_at = excluded.moved_at
"""


def _chunks(hashes: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(hashes), _CHUNK):
        yield hashes[start : start + _CHUNK]


def _marks(values: Sequence[str]) -> str:
    return ",".join("?" for _ in values)


class SQLiteConversationIndex:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def head(self, key: KeyRef) -> ConversationHead | None:
        row = self._conn.execute(
            "SELECT hash, position FROM conversation_heads WHERE key = ?", (key.storage_id,)
        ).fetchone()
        return None if row is None else ConversationHead(key, row[0], int(row[1]))

    async def heads_at(self, owner: str, hashes: Sequence[str]) -> list[ConversationHead]:
        found: list[tuple[int, int, ConversationHead]] = []
        for chunk in _chunks(hashes):
            rows = self._conn.execute(
                "SELECT key, hash, position, moved_at FROM conversation_heads"
                f" WHERE owner = ? AND hash IN ({_marks(chunk)})",
                (owner, *chunk),
            ).fetchall()
            for r in rows:
                head = ConversationHead(KeyRef.from_storage_id(r[0]), r[1], int(r[2]))
                found.append((int(r[2]), int(r[3]), head))
        found.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [head for _, _, head in found]

    async def deepest(self, owner: str, hashes: Sequence[str]) -> ConversationNode | None:
        best: tuple[int, int, ConversationNode] | None = None
        for chunk in _chunks(hashes):
            row = self._conn.execute(
                f"SELECT {NODE_COLUMNS}, id FROM conversation_nodes"
                f" WHERE owner = ? AND hash IN ({_marks(chunk)})"
                " ORDER BY position DESC, id DESC LIMIT 1",
                (owner, *chunk),
            ).fetchone()
            if row is not None and (best is None or (row[3], row[7]) > best[:2]):
                best = (int(row[3]), int(row[7]), node_from_row(row))
        return None if best is None else best[2]

    async def find(
        self, owner: str, hashes: Sequence[str]
    ) -> tuple[ConversationHead | None, ConversationNode | None]:
        heads = await self.heads_at(owner, hashes)
        if heads:
            return heads[0], None
        return None, await self.deepest(owner, hashes)

    async def nodes(self, key: KeyRef, hashes: Sequence[str]) -> list[ConversationNode]:
        found: list[ConversationNode] = []
        for chunk in _chunks(hashes):
            rows = self._conn.execute(
                f"SELECT {NODE_COLUMNS} FROM conversation_nodes"
                f" WHERE key = ? AND hash IN ({_marks(chunk)})",
                (key.storage_id, *chunk),
            ).fetchall()
            found.extend(node_from_row(r) for r in rows)
        return found

    async def record(self, nodes: Sequence[ConversationNode], head: ConversationHead) -> None:
        with self._store.transaction() as db:
            for node in nodes:
                db.execute(_RECORD_NODE, node_values(node))
            db.execute(
                _MOVE_HEAD,
                (
                    head.key.storage_id,
                    head.key.owner,
                    head.hash,
                    head.position,
                    time.time_ns() // 1000,
                ),
            )

    async def erase(self, key: KeyRef) -> None:
        with self._store.transaction() as db:
            db.execute("DELETE FROM conversation_nodes WHERE key = ?", (key.storage_id,))
            db.execute("DELETE FROM conversation_heads WHERE key = ?", (key.storage_id,))
