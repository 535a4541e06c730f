"""The task store port: a user's tasks.

Every method takes the owner and answers only from the owner's rows: another user's task
is invisible, exactly like an id that never existed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol

from sessiongate.core.tasks import TaskStatus
from sessiongate.store.base import Row


@dataclass(frozen=True, slots=True)
class Task:
    task_id: str
    owner: str
    title: str
    status: TaskStatus
    due: date | None
    #: The key's name in the owner's namespace whose turn made the task (None: made
    #: through the API). Kept when that key is erased: the task is the user's.
    source_key: str | None
    source_turn_id: str | None
    created_at: datetime
    updated_at: datetime
    #: When the task was last marked done; None while it is open.
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class TaskUpdate:
    """What one update changes; None leaves a field as it is. `due` can be cleared, so
    whether it changes is said apart (`change_due`)."""

    title: str | None = None
    status: TaskStatus | None = None
    due: date | None = None
    change_due: bool = False


#: The columns both stores write and select, in the order `task_from_row` reads.
TASK_COLUMNS = (
    "id, owner, title, status, due, source_key, source_turn_id,"
    " created_at, updated_at, completed_at"
)


def task_from_row(row: Row, to_time: Callable[[Any], datetime]) -> Task:
    """A row of `TASK_COLUMNS`; `to_time` reads the store's stored time. `due` arrives as
    a date (PostgreSQL's DATE) or as its ISO text (SQLite)."""
    due = row[4]
    return Task(
        task_id=row[0],
        owner=row[1],
        title=row[2],
        status=row[3],
        due=due if due is None or isinstance(due, date) else date.fromisoformat(due),
        source_key=row[5],
        source_turn_id=row[6],
        created_at=to_time(row[7]),
        updated_at=to_time(row[8]),
        completed_at=None if row[9] is None else to_time(row[9]),
    )


class TaskStore(Protocol):
    async def add_task(self, task: Task, max_tasks: int | None = None) -> bool:
        """Keep the task; with `max_tasks`, only while the owner has fewer tasks than
        that, counted and inserted atomically (concurrent adds never pass the cap).
        False: the owner is at the cap and nothing was written."""
        ...

    async def get_task(self, owner: str, task_id: str) -> Task | None:
        """The owner's task; None for an unknown id and for another user's alike."""
        ...

    async def list_tasks(
        self, owner: str, status: TaskStatus | None, limit: int, after: str | None
    ) -> list[Task]:
        """The owner's tasks (of one status, or all), oldest first; `after`: only tasks
        made after that id."""
        ...

    async def update_task(
        self, owner: str, task_id: str, update: TaskUpdate, now: datetime
    ) -> Task | None:
        """Apply `update` in one statement (two concurrent updates of different fields
        both land) and return the task as it now is; None when the owner has no such task.
        Marking a task done stamps `completed_at` once; reopening it clears it."""
        ...

    async def delete_tasks_of(self, owner: str) -> int:
        """Remove every task of the owner (the user is erased); how many went."""
        ...
