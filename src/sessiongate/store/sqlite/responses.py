"""Responses rows in the SQLite database (store/responses.py)."""

from __future__ import annotations

import secrets
from typing import Any

import orjson

from sessiongate.store.responses import (
    COLUMNS,
    CONVERSATION_COLUMNS,
    ConversationObject,
    ResponseRecord,
    response_from_row,
)
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore

#: This process's token: one process serves a SQLite database (store/sqlite/serve_lock.py),
#: so a background response claimed under another token was left by one that stopped.
_PROCESS_TOKEN = secrets.randbelow(2**31 - 1) + 1


def _record(row: Any) -> ResponseRecord:
    return response_from_row(row, from_micros)


class SQLiteResponseStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    @property
    def process_token(self) -> int:
        return _PROCESS_TOKEN

    async def claimer_gone(self, token: int) -> bool:
        return token != _PROCESS_TOKEN

    async def add(self, record: ResponseRecord) -> None:
        with self._store.transaction() as db:
            db.execute(
                f"INSERT INTO responses ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (response_id) DO UPDATE SET tip_hash = excluded.tip_hash,"
                " tip_position = excluded.tip_position, body = excluded.body",
                (
                    record.response_id,
                    record.owner,
                    record.key,
                    record.tip_hash,
                    record.tip_position,
                    orjson.dumps(record.body).decode(),
                    orjson.dumps(record.input_items).decode(),
                    to_micros(record.created_at),
                ),
            )

    async def get(self, owner: str, response_id: str) -> ResponseRecord | None:
        row = self._store.connection.execute(
            f"SELECT {COLUMNS} FROM responses WHERE response_id = ? AND owner = ?",
            (response_id, owner),
        ).fetchone()
        return None if row is None else _record(row)

    async def delete(self, owner: str, response_id: str) -> bool:
        with self._store.transaction() as db:
            gone = db.execute(
                "DELETE FROM responses WHERE response_id = ? AND owner = ?", (response_id, owner)
            ).rowcount
        return bool(gone)

    async def replace_body(
        self, owner: str, response_id: str, expected: dict[str, Any], body: dict[str, Any]
    ) -> bool:
        with self._store.transaction() as db:
            changed = db.execute(
                "UPDATE responses SET body = ? WHERE response_id = ? AND owner = ? AND body = ?",
                (
                    orjson.dumps(body).decode(),
                    response_id,
                    owner,
                    orjson.dumps(expected).decode(),
                ),
            ).rowcount
        return bool(changed)

    async def erase_key(self, owner: str, key: str) -> None:
        with self._store.transaction() as db:
            db.execute("DELETE FROM responses WHERE owner = ? AND key = ?", (owner, key))
            db.execute("DELETE FROM conversation_objects WHERE owner = ? AND key = ?", (owner, key))

    async def add_conversation(self, conversation: ConversationObject) -> None:
        with self._store.transaction() as db:
            db.execute(
                f"INSERT INTO conversation_objects ({CONVERSATION_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                (
                    conversation.conversation_id,
                    conversation.owner,
                    conversation.key,
                    orjson.dumps(conversation.metadata).decode(),
                    to_micros(conversation.created_at),
                ),
            )

    async def get_conversation(self, owner: str, conversation_id: str) -> ConversationObject | None:
        row = self._store.connection.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversation_objects"
            " WHERE conversation_id = ? AND owner = ?",
            (conversation_id, owner),
        ).fetchone()
        if row is None:
            return None
        return ConversationObject(row[0], row[1], row[2], orjson.loads(row[3]), from_micros(row[4]))

    async def set_conversation_metadata(
        self, owner: str, conversation_id: str, metadata: dict[str, str]
    ) -> bool:
        with self._store.transaction() as db:
            changed = db.execute(
                "UPDATE conversation_objects SET metadata = ?"
                " WHERE conversation_id = ? AND owner = ?",
                (orjson.dumps(metadata).decode(), conversation_id, owner),
            ).rowcount
        return bool(changed)

    async def delete_conversation(self, owner: str, conversation_id: str) -> bool:
        with self._store.transaction() as db:
            gone = db.execute(
                "DELETE FROM conversation_objects WHERE conversation_id = ? AND owner = ?",
                (conversation_id, owner),
            ).rowcount
        return bool(gone)
