"""`/v1/notes`: the caller's own notes (DESIGN.md §7).

    POST   /v1/notes {content, title?, source?}  -> 201 {id, title, source, created_at}
    GET    /v1/notes?query=&limit=               -> {notes: [{id, title, source, content, score}]}
    GET    /v1/notes?limit=&before=              -> {notes: [...newest first], next_before}
    DELETE /v1/notes/{id}                        -> 204

Always the caller's notes: there is no `?owner=`, and another user's note answers 404
`note_not_found` exactly like an unknown id. The body's fields are checked by the note
service (core/notes.py), so the API and the tools refuse the same things with the same
codes; the body model only insists on their JSON types.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from sessiongate.api.auth import CurrentUser
from sessiongate.api.schemas import iso
from sessiongate.core.notes import Note
from sessiongate.service.engine import Engine
from sessiongate.service.notes import DEFAULT_PAGE, NoteNotFound, NoteService, hits_as_json

router = APIRouter(prefix="/v1")


class NoteBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    content: str
    title: str | None = None
    source: str | None = None


def notes_of(request: Request) -> NoteService:
    engine: Engine = request.app.state.engine
    if engine.notes is None:  # an engine built without notes has none to find
        raise NoteNotFound("no notes here")
    return engine.notes


def note_json(note: Note, *, content: bool) -> dict[str, Any]:
    shown: dict[str, Any] = {"id": note.note_id, "title": note.title, "source": note.source}
    if content:
        shown["content"] = note.content
    shown["created_at"] = iso(note.created_at)
    return shown


@router.post("/notes", status_code=201)
async def add_note(body: NoteBody, user: CurrentUser, request: Request) -> JSONResponse:
    note = await notes_of(request).add(
        user.name, body.content, title=body.title, source=body.source
    )
    return JSONResponse(note_json(note, content=False), status_code=201)


@router.get("/notes")
async def list_or_search_notes(
    user: CurrentUser,
    request: Request,
    # Bounds are the service's (`invalid_query`, `invalid_limit`, `invalid_note_id`); the
    # request line's own cap (limits.max_header_bytes) bounds what reaches it.
    query: str | None = None,
    limit: int | None = None,
    before: str | None = None,
) -> dict[str, Any]:
    notes = notes_of(request)
    if query is not None:
        result = await notes.search(user.name, query, limit)
        return {"notes": hits_as_json(result.hits), "semantic": result.semantic}
    page = await notes.list_notes(user.name, limit=limit, before=before)
    wanted = DEFAULT_PAGE if limit is None else limit
    return {
        "notes": [note_json(note, content=True) for note in page],
        # The cursor for the next page; None once a page comes back short.
        "next_before": page[-1].note_id if page and len(page) == wanted else None,
    }


@router.delete("/notes/{note_id}", status_code=204)
async def delete_note(note_id: str, user: CurrentUser, request: Request) -> Response:
    await notes_of(request).delete(user.name, note_id)
    return Response(status_code=204)
