"""Idempotency rows in the PostgreSQL database."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from sessiongate.store.idempotency import IdempotencyRecord
from sessiongate.store.postgres.liveness import CLAIMER_GONE_SQL
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore

_COLUMNS = "owner, idem_key, fingerprint, status, result, created_at"

#: A `running` row's `result` names the claiming process's liveness token, and its turn
#: once started (the outcome replaces both when the turn ends).
CLAIMED_BY = "claimed_by"
TURN_ID = "turn_id"

_GONE = CLAIMER_GONE_SQL.replace("$1", f"(result::json ->> '{CLAIMED_BY}')")

# A `running` row is taken over when it is older than `stale_after`, or at once when the
# process that claimed it is gone (killed, crashed, its host lost) before its turn
# started: nothing was stored, and a retry on another gateway would otherwise wait out
# `stale_after`. One whose turn had started is left for the service (`abandoned`).
_TAKE_OVER = f"""
DELETE FROM idempotency_keys WHERE owner = $1 AND idem_key = $2 AND status = 'running'
AND (created_at < $3 OR (
    result IS NOT NULL AND (result::json ->> '{TURN_ID}') IS NULL AND {_GONE}
))
"""

_READ = f"""
SELECT {_COLUMNS}, status = 'running' AND result IS NOT NULL AND {_GONE} AS abandoned
FROM idempotency_keys WHERE owner = $1 AND idem_key = $2
"""


def _record(row: Any) -> IdempotencyRecord:
    return IdempotencyRecord(
        owner=row[0],
        key=row[1],
        fingerprint=row[2],
        status=row[3],
        result=None if row[4] is None else orjson.loads(row[4]),
        created_at=utc(row[5]),
        abandoned=bool(row[6]) if len(row) > 6 else False,
    )


class PostgresIdempotencyStore:
    """Shares the session store's pool; the same answers as SQLiteIdempotencyStore. The
    primary key makes the claim atomic across processes; a claim abandoned by a process
    that died is taken over at once (`_TAKE_OVER`)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def claim(
        self, owner: str, key: str, fingerprint: str, now: datetime, stale_before: datetime
    ) -> IdempotencyRecord | None:
        # The row in the way may go between the INSERT and the SELECT (released by its
        # claimer): then claim again.
        while True:
            async with self._store.transaction() as db:
                await db.execute(_TAKE_OVER, owner, key, stale_before)
                inserted = await db.fetchrow(
                    f"INSERT INTO idempotency_keys ({_COLUMNS})"
                    " VALUES ($1, $2, $3, 'running', $5, $4)"
                    " ON CONFLICT (owner, idem_key) DO NOTHING RETURNING owner",
                    owner,
                    key,
                    fingerprint,
                    now,
                    orjson.dumps({CLAIMED_BY: self._store.liveness.token}).decode(),
                )
                if inserted is not None:
                    return None
                row = await db.fetchrow(_READ, owner, key)
            if row is not None:
                return _record(row)

    async def started(self, owner: str, key: str, turn_id: str) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(
                "UPDATE idempotency_keys SET result = $3"
                " WHERE owner = $1 AND idem_key = $2 AND status = 'running'",
                owner,
                key,
                orjson.dumps({CLAIMED_BY: self._store.liveness.token, TURN_ID: turn_id}).decode(),
            )

    async def get(self, owner: str, key: str) -> IdempotencyRecord | None:
        async with self._store.transaction(single_statement=True) as db:
            row = await db.fetchrow(
                f"SELECT {_COLUMNS} FROM idempotency_keys WHERE owner = $1 AND idem_key = $2",
                owner,
                key,
            )
        return None if row is None else _record(row)

    async def finish(self, owner: str, key: str, result: dict[str, Any]) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(
                "UPDATE idempotency_keys SET status = 'done', result = $3"
                " WHERE owner = $1 AND idem_key = $2",
                owner,
                key,
                orjson.dumps(result).decode(),
            )

    async def release(self, owner: str, key: str) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(
                "DELETE FROM idempotency_keys WHERE owner = $1 AND idem_key = $2"
                " AND status = 'running'",
                owner,
                key,
            )

    async def prune(self, before: datetime) -> int:
        async with self._store.transaction(single_statement=True) as db:
            status = await db.execute("DELETE FROM idempotency_keys WHERE created_at < $1", before)
        return int(status.split()[-1])
