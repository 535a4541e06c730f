"""`/v1/memory`: the caller's memory items (DESIGN.md §13, docs/memory.md).

    GET    /v1/memory?include_invalid=&scope=&limit=&before=  -> {items, next_before}
    POST   /v1/memory {text, scope?, pinned?}                  -> 201 the item
    GET    /v1/memory/search?q=&limit=                         -> {items: [... score], semantic}
    GET    /v1/memory/export                                   -> the export document
    POST   /v1/memory/import (an export document)              -> 201 {imported, items}
    GET    /v1/memory/{id}                                     -> the item (valid or not)
    PATCH  /v1/memory/{id} {text?, pinned?, scope?}            -> the item as it now is
    DELETE /v1/memory/{id}                                     -> 204 (forgotten)

Always the caller's own memory, as for notes: there is no `?user=`/`?owner=` (an admin
reads nobody's memory over the API; the operator's CLI can), and another user's item
answers 404 `memory_not_found` exactly like an unknown id. The body models insist only
on JSON types; the service (core/memory.py) refuses bad values with the same codes the
tools and the CLI get.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from sessiongate.api.auth import CurrentUser
from sessiongate.api.schemas import iso
from sessiongate.core.memory import MemoryItem, item_json
from sessiongate.core.memory_exchange import export_document, parse_export
from sessiongate.errors import InvalidInput
from sessiongate.service.engine import Engine
from sessiongate.service.memory import (
    DEFAULT_PAGE,
    UNSET,
    MemoryNotFound,
    MemoryService,
)
from sessiongate.service.memory_search import hits_as_json

router = APIRouter(prefix="/v1")


class MemoryBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str
    scope: str | None = None
    pinned: bool = False


class MemoryPatch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | None = None
    scope: str | None = None
    pinned: bool | None = None


def memory_of(request: Request) -> MemoryService:
    engine: Engine = request.app.state.engine
    if engine.memory is None:  # an engine built without memory has none to find
        raise MemoryNotFound("no memory here")
    return engine.memory


def shown(item: MemoryItem) -> dict[str, Any]:
    return item_json(item, _iso)


def _iso(value: Any) -> str:
    return str(iso(value))


@router.get("/memory")
async def list_memory(
    user: CurrentUser,
    request: Request,
    include_invalid: bool = False,
    scope: Annotated[str | None, Query(max_length=300)] = None,
    limit: int | None = None,
    before: Annotated[str | None, Query(max_length=100)] = None,
) -> dict[str, Any]:
    page = await memory_of(request).list_items(
        user.name, include_invalid=include_invalid, scope=scope, limit=limit, before=before
    )
    wanted = DEFAULT_PAGE if limit is None else limit
    return {
        "items": [shown(item) for item in page],
        # The cursor for the next page; None once a page comes back short.
        "next_before": page[-1].memory_id if page and len(page) == wanted else None,
    }


@router.post("/memory", status_code=201)
async def add_memory(body: MemoryBody, user: CurrentUser, request: Request) -> JSONResponse:
    item = await memory_of(request).add(
        user.name, body.text, scope=body.scope, pinned=body.pinned, created_by="user"
    )
    return JSONResponse(shown(item), status_code=201)


@router.get("/memory/search")
async def search_memory(
    user: CurrentUser,
    request: Request,
    # The service's bounds (`invalid_query`, `invalid_limit`); the request line's own cap
    # (limits.max_header_bytes) bounds what reaches it.
    q: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    result = await memory_of(request).searcher.search(user.name, q, limit)
    return {"items": hits_as_json(result.hits, _iso), "semantic": result.semantic}


@router.get("/memory/export")
async def export_memory(user: CurrentUser, request: Request) -> JSONResponse:
    items = await memory_of(request).export_items(user.name)
    return JSONResponse(
        export_document(items, _iso),
        headers={"Content-Disposition": 'attachment; filename="memory.json"'},
    )


@router.post("/memory/import", status_code=201)
async def import_memory(user: CurrentUser, request: Request) -> JSONResponse:
    # The body is bounded by [limits] max_body_bytes like every JSON body.
    document = await _json_body(request)
    items = await memory_of(request).import_items(user.name, parse_export(document))
    return JSONResponse(
        {"imported": len(items), "items": [shown(item) for item in items]}, status_code=201
    )


@router.get("/memory/{memory_id}")
async def get_memory(memory_id: str, user: CurrentUser, request: Request) -> dict[str, Any]:
    return shown(await memory_of(request).get(user.name, memory_id))


@router.patch("/memory/{memory_id}")
async def patch_memory(
    memory_id: str, body: MemoryPatch, user: CurrentUser, request: Request
) -> dict[str, Any]:
    given = body.model_dump(exclude_unset=True)
    if not given:
        raise InvalidInput("nothing to change: give text, pinned or scope", code="invalid_request")
    item = await memory_of(request).patch(
        user.name,
        memory_id,
        text=given.get("text", UNSET),
        pinned=given.get("pinned", UNSET),
        scope=given.get("scope", UNSET),
    )
    return shown(item)


@router.delete("/memory/{memory_id}", status_code=204)
async def forget_memory(memory_id: str, user: CurrentUser, request: Request) -> Response:
    await memory_of(request).forget(user.name, memory_id)
    return Response(status_code=204)


async def _json_body(request: Request) -> object:
    try:
        return orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        raise InvalidInput("the body is not JSON", code="invalid_json") from None
