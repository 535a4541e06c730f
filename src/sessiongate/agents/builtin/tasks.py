"""`tasks_add`, `tasks_list` and `tasks_complete`: the caller's own tasks (DESIGN.md §7).

All three act for `ToolContext.user` only; nothing a model sends can name another user,
and another user's task id answers as an unknown one. A task made here records the key
and turn it came from. What the model reads is a short plain-text line or list; the same
tasks go to `data` in the JSON shape `/v1/tasks` answers.

Registered as their own tool source, "builtin-tasks", apart from the web-facing built-ins
and the notes; each tool still reports its `source` as "builtin".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sessiongate.agents.builtin.arguments import parse_arguments, schema_of
from sessiongate.agents.tools import (
    FunctionTool,
    StaticToolSource,
    ToolContext,
    ToolFailed,
    ToolOutput,
)
from sessiongate.core.tasks import MAX_TITLE_CHARS
from sessiongate.errors import SessionGateError
from sessiongate.models.base import ToolSpec
from sessiongate.service.tasks import TaskService, task_json
from sessiongate.store.tasks import Task

SOURCE_NAME = "builtin-tasks"
ADD = "tasks_add"
LIST = "tasks_list"
COMPLETE = "tasks_complete"
#: Tasks one `tasks_list` call shows: enough for a model to act on, short enough for its
#: context. More are counted, not listed.
MAX_LISTED = 50


class TasksAddArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(
        min_length=1, max_length=MAX_TITLE_CHARS, description="What is to be done, in one line."
    )
    due: str | None = Field(
        None,
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
        description="The date it is due, YYYY-MM-DD; leave out when there is none.",
    )


class TasksListArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["open", "done", "all"] = Field(
        "open", description="Which tasks: open (the default), done, or all."
    )


class TasksCompleteArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1,
        max_length=64,
        description="The task's id, as tasks_list or tasks_add gave it.",
    )


def describe(task: Task) -> str:
    """One task as the model reads it: `[id] title (due …, done)`."""
    details = []
    if task.due is not None:
        details.append(f"due {task.due.isoformat()}")
    if task.status == "done":
        details.append("done")
    suffix = f" ({', '.join(details)})" if details else ""
    return f"[{task.task_id}] {task.title}{suffix}"


def tasks_tools(tasks: TaskService) -> list[FunctionTool]:
    async def add(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(TasksAddArguments, arguments)
        try:
            task = await tasks.add(
                context.user,
                wanted.title,
                due=wanted.due,
                source_key=context.key.name,
                source_turn_id=context.turn_id,
            )
        except SessionGateError as exc:
            raise ToolFailed(exc.message) from None
        return ToolOutput(f"Added the task {describe(task)}.", data=task_json(task))

    async def list_tasks(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(TasksListArguments, arguments)
        status = None if wanted.status == "all" else wanted.status
        # One more than is shown, to say whether there are more.
        found = await tasks.list_tasks(context.user, status, limit=MAX_LISTED + 1)
        shown = found[:MAX_LISTED]
        label = "" if status is None else f"{status} "
        if not shown:
            text = f"The user has no {label}tasks."
        else:
            lines = [f"The user's {label}tasks, oldest first:"]
            lines += [f"- {describe(task)}" for task in shown]
            if len(found) > MAX_LISTED:
                lines.append(f"(only the first {MAX_LISTED} are listed; there are more)")
            text = "\n".join(lines)
        return ToolOutput(
            text,
            data={"tasks": [task_json(task) for task in shown], "more": len(found) > MAX_LISTED},
        )

    async def complete(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(TasksCompleteArguments, arguments)
        try:
            task = await tasks.complete(context.user, wanted.id)
        except SessionGateError as exc:
            raise ToolFailed(exc.message) from None
        return ToolOutput(f"Marked the task {describe(task)}.", data=task_json(task))

    return [
        FunctionTool(
            ToolSpec(
                ADD,
                "Add a task to the user's to-do list, with an optional due date.",
                schema_of(TasksAddArguments),
            ),
            add,
        ),
        FunctionTool(
            ToolSpec(
                LIST,
                "List the user's tasks with their ids (open ones unless `status` says"
                f" otherwise; at most {MAX_LISTED}).",
                schema_of(TasksListArguments),
            ),
            list_tasks,
        ),
        FunctionTool(
            ToolSpec(
                COMPLETE,
                "Mark one of the user's tasks as done, by its id.",
                schema_of(TasksCompleteArguments),
            ),
            complete,
        ),
    ]


def tasks_tool_source(tasks: TaskService) -> StaticToolSource:
    return StaticToolSource(SOURCE_NAME, tasks_tools(tasks))
