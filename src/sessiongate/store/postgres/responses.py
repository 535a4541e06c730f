"""Responses rows in the PostgreSQL database: the same answers as SQLiteResponseStore."""

from __future__ import annotations

from typing import Any

import orjson

from sessiongate.store.postgres.liveness import CLAIMER_GONE_SQL
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.responses import (
    COLUMNS,
    CONVERSATION_COLUMNS,
    ConversationObject,
    ResponseRecord,
    response_from_row,
)


def _record(row: Any) -> ResponseRecord:
    return response_from_row(row, utc)


class PostgresResponseStore:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    @property
    def process_token(self) -> int:
        return self._store.liveness.token

    async def claimer_gone(self, token: int) -> bool:
        if token == self._store.liveness.token:
            return False  # this process: alive, whatever its liveness connection says
        return bool(await self._store.pool.fetchval(f"SELECT {CLAIMER_GONE_SQL}", token))

    async def add(self, record: ResponseRecord) -> None:
        await self._store.pool.execute(
            f"INSERT INTO responses ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            " ON CONFLICT (response_id) DO UPDATE SET tip_hash = excluded.tip_hash,"
            " tip_position = excluded.tip_position, body = excluded.body",
            record.response_id,
            record.owner,
            record.key,
            record.tip_hash,
            record.tip_position,
            orjson.dumps(record.body).decode(),
            orjson.dumps(record.input_items).decode(),
            record.created_at,
        )

    async def get(self, owner: str, response_id: str) -> ResponseRecord | None:
        row = await self._store.pool.fetchrow(
            f"SELECT {COLUMNS} FROM responses WHERE response_id = $1 AND owner = $2",
            response_id,
            owner,
        )
        return None if row is None else _record(row)

    async def delete(self, owner: str, response_id: str) -> bool:
        status = await self._store.pool.execute(
            "DELETE FROM responses WHERE response_id = $1 AND owner = $2", response_id, owner
        )
        return str(status).rsplit(" ", 1)[-1] != "0"

    async def replace_body(
        self, owner: str, response_id: str, expected: dict[str, Any], body: dict[str, Any]
    ) -> bool:
        status = await self._store.pool.execute(
            "UPDATE responses SET body = $1 WHERE response_id = $2 AND owner = $3 AND body = $4",
            orjson.dumps(body).decode(),
            response_id,
            owner,
            orjson.dumps(expected).decode(),
        )
        return str(status).rsplit(" ", 1)[-1] != "0"

    async def erase_key(self, owner: str, key: str) -> None:
        await self._store.pool.execute(
            "DELETE FROM responses WHERE owner = $1 AND key = $2", owner, key
        )
        await self._store.pool.execute(
            "DELETE FROM conversation_objects WHERE owner = $1 AND key = $2", owner, key
        )

    async def add_conversation(self, conversation: ConversationObject) -> None:
        await self._store.pool.execute(
            f"INSERT INTO conversation_objects ({CONVERSATION_COLUMNS})"
            " VALUES ($1, $2, $3, $4, $5)",
            conversation.conversation_id,
            conversation.owner,
            conversation.key,
            orjson.dumps(conversation.metadata).decode(),
            conversation.created_at,
        )

    async def get_conversation(self, owner: str, conversation_id: str) -> ConversationObject | None:
        row = await self._store.pool.fetchrow(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversation_objects"
            " WHERE conversation_id = $1 AND owner = $2",
            conversation_id,
            owner,
        )
        if row is None:
            return None
        return ConversationObject(row[0], row[1], row[2], orjson.loads(row[3]), utc(row[4]))

    async def set_conversation_metadata(
        self, owner: str, conversation_id: str, metadata: dict[str, str]
    ) -> bool:
        status = await self._store.pool.execute(
            "UPDATE conversation_objects SET metadata = $3"
            " WHERE conversation_id = $1 AND owner = $2",
            conversation_id,
            owner,
            orjson.dumps(metadata).decode(),
        )
        return str(status).rsplit(" ", 1)[-1] != "0"

    async def delete_conversation(self, owner: str, conversation_id: str) -> bool:
        status = await self._store.pool.execute(
            "DELETE FROM conversation_objects WHERE conversation_id = $1 AND owner = $2",
            conversation_id,
            owner,
        )
        return str(status).rsplit(" ", 1)[-1] != "0"
