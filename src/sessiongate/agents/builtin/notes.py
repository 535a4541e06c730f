"""`notes_search` and `notes_add`: the caller's own notes (DESIGN.md §7, seed 002's notes
search: the top chunks with their source).

Both act for `ToolContext.user` only; nothing a model sends can name another user. What
the model reads is plain text (each chunk under its title and source); the same results
go to `data` as JSON for clients and the stored tool message.

Registered as their own tool source, "builtin-notes", apart from the web-facing built-ins
("builtin-web"); each tool still reports its `source` as "builtin".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sessiongate.agents.builtin.arguments import parse_arguments, schema_of
from sessiongate.agents.tools import (
    FunctionTool,
    StaticToolSource,
    ToolContext,
    ToolFailed,
    ToolOutput,
)
from sessiongate.core.notes import MAX_LIMIT, MAX_TITLE_CHARS
from sessiongate.errors import SessionGateError
from sessiongate.models.base import ToolSpec
from sessiongate.service.notes import NoteService, SearchResult, hits_as_json

SOURCE_NAME = "builtin-notes"
SEARCH = "notes_search"
ADD = "notes_add"
#: What one query may be: a question or a few keywords, not a document.
MAX_TOOL_QUERY_CHARS = 2000


class NotesSearchArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=MAX_TOOL_QUERY_CHARS,
        description="What to look for: a question or a few keywords.",
    )
    limit: int | None = Field(
        None, ge=1, le=MAX_LIMIT, description="How many passages to return (default 5)."
    )


class NotesAddArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, description="The note's text (Markdown is fine).")
    title: str | None = Field(
        None, max_length=MAX_TITLE_CHARS, description="A short title for the note."
    )


def _failed(exc: SessionGateError) -> ToolFailed:
    return ToolFailed(exc.message)


def search_report(query: str, result: SearchResult) -> str:
    """The text the model reads: each passage under a header naming its source."""
    if not result.hits:
        return f"No notes match {query!r}."
    lines = [f"{len(result.hits)} passages from the user's notes for {query!r}, best first:"]
    for number, hit in enumerate(result.hits, start=1):
        label = " — ".join(part for part in (hit.title, hit.source) if part) or "untitled note"
        lines.append(f"\n[{number}] {label} (note {hit.note_id}, score {hit.score:g})")
        lines.append(hit.content)
    return "\n".join(lines)


def notes_tools(notes: NoteService) -> list[FunctionTool]:
    default_limit = notes.config.top_k

    async def search(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(NotesSearchArguments, arguments)
        try:
            result = await notes.search(context.user, wanted.query, wanted.limit)
        except SessionGateError as exc:
            raise _failed(exc) from None
        return ToolOutput(
            search_report(wanted.query, result),
            data={
                "query": wanted.query,
                "semantic": result.semantic,
                "results": hits_as_json(result.hits),
            },
        )

    async def add(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(NotesAddArguments, arguments)
        try:
            note = await notes.add(context.user, wanted.content, title=wanted.title)
        except SessionGateError as exc:
            raise _failed(exc) from None
        label = f" {note.title!r}" if note.title else ""
        return ToolOutput(
            f"Saved the note{label} (id {note.note_id}).",
            data={
                "id": note.note_id,
                "title": note.title,
                "source": note.source,
                "created_at": note.created_at.isoformat(),
            },
        )

    return [
        FunctionTool(
            ToolSpec(
                SEARCH,
                "Search the user's own notes. Returns the best-matching passages, each with"
                f" its title and source (the {default_limit} best unless `limit` says"
                " otherwise).",
                schema_of(NotesSearchArguments),
            ),
            search,
        ),
        FunctionTool(
            ToolSpec(
                ADD,
                "Save a new note for the user (something to remember, a summary, a list).",
                schema_of(NotesAddArguments),
            ),
            add,
        ),
    ]


def notes_tool_source(notes: NoteService) -> StaticToolSource:
    return StaticToolSource(SOURCE_NAME, notes_tools(notes))
