"""Task rows in the PostgreSQL database."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from sessiongate.core.tasks import TaskStatus
from sessiongate.store.postgres.locks import lock_id
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.tasks import TASK_COLUMNS, Task, TaskUpdate, task_from_row

_INSERT = f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
# The same row, only while the owner has fewer than $11 tasks. Under READ COMMITTED two
# transactions would both count the old rows, so the caller first takes the owner's
# transaction-scoped advisory lock: adds of one owner go one at a time, in every process.
_INSERT_UNDER_CAP = (
    f"INSERT INTO tasks ({TASK_COLUMNS})"
    " SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10"
    " WHERE (SELECT count(*) FROM tasks WHERE owner = $2) < $11"
)

# One statement, so a concurrent update of another field is never lost. The right-hand
# sides all read the row as it was before this update. The casts tell PostgreSQL the
# parameters' types where NULL alone would leave them unknown.
_UPDATE = f"""
UPDATE tasks SET
    title = COALESCE($3::text, title),
    status = COALESCE($4::text, status),
    due = CASE WHEN $5::boolean THEN $6::date ELSE due END,
    completed_at = CASE
        WHEN $4::text IS NULL THEN completed_at
        WHEN $4::text = 'done' THEN COALESCE(completed_at, $7::timestamptz)
        ELSE NULL
    END,
    updated_at = $7::timestamptz
WHERE id = $1 AND owner = $2
RETURNING {TASK_COLUMNS}
"""


class PostgresTaskStore:
    """Shares the session store's pool; the same answers as SQLiteTaskStore."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def add_task(self, task: Task, max_tasks: int | None = None) -> bool:
        if max_tasks is not None:
            return await self._add_under_cap(task, max_tasks)
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(
                _INSERT,
                task.task_id,
                task.owner,
                task.title,
                task.status,
                task.due,
                task.source_key,
                task.source_turn_id,
                utc(task.created_at),
                utc(task.updated_at),
                None if task.completed_at is None else utc(task.completed_at),
            )
        return True

    async def _add_under_cap(self, task: Task, max_tasks: int) -> bool:
        async with self._store.transaction() as db:
            # NUL never occurs in a key's storage id, so this lock is never a key's.
            cap_lock = lock_id(f"tasks-cap\x00{task.owner}")
            await db.execute("SELECT pg_advisory_xact_lock($1)", cap_lock)
            status = await db.execute(
                _INSERT_UNDER_CAP,
                task.task_id,
                task.owner,
                task.title,
                task.status,
                task.due,
                task.source_key,
                task.source_turn_id,
                utc(task.created_at),
                utc(task.updated_at),
                None if task.completed_at is None else utc(task.completed_at),
                max_tasks,
            )
        return bool(status == "INSERT 0 1")

    async def get_task(self, owner: str, task_id: str) -> Task | None:
        row = await self._store.pool.fetchrow(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1 AND owner = $2", task_id, owner
        )
        return None if row is None else _task(row)

    async def list_tasks(
        self, owner: str, status: TaskStatus | None, limit: int, after: str | None
    ) -> list[Task]:
        # Conditions are added, not written `$2 IS NULL OR …`, so the planner can use the
        # (owner, status, id) index.
        where, params = ["owner = $1"], [owner]
        if status is not None:
            params.append(status)
            where.append(f"status = ${len(params)}")
        if after is not None:
            params.append(after)
            where.append(f"id > ${len(params)}")
        rows = await self._store.pool.fetch(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE {' AND '.join(where)}"
            f" ORDER BY id LIMIT ${len(params) + 1}",
            *params,
            limit,
        )
        return [_task(r) for r in rows]

    async def update_task(
        self, owner: str, task_id: str, update: TaskUpdate, now: datetime
    ) -> Task | None:
        async with self._store.transaction(single_statement=True) as db:
            row = await db.fetchrow(
                _UPDATE,
                task_id,
                owner,
                update.title,
                update.status,
                update.change_due,
                update.due,
                utc(now),
            )
        return None if row is None else _task(row)

    async def delete_tasks_of(self, owner: str) -> int:
        async with self._store.transaction(single_statement=True) as db:
            status = await db.execute("DELETE FROM tasks WHERE owner = $1", owner)
        return int(status.rsplit(" ", 1)[-1])  # "DELETE <count>"


def _task(row: asyncpg.Record) -> Task:
    return task_from_row(row, utc)
