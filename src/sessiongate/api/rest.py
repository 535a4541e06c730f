"""The v1 session endpoints (DESIGN.md §5), translated onto the session and turn services."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from sessiongate.api.auth import CurrentUser, caller_for, route_key
from sessiongate.api.schemas import (
    ChatBody,
    MessageBody,
    PatchBody,
    RecallBody,
    context_json,
    fragment_json,
    iso,
    message_json,
    rotation_json,
    segment_json,
)
from sessiongate.api.turns import run_http_turn
from sessiongate.errors import InvalidInput, NotFound
from sessiongate.service.engine import Engine
from sessiongate.service.turns import InboundTurn, RecallRequest

router = APIRouter(prefix="/v1")


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


@router.post("/chat")
async def chat(body: ChatBody, user: CurrentUser, request: Request) -> Response:
    """A routed turn: the primary user's main session, or the user's own."""
    metadata: dict[str, Any] = {
        k: v
        for k, v in (("mode", body.mode), ("channel", body.channel), ("device_id", body.device_id))
        if v is not None
    }
    inbound = InboundTurn(route_key(user), caller_for(user), body.content, metadata=metadata)
    return await run_http_turn(engine_of(request), inbound, stream=body.stream)


@router.post("/sessions/{key}/messages")
async def post_message(
    key: str, body: MessageBody, user: CurrentUser, request: Request
) -> Response:
    recall = None
    if body.recall is not None:
        recall = RecallRequest(body.recall.query, body.recall.rationale, body.recall.limit)
    inbound = InboundTurn(key, caller_for(user), body.content, agent=body.agent, recall=recall)
    return await run_http_turn(engine_of(request), inbound, stream=body.stream)


@router.post("/sessions/{key}/new")
async def new_segment(key: str, user: CurrentUser, request: Request) -> dict[str, Any]:
    segment, record = await engine_of(request).sessions.rotate_now(key, caller_for(user))
    return {
        "session_key": key,
        "session_id": segment.session_id,
        "previous_session_id": record.from_session_id if record else None,
        "rotation": rotation_json(record) if record else None,
    }


@router.post("/sessions/{key}/revert")
async def revert(key: str, user: CurrentUser, request: Request) -> dict[str, Any]:
    segment, record = await engine_of(request).sessions.revert(key, caller_for(user))
    return {
        "session_key": key,
        "session_id": segment.session_id,
        "continues": list(segment.continues),
        "rotation": rotation_json(record),
    }


@router.post("/sessions/{key}/recall")
async def recall(key: str, body: RecallBody, user: CurrentUser, request: Request) -> dict[str, Any]:
    fragments = await engine_of(request).sessions.recall(
        key, caller_for(user), body.query, body.rationale, body.limit
    )
    return {"session_key": key, "fragments": [fragment_json(f) for f in fragments]}


@router.get("/sessions")
async def list_sessions(user: CurrentUser, request: Request) -> dict[str, Any]:
    keys = await engine_of(request).sessions.list_keys(caller_for(user))
    return {
        "sessions": [
            {
                "key": k.key,
                "owner": k.owner,
                "latest_session_id": k.latest_session_id,
                "segment_count": k.segment_count,
                "message_count": k.message_count,
                "last_activity_at": iso(k.last_activity_at),
            }
            for k in keys
        ]
    }


@router.get("/sessions/{key}")
async def show_session(key: str, user: CurrentUser, request: Request) -> dict[str, Any]:
    view = await engine_of(request).sessions.show(key, caller_for(user))
    return {
        "key": view.key.key,
        "owner": view.key.owner,
        "created_at": iso(view.key.created_at),
        "latest": segment_json(view.latest),
        "segments": [segment_json(s) for s in view.segments],
        "rotations": [rotation_json(r) for r in view.rotations],
        "overrides": view.key.overrides,
    }


@router.get("/sessions/{key}/segments/{session_id}/messages")
async def list_messages(
    key: str,
    session_id: str,
    user: CurrentUser,
    request: Request,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    messages = await engine_of(request).sessions.messages(
        key, caller_for(user), session_id, after=after, limit=limit
    )
    return {
        "session_id": session_id,
        "messages": [message_json(m) for m in messages],
        "next_after": messages[-1].seq if len(messages) == limit else None,
    }


@router.get("/sessions/{key}/context")
async def show_context(
    key: str,
    user: CurrentUser,
    request: Request,
    agent: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    engine = engine_of(request)
    ctx = await engine.turns.preview_context(key, caller_for(user), agent)
    latest = await engine.store.latest_segment(key)
    return context_json(latest.session_id, ctx)


@router.patch("/sessions/{key}")
async def patch_session(
    key: str, body: PatchBody, user: CurrentUser, request: Request
) -> dict[str, Any]:
    engine = engine_of(request)
    changes = body.model_dump(exclude_unset=True)
    known_models = set(engine.turns.models)
    for field in ("reply_model", "control_model"):
        name = changes.get(field)
        allowed = (
            known_models | set(engine.turns.judges) if field == "control_model" else known_models
        )
        if name is not None and name not in allowed:
            raise NotFound(f"{field} {name!r} is not a configured model", code="model_not_found")
    if not changes:
        raise InvalidInput("nothing to change", code="invalid_request")
    record = await engine.sessions.set_overrides(key, caller_for(user), changes)
    return {"key": record.key, "overrides": record.overrides}


@router.get("/sessions/{key}/export")
async def export_session(key: str, user: CurrentUser, request: Request) -> StreamingResponse:
    lines = await engine_of(request).sessions.export(key, caller_for(user))
    return StreamingResponse(
        (line + "\n" for line in lines),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{key}.jsonl"'},
    )


@router.post("/import", status_code=201)
async def import_session(user: CurrentUser, request: Request) -> JSONResponse:
    body = await request.body()
    record = await engine_of(request).sessions.import_chain(body.split(b"\n"), caller_for(user))
    return JSONResponse(
        {"key": record.key, "owner": record.owner, "latest_session_id": record.latest_session_id},
        status_code=201,
    )


@router.delete("/sessions/{key}", status_code=204)
async def delete_session(key: str, user: CurrentUser, request: Request) -> Response:
    await engine_of(request).sessions.delete(key, caller_for(user))
    return Response(status_code=204)
