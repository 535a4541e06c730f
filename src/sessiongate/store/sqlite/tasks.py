"""Task rows in the SQLite database."""

from __future__ import annotations

import sqlite3
from datetime import date, datetime
from typing import Any

from sessiongate.core.tasks import TaskStatus
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore
from sessiongate.store.tasks import TASK_COLUMNS, Task, TaskUpdate, task_from_row

# One statement, so a concurrent update of another field is never lost. The right-hand
# sides all read the row as it was before this update.
_UPDATE = f"""
UPDATE tasks SET
    title = COALESCE(:title, title),
    status = COALESCE(:status, status),
    due = CASE WHEN :change_due THEN :due ELSE due END,
    completed_at = CASE
        WHEN :status IS NULL THEN completed_at
        WHEN :status = 'done' THEN COALESCE(completed_at, :now)
        ELSE NULL
    END,
    updated_at = :now
WHERE id = :id AND owner = :owner
RETURNING {TASK_COLUMNS}
"""


class SQLiteTaskStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def add_task(self, task: Task, max_tasks: int | None = None) -> bool:
        # Count and insert in one statement inside BEGIN IMMEDIATE: every writer, in any
        # process, waits for the write lock, so concurrent adds cannot pass the cap.
        with self._store.transaction() as db:
            cursor = db.execute(
                f"INSERT INTO tasks ({TASK_COLUMNS})"
                " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
                " WHERE ? IS NULL OR (SELECT count(*) FROM tasks WHERE owner = ?) < ?",
                (
                    task.task_id,
                    task.owner,
                    task.title,
                    task.status,
                    _date_text(task.due),
                    task.source_key,
                    task.source_turn_id,
                    to_micros(task.created_at),
                    to_micros(task.updated_at),
                    None if task.completed_at is None else to_micros(task.completed_at),
                    max_tasks,
                    task.owner,
                    max_tasks,
                ),
            )
            return cursor.rowcount == 1

    async def get_task(self, owner: str, task_id: str) -> Task | None:
        row = self._conn.execute(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ? AND owner = ?", (task_id, owner)
        ).fetchone()
        return None if row is None else _task(row)

    async def list_tasks(
        self, owner: str, status: TaskStatus | None, limit: int, after: str | None
    ) -> list[Task]:
        # Conditions are added, not written `? IS NULL OR …`, so the planner can use the
        # (owner, status, id) index.
        where, params = ["owner = ?"], [owner]
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if after is not None:
            where.append("id > ?")
            params.append(after)
        rows = self._conn.execute(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE {' AND '.join(where)} ORDER BY id LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [_task(r) for r in rows]

    async def update_task(
        self, owner: str, task_id: str, update: TaskUpdate, now: datetime
    ) -> Task | None:
        with self._store.transaction() as db:
            row = db.execute(
                _UPDATE,
                {
                    "title": update.title,
                    "status": update.status,
                    "change_due": update.change_due,
                    "due": _date_text(update.due),
                    "now": to_micros(now),
                    "id": task_id,
                    "owner": owner,
                },
            ).fetchone()
        return None if row is None else _task(row)

    async def delete_tasks_of(self, owner: str) -> int:
        with self._store.transaction() as db:
            return db.execute("DELETE FROM tasks WHERE owner = ?", (owner,)).rowcount


def _date_text(value: date | None) -> str | None:
    return None if value is None else value.isoformat()


def _task(row: tuple[Any, ...]) -> Task:
    return task_from_row(row, from_micros)
