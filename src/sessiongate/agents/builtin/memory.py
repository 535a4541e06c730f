"""`memory_save`, `memory_search` and `memory_forget`: the caller's memory items
(DESIGN.md §13, docs/memory.md), offered to agents that list them (`memory_*`).

All act for `ToolContext.user` only; nothing a model sends can name another user, and
another user's id answers as an unknown one. `memory_save` keeps an item with
`created_by = "agent"` and the turn's key, segment and user message as its source.
`memory_search` sees only the valid items whose scope covers this agent on this key.
`memory_forget` deletes an item (the user's own `DELETE /v1/memory/{id}` does the same).

Registered as their own tool source, "builtin-memory"; each tool reports its `source`
as "builtin".
"""

from __future__ import annotations

from datetime import datetime
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
from sessiongate.core.memory import (
    MAX_MEMORY_CHARS,
    MAX_MEMORY_QUERY_CHARS,
    MAX_SEARCH_LIMIT,
    MemorySource,
    item_json,
)
from sessiongate.errors import SessionGateError
from sessiongate.models.base import ToolSpec
from sessiongate.service.memory import MemoryService
from sessiongate.service.memory_search import hits_as_json

SOURCE_NAME = "builtin-memory"
SAVE = "memory_save"
SEARCH = "memory_search"
FORGET = "memory_forget"


class MemorySaveArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        min_length=1,
        max_length=MAX_MEMORY_CHARS,
        description="One short statement about the user worth remembering, in the third"
        " person ('Prefers metric units').",
    )
    scope: Literal["user", "agent", "key"] = Field(
        "user",
        description="Where it applies: 'user' everywhere (default), 'agent' only to this"
        " assistant, 'key' only to this conversation.",
    )
    pinned: bool = Field(False, description="Always show it in every conversation.")


class MemorySearchArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=MAX_MEMORY_QUERY_CHARS,
        description="What to look for: a question or a few keywords.",
    )
    limit: int | None = Field(
        None, ge=1, le=MAX_SEARCH_LIMIT, description="How many items to return (default 10)."
    )


class MemoryForgetArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=100, description="The memory id (mem_...).")


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def memory_tools(memory: MemoryService) -> list[FunctionTool]:
    async def save(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(MemorySaveArguments, arguments)
        scope = {
            "user": "user",
            "agent": f"agent:{context.agent}",
            "key": f"key:{context.key.name}",
        }[wanted.scope]
        source = MemorySource(
            context.key.name,
            context.session_id,
            () if context.message_id is None else (context.message_id,),
        )
        try:
            item = await memory.add(
                context.user,
                wanted.text,
                scope=scope,
                pinned=wanted.pinned,
                source=source,
                created_by="agent",
            )
        except SessionGateError as exc:
            raise ToolFailed(exc.message) from None
        return ToolOutput(
            f"Remembered (id {item.memory_id}): {item.text}", data=item_json(item, _iso)
        )

    async def search(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(MemorySearchArguments, arguments)
        try:
            result = await memory.searcher.search(
                context.user,
                wanted.query,
                wanted.limit,
                agent=context.agent,
                key=context.key.name,
            )
        except SessionGateError as exc:
            raise ToolFailed(exc.message) from None
        if result.hits:
            lines = [f"{len(result.hits)} memory items for {wanted.query!r}, best first:"]
            lines.extend(f"- [{h.item.memory_id}] {h.item.text}" for h in result.hits)
            report = "\n".join(lines)
        else:
            report = f"No memory items match {wanted.query!r}."
        return ToolOutput(
            report,
            data={
                "query": wanted.query,
                "semantic": result.semantic,
                "results": hits_as_json(result.hits, _iso),
            },
        )

    async def forget(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(MemoryForgetArguments, arguments)
        try:
            gone = await memory.forget(context.user, wanted.id)
        except SessionGateError as exc:
            raise ToolFailed(exc.message) from None
        return ToolOutput(
            f"Forgot {gone[0].memory_id}.",
            data={"forgotten": [item.memory_id for item in gone]},
        )

    return [
        FunctionTool(
            ToolSpec(
                SAVE,
                "Remember one durable fact or preference about the user for later"
                " conversations. The user can see, edit and forget what is saved.",
                schema_of(MemorySaveArguments),
            ),
            save,
        ),
        FunctionTool(
            ToolSpec(
                SEARCH,
                "Search what you remember about the user. Returns the best-matching"
                " memory items with their ids.",
                schema_of(MemorySearchArguments),
            ),
            search,
        ),
        FunctionTool(
            ToolSpec(
                FORGET,
                "Forget a memory item by its id (mem_...), when the user asks you to or it"
                " is no longer true.",
                schema_of(MemoryForgetArguments),
            ),
            forget,
        ),
    ]


def memory_tool_source(memory: MemoryService) -> StaticToolSource:
    return StaticToolSource(SOURCE_NAME, memory_tools(memory))
