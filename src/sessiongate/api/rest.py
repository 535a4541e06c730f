"""The v1 session endpoints (DESIGN.md §5), translated onto the session and turn services."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from sessiongate.api.auth import CurrentUser, caller_for, routes_of
from sessiongate.api.limits import import_lines
from sessiongate.api.schemas import (
    AttachmentBody,
    ChatBody,
    MessageBody,
    PatchBody,
    RecallBody,
    context_json,
    decode_attachments,
    fragment_json,
    iso,
    message_json,
    rotation_json,
    segment_json,
)
from sessiongate.api.turns import run_http_turn
from sessiongate.core.attachments import ImageAttachment
from sessiongate.core.titles import validate_title
from sessiongate.errors import InvalidInput
from sessiongate.service.engine import Engine
from sessiongate.service.idempotency import idempotent_request
from sessiongate.service.turn.pipeline import InboundTurn, RecallRequest

router = APIRouter(prefix="/v1")

#: `?owner=NAME`: an admin addresses another user's key (to read or erase it).
Owner = Annotated[str | None, Query(max_length=64)]
MAX_CURSOR = 2**63 - 1


def writable(key: str, user: CurrentUser, owner: str | None) -> None:
    """Write routes accept `?owner=` only to refuse it clearly (403), rather than ignore
    it and write into the caller's own key of that name."""
    if owner is not None:
        caller_for(user).key(key, owner=owner, write=True)


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def attachments_of(
    engine: Engine, bodies: list[AttachmentBody] | None
) -> tuple[ImageAttachment, ...]:
    limits = engine.settings.limits
    return decode_attachments(
        bodies, max_count=limits.max_attachments, max_bytes=limits.max_attachment_bytes
    )


#: `Idempotency-Key`: a retried request returns the first one's turn (docs/api.md).
IdempotencyKey = Annotated[str | None, Header()]
#: What a retry with the same key must repeat (`stream` may differ).
_NOT_HASHED = {"stream", "client_message_id"}


@router.post("/chat")
async def chat(
    body: ChatBody, user: CurrentUser, request: Request, idempotency_key: IdempotencyKey = None
) -> Response:
    """A routed turn: the configured routes (seed 000's table by default) pick agent and
    key from the user, the mode, the channel and the device."""
    engine = engine_of(request)
    decision = await routes_of(engine).decide(
        user, channel=body.channel or "http", mode=body.mode, device=body.device_id
    )
    metadata: dict[str, Any] = {"channel": body.channel or "http"}
    if body.device_id is not None:
        metadata["device_id"] = body.device_id
    if body.mode is not None and decision.mode != body.mode:
        metadata["requested_mode"] = body.mode
    inbound = InboundTurn(
        decision.key,
        caller_for(user),
        body.content,
        agent=decision.agent,
        metadata=metadata,
        route=decision,
        attachments=attachments_of(engine, body.attachments),
        speak=body.speak,
    )
    idempotent = idempotent_request(
        user.name,
        idempotency_key,
        body.client_message_id,
        "chat",
        body.model_dump(exclude=_NOT_HASHED),
    )
    return await run_http_turn(
        engine,
        inbound,
        stream=body.stream,
        idempotent=idempotent,
        last_event_id=request.headers.get("last-event-id"),
    )


@router.post("/sessions/{key}/messages")
async def post_message(
    key: str,
    body: MessageBody,
    user: CurrentUser,
    request: Request,
    owner: Owner = None,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    writable(key, user, owner)
    recall = None
    if body.recall is not None:
        recall = RecallRequest(
            body.recall.query, body.recall.rationale, body.recall.limit, body.recall.scope
        )
    engine = engine_of(request)
    inbound = InboundTurn(
        key,
        caller_for(user),
        body.content,
        agent=body.agent,
        recall=recall,
        attachments=attachments_of(engine, body.attachments),
        speak=body.speak,
    )
    idempotent = idempotent_request(
        user.name,
        idempotency_key,
        body.client_message_id,
        f"messages:{key}",
        body.model_dump(exclude=_NOT_HASHED),
    )
    return await run_http_turn(
        engine,
        inbound,
        stream=body.stream,
        idempotent=idempotent,
        last_event_id=request.headers.get("last-event-id"),
    )


@router.post("/sessions/{key}/new")
async def new_segment(
    key: str, user: CurrentUser, request: Request, owner: Owner = None
) -> dict[str, Any]:
    writable(key, user, owner)
    segment, record = await engine_of(request).sessions.rotate_now(key, caller_for(user))
    return {
        "session_key": key,
        "session_id": segment.session_id,
        "previous_session_id": record.from_session_id if record else None,
        "rotation": rotation_json(record) if record else None,
    }


@router.post("/sessions/{key}/revert")
async def revert(
    key: str, user: CurrentUser, request: Request, owner: Owner = None
) -> dict[str, Any]:
    writable(key, user, owner)
    segment, record = await engine_of(request).sessions.revert(key, caller_for(user))
    return {
        "session_key": key,
        "session_id": segment.session_id,
        "continues": list(segment.continues),
        "rotation": rotation_json(record),
    }


@router.post("/sessions/{key}/recall")
async def recall(
    key: str, body: RecallBody, user: CurrentUser, request: Request, owner: Owner = None
) -> dict[str, Any]:
    fragments = await engine_of(request).sessions.recall(
        key,
        caller_for(user),
        body.query,
        body.rationale,
        body.limit,
        owner=owner,
        scope=body.scope,
    )
    return {"session_key": key, "fragments": [fragment_json(f) for f in fragments]}


@router.get("/sessions")
async def list_sessions(
    user: CurrentUser,
    request: Request,
    cursor: Annotated[str | None, Query()] = None,
    limit: Annotated[str | None, Query(description="1 to 1000 keys; 100 by default")] = None,
    owner: Owner = None,
) -> dict[str, Any]:
    """A page of the caller's keys (an admin's: everyone's, or `owner`'s), by owner then
    name; `next_cursor` continues it (null on the last page)."""
    page = await engine_of(request).sessions.list_page(
        caller_for(user), owner=owner, cursor=cursor, limit=limit
    )
    return {
        "sessions": [
            {
                "key": k.key,
                "owner": k.owner,
                "latest_session_id": k.latest_session_id,
                "segment_count": k.segment_count,
                "message_count": k.message_count,
                "last_activity_at": iso(k.last_activity_at),
                "title": k.title,
            }
            for k in page.keys
        ],
        "next_cursor": page.next_cursor,
    }


@router.get("/sessions/{key}")
async def show_session(
    key: str, user: CurrentUser, request: Request, owner: Owner = None
) -> dict[str, Any]:
    view = await engine_of(request).sessions.show(key, caller_for(user), owner=owner)
    return {
        "key": view.key.key,
        "owner": view.key.owner,
        "created_at": iso(view.key.created_at),
        "latest": segment_json(view.latest),
        "segments": [segment_json(s) for s in view.segments],
        "rotations": [rotation_json(r) for r in view.rotations],
        "overrides": view.key.overrides,
        "title": view.title,
    }


@router.get("/sessions/{key}/segments/{session_id}/messages")
async def list_messages(
    key: str,
    session_id: str,
    user: CurrentUser,
    request: Request,
    after: Annotated[int, Query(ge=0, le=MAX_CURSOR)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    owner: Owner = None,
) -> dict[str, Any]:
    messages = await engine_of(request).sessions.messages(
        key, caller_for(user), session_id, after=after, limit=limit, owner=owner
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
    owner: Owner = None,
) -> dict[str, Any]:
    latest, ctx = await engine_of(request).turns.preview_context(
        key, caller_for(user), agent, owner=owner
    )
    compactor = engine_of(request).turns.compactor
    pins = await compactor.pins.pinned(latest.session_id)
    body = context_json(latest.session_id, ctx, [m.message_id for m in pins])
    # Which messages the summary in the context stands for (docs/working_set.md).
    body["summarised"] = None
    sent = [m.source.removeprefix("compaction:") for m in ctx.messages]
    for record in await compactor.records(latest.session_id, fresh=True):
        if record.compaction_id in sent:
            body["summarised"] = {
                "compaction_id": record.compaction_id,
                "first_seq": record.first_seq,
                "last_seq": record.last_seq,
                "count": record.count,
            }
    return body


@router.patch("/sessions/{key}")
async def patch_session(
    key: str, body: PatchBody, user: CurrentUser, request: Request, owner: Owner = None
) -> dict[str, Any]:
    writable(key, user, owner)
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise InvalidInput("nothing to change", code="invalid_request")
    engine = engine_of(request)
    caller = caller_for(user)
    retitle = "title" in changes
    title = validate_title(changes.pop("title", None))  # checked before anything changes
    if changes:
        if engine.turns.access is not None:
            await engine.turns.access.check_overrides(caller, changes)
        await engine.sessions.set_overrides(key, caller, changes)
    if retitle:
        await engine.sessions.set_title(key, caller, title)
    view = await engine.sessions.show(key, caller)
    return {"key": view.key.key, "overrides": view.key.overrides, "title": view.title}


@router.get("/sessions/{key}/export")
async def export_session(
    key: str, user: CurrentUser, request: Request, owner: Owner = None
) -> StreamingResponse:
    lines = await engine_of(request).sessions.export_stream(key, caller_for(user), owner=owner)
    return StreamingResponse(
        (line + "\n" async for line in lines),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{key}.jsonl"'},
    )


@router.post("/import", status_code=201)
async def import_session(
    user: CurrentUser,
    request: Request,
    key: Annotated[str | None, Query(max_length=200)] = None,
    owner: Owner = None,
) -> JSONResponse:
    """Into the caller's namespace, under the file's key name or `?key=`. Over the API
    nobody imports into another user's namespace (`?owner=` naming someone else is 403);
    the operator's `sessiongate sessions import --owner` can. The body is read as it
    arrives, within `[limits] max_import_bytes` (not max_body_bytes: exports are large)."""
    engine = engine_of(request)
    lines = import_lines(
        request.headers.get("content-length"),
        request.stream(),
        engine.settings.limits.max_import_bytes,
    )
    # Over the limit → BodyTooLarge (413) as soon as it is known; the server discards
    # the rest of the body as it arrives, so the client reads the answer, not a reset.
    record = await engine.sessions.import_chain(lines, caller_for(user), key=key, owner=owner)
    return JSONResponse(
        {"key": record.key, "owner": record.owner, "latest_session_id": record.latest_session_id},
        status_code=201,
    )


@router.delete("/sessions/{key}", status_code=204)
async def delete_session(
    key: str, user: CurrentUser, request: Request, owner: Owner = None
) -> Response:
    await engine_of(request).sessions.delete(key, caller_for(user), owner=owner)
    return Response(status_code=204)
