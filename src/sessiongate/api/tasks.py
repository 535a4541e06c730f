"""`/v1/tasks`: the caller's own tasks (DESIGN.md §7).

    GET   /v1/tasks?status=&limit=&after=   -> {tasks: [...oldest first], next_after}
    POST  /v1/tasks {title, due?}           -> 201 {id, title, status, due, source, ...}
    PATCH /v1/tasks/{id} {status?, title?, due?}  -> the task as it now is

Always the caller's tasks: there is no `?owner=`, and another user's task answers 404
`task_not_found` exactly like an unknown id. The bodies' fields are checked by the task
service (core/tasks.py), so the API and the tools refuse the same things with the same
codes; the body models only insist on their JSON types and refuse unknown fields.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from sessiongate.api.auth import CurrentUser
from sessiongate.core.tasks import DEFAULT_PAGE
from sessiongate.service.engine import Engine
from sessiongate.service.tasks import TaskNotFound, TaskService, task_json

router = APIRouter(prefix="/v1")


class NewTaskBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    title: str
    due: str | None = None


class TaskChangesBody(BaseModel):
    """Only the fields sent change; `"due": null` clears the due date."""

    model_config = ConfigDict(extra="forbid", strict=True)

    title: str | None = None
    status: str | None = None
    due: str | None = None


def tasks_of(request: Request) -> TaskService:
    engine: Engine = request.app.state.engine
    if engine.tasks is None:  # an engine built without tasks has none to find
        raise TaskNotFound("no tasks here")
    return engine.tasks


@router.get("/tasks")
async def list_tasks(
    user: CurrentUser,
    request: Request,
    # Bounds are the service's (`invalid_status`, `invalid_limit`, `invalid_task_id`); the
    # request line's own cap (limits.max_header_bytes) bounds what reaches it.
    status: str | None = None,
    limit: int | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    page = await tasks_of(request).list_tasks(user.name, status, limit=limit, after=after)
    wanted = DEFAULT_PAGE if limit is None else limit
    return {
        "tasks": [task_json(task) for task in page],
        # The cursor for the next page; None once a page comes back short.
        "next_after": page[-1].task_id if page and len(page) == wanted else None,
    }


@router.post("/tasks", status_code=201)
async def add_task(body: NewTaskBody, user: CurrentUser, request: Request) -> JSONResponse:
    task = await tasks_of(request).add(user.name, body.title, due=body.due)
    return JSONResponse(task_json(task), status_code=201)


@router.patch("/tasks/{task_id}")
async def update_task(
    task_id: str, body: TaskChangesBody, user: CurrentUser, request: Request
) -> dict[str, Any]:
    # Only what the body holds changes: a field left out is not a field set to null.
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    task = await tasks_of(request).update(user.name, task_id, **changes)
    return task_json(task)
