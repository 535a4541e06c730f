"""Tasks: a user's to-do items, `open` or `done`, with an optional due date and the turn
they came from (DESIGN.md §7). Served at `/v1/tasks` and to models as `tasks_add`,
`tasks_list` and `tasks_complete`.

A task belongs to one user. Another user's task answers exactly as an unknown id does
(`task_not_found`), so nobody learns that it exists. A task made in a conversation names
its key and turn, but it is the user's, not the key's: erasing the key leaves it (only
erasing the user removes it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sessiongate.core.clock import Clock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.keys import validate_session_key
from sessiongate.core.tasks import (
    TaskStatus,
    validate_due,
    validate_page_size,
    validate_status,
    validate_task_id,
    validate_title,
)
from sessiongate.errors import Conflict, InvalidInput, NotFound
from sessiongate.store.base import Store
from sessiongate.store.tasks import Task, TaskStore, TaskUpdate


class TaskNotFound(NotFound):
    """Unknown id, or another user's task (never say which)."""

    code = "task_not_found"


class TaskLimitReached(Conflict):
    """The owner has `[tasks] max_tasks_per_user` tasks already."""

    code = "task_limit_reached"


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


#: An update's default for a field it leaves alone (None is a value: `due` may be cleared).
UNCHANGED: Final = _Unchanged()


class TaskService:
    def __init__(
        self, store: TaskStore, ids: IdGenerator, clock: Clock, *, max_tasks: int = 10_000
    ) -> None:
        self.store = store
        self.ids = ids
        self.clock = clock
        #: `[tasks] max_tasks_per_user`: open and done tasks alike count.
        self.max_tasks = max_tasks

    async def add(
        self,
        owner: str,
        title: object,
        *,
        due: object = None,
        source_key: str | None = None,
        source_turn_id: str | None = None,
    ) -> Task:
        """Keep a new open task."""
        checked_title, checked_due = validate_title(title), validate_due(due)
        if source_key is not None:
            validate_session_key(source_key)
        now = self.clock.now()
        task = Task(
            task_id=self.ids.new(),
            owner=owner,
            title=checked_title,
            status="open",
            due=checked_due,
            source_key=source_key,
            source_turn_id=source_turn_id,
            created_at=now,
            updated_at=now,
            completed_at=None,
        )
        if not await self.store.add_task(task, self.max_tasks):
            raise TaskLimitReached(
                f"you have {self.max_tasks} tasks (open and done), the most one user may"
                " keep here; the gateway's [tasks] max_tasks_per_user sets that number"
            )
        return task

    async def get(self, owner: str, task_id: object) -> Task:
        """The owner's task; TaskNotFound for an unknown id or someone else's."""
        checked = validate_task_id(task_id)
        task = await self.store.get_task(owner, checked)
        if task is None:
            raise TaskNotFound(f"no task {checked}")
        return task

    async def list_tasks(
        self,
        owner: str,
        status: object = None,
        *,
        limit: object = None,
        after: object = None,
    ) -> list[Task]:
        """A page of the owner's tasks (of one status, or all when None), oldest first;
        `after`: the last id of the previous page."""
        wanted: TaskStatus | None = None if status is None else validate_status(status)
        size = validate_page_size(limit)
        cursor = None if after is None else validate_task_id(after)
        return await self.store.list_tasks(owner, wanted, size, cursor)

    async def update(
        self,
        owner: str,
        task_id: object,
        *,
        title: object = UNCHANGED,
        status: object = UNCHANGED,
        due: object = UNCHANGED,
    ) -> Task:
        """Change the title, the status or the due date (None clears it); the task as it
        now is. An update that names nothing to change is refused."""
        checked = validate_task_id(task_id)
        if title is UNCHANGED and status is UNCHANGED and due is UNCHANGED:
            raise InvalidInput(
                "name at least one of title, status and due to change", code="empty_update"
            )
        update = TaskUpdate(
            title=None if title is UNCHANGED else validate_title(title),
            status=None if status is UNCHANGED else validate_status(status),
            due=None if due is UNCHANGED else validate_due(due),
            change_due=due is not UNCHANGED,
        )
        task = await self.store.update_task(owner, checked, update, self.clock.now())
        if task is None:
            raise TaskNotFound(f"no task {checked}")
        return task

    async def complete(self, owner: str, task_id: object) -> Task:
        return await self.update(owner, task_id, status="done")

    async def erase_user(self, owner: str) -> int:
        """Remove every task of a user being erased; how many went. (Erasing a key does
        not come here: its tasks are the user's.)"""
        return await self.store.delete_tasks_of(owner)


def _iso(value: datetime) -> str:
    # The API's spelling of an instant (api/schemas.py `iso`), kept here so the tools'
    # `data` and the HTTP answers agree without the service importing the API.
    return value.isoformat().replace("+00:00", "Z")


def task_json(task: Task) -> dict[str, Any]:
    """A task as `/v1/tasks` answers it and the tools report it in `data`."""
    source = None
    if task.source_key is not None or task.source_turn_id is not None:
        source = {"key": task.source_key, "turn_id": task.source_turn_id}
    return {
        "id": task.task_id,
        "title": task.title,
        "status": task.status,
        "due": None if task.due is None else task.due.isoformat(),
        "source": source,
        "created_at": _iso(task.created_at),
        "updated_at": _iso(task.updated_at),
    }


def build_task_service(
    store: Store, clock: Clock, ids: IdGenerator, *, max_tasks: int = 10_000
) -> TaskService:
    """The task rows beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    rows: TaskStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.tasks import SQLiteTaskStore

        rows = SQLiteTaskStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.store import PostgresStore
        from sessiongate.store.postgres.tasks import PostgresTaskStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no task store for {type(store).__name__}")
        rows = PostgresTaskStore(store)
    return TaskService(rows, ids, clock, max_tasks=max_tasks)
