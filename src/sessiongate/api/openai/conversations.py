"""OpenAI's Conversations API (DESIGN.md §14): `POST /v1/conversations`, `GET`, `POST`
(metadata) and `DELETE /v1/conversations/{id}`, `GET|POST /v1/conversations/{id}/items`,
`GET|DELETE /v1/conversations/{id}/items/{item_id}`. A conversation is a key of its
owner's (service/conversation_objects.py); another user's id answers as an unknown one.
Errors in OpenAI's shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sessiongate.api.auth import CurrentUser, caller_for
from sessiongate.api.openai.response_render import (
    OpenAIError,
    not_found,
    openai_error,
    page_params,
)
from sessiongate.api.openai.responses import responses_of
from sessiongate.core.conversation_items import page_of
from sessiongate.core.responses import InvalidResponseInput, input_messages
from sessiongate.core.segments import Role
from sessiongate.core.users import Caller
from sessiongate.errors import SessionGateError
from sessiongate.service.conversation_objects import (
    MAX_NEW_ITEMS,
    ConversationObject,
    ConversationObjects,
)
from sessiongate.service.engine import Engine

router = APIRouter(prefix="/v1")

Body = TypeVar("Body", bound=BaseModel)


class ConversationBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    items: list[dict[str, Any]] | None = Field(None, max_length=MAX_NEW_ITEMS)
    metadata: dict[str, str] | None = Field(None, max_length=16)


class ItemsBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    items: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_NEW_ITEMS)


def objects_of(request: Request) -> ConversationObjects:
    state = request.app.state
    found: ConversationObjects | None = getattr(state, "conversation_objects", None)
    if found is None:
        engine: Engine = state.engine
        if engine.conversations is None:
            raise RuntimeError("this engine was built without conversations")
        rows = responses_of(request).store
        found = ConversationObjects(rows, engine.sessions, engine.conversations)
        state.conversation_objects = found
    return found


async def _body(request: Request, model: type[Body]) -> Body:
    try:
        raw = orjson.loads(await request.body() or b"{}")
        return model.model_validate(raw)
    except orjson.JSONDecodeError:
        raise OpenAIError(400, "The request body is not valid JSON.", "invalid_json") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        param = ".".join(str(p) for p in error.get("loc", ())) or None
        message = f"Invalid value for '{param}': {error.get('msg', 'invalid')}"
        raise OpenAIError(400, message, "invalid_value", param) from None


def shown(conversation: ConversationObject) -> dict[str, Any]:
    return {
        "id": conversation.conversation_id,
        "object": "conversation",
        "created_at": int(conversation.created_at.timestamp()),
        "metadata": conversation.metadata,
    }


async def _found(request: Request, caller: Caller, conversation_id: str) -> ConversationObject:
    found = await objects_of(request).get(caller, conversation_id)
    if found is None:
        raise not_found("Conversation", conversation_id)
    return found


def _messages(items: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return input_messages(items) if items else []


async def _answer(
    request: Request, user: Any, work: Callable[[Caller], Awaitable[Response]]
) -> Response:
    try:
        return await work(caller_for(user))
    except OpenAIError as exc:
        return exc.response()
    except InvalidResponseInput as exc:
        return openai_error(400, exc.message, "invalid_value", exc.param)
    except SessionGateError as exc:
        return openai_error(exc.status, exc.message, exc.code)


@router.post("/conversations", response_model=None)
async def create_conversation(user: CurrentUser, request: Request) -> Response:
    async def work(caller: Caller) -> Response:
        body = await _body(request, ConversationBody)
        messages = _messages(body.items)
        made = await objects_of(request).create(caller, messages, dict(body.metadata or {}))
        return JSONResponse(shown(made))

    return await _answer(request, user, work)


@router.get("/conversations/{conversation_id}", response_model=None)
async def get_conversation(conversation_id: str, user: CurrentUser, request: Request) -> Response:
    async def work(caller: Caller) -> Response:
        return JSONResponse(shown(await _found(request, caller, conversation_id)))

    return await _answer(request, user, work)


@router.post("/conversations/{conversation_id}", response_model=None)
async def update_conversation(
    conversation_id: str, user: CurrentUser, request: Request
) -> Response:
    async def work(caller: Caller) -> Response:
        body = await _body(request, ConversationBody)
        if body.metadata is None:
            raise OpenAIError(400, "metadata is required.", "invalid_value", "metadata")
        updated = await objects_of(request).update(caller, conversation_id, body.metadata)
        if updated is None:
            raise not_found("Conversation", conversation_id)
        return JSONResponse(shown(updated))

    return await _answer(request, user, work)


@router.delete("/conversations/{conversation_id}", response_model=None)
async def delete_conversation(
    conversation_id: str, user: CurrentUser, request: Request
) -> Response:
    async def work(caller: Caller) -> Response:
        if not await objects_of(request).delete(caller, conversation_id):
            raise not_found("Conversation", conversation_id)
        gone = {"id": conversation_id, "object": "conversation.deleted", "deleted": True}
        return JSONResponse(gone)

    return await _answer(request, user, work)


@router.get("/conversations/{conversation_id}/items", response_model=None)
async def list_items(
    conversation_id: str,
    user: CurrentUser,
    request: Request,
    after: str | None = None,
    limit: str = Query("20", max_length=8),
    order: str = Query("desc", max_length=8),
) -> Response:
    async def work(caller: Caller) -> Response:
        found = await _found(request, caller, conversation_id)
        size = page_params(limit, order)
        items = [item.body for item in await objects_of(request).items(found)]
        return JSONResponse(page_of(items, after=after, limit=size, order=order).listing())

    return await _answer(request, user, work)


@router.post("/conversations/{conversation_id}/items", response_model=None)
async def add_items(conversation_id: str, user: CurrentUser, request: Request) -> Response:
    async def work(caller: Caller) -> Response:
        found = await _found(request, caller, conversation_id)
        body = await _body(request, ItemsBody)
        added = await objects_of(request).add(found, _messages(body.items))
        data = [item.body for item in added]
        return JSONResponse(page_of(data, after=None, limit=len(data) or 1, order="asc").listing())

    return await _answer(request, user, work)


@router.get("/conversations/{conversation_id}/items/{item_id}", response_model=None)
async def get_item(
    conversation_id: str, item_id: str, user: CurrentUser, request: Request
) -> Response:
    async def work(caller: Caller) -> Response:
        found = await _found(request, caller, conversation_id)
        for item in await objects_of(request).items(found):
            if item.item_id == item_id:
                return JSONResponse(item.body)
        raise not_found("Item", item_id)

    return await _answer(request, user, work)


@router.delete("/conversations/{conversation_id}/items/{item_id}", response_model=None)
async def delete_item(
    conversation_id: str, item_id: str, user: CurrentUser, request: Request
) -> Response:
    async def work(caller: Caller) -> Response:
        found = await _found(request, caller, conversation_id)
        if not await objects_of(request).delete_item(found, item_id):
            raise not_found("Item", item_id)
        return JSONResponse(shown(found))

    return await _answer(request, user, work)


@dataclass(frozen=True, slots=True)
class ConversationStart:
    """Where a response in a conversation starts: its key, the conversation node its
    newest item ended at (None: nothing recorded yet) and the assistant message a
    continuation's list starts with (the calls its tool results answer)."""

    key: str
    tip: str | None
    answer: dict[str, Any]


async def conversation_start(request: Request, caller: Caller, value: object) -> ConversationStart:
    """The `conversation` of `POST /v1/responses` (an id, or `{"id": ...}`)."""
    ident = value.get("id") if isinstance(value, dict) else value
    if not isinstance(ident, str) or not ident:
        raise OpenAIError(400, "conversation must be an id.", "invalid_value", "conversation")
    found = await objects_of(request).get(caller, ident)
    if found is None:
        raise not_found("Conversation", ident)
    objects = objects_of(request)
    head = await objects.index.head(caller.key(found.key))
    answer: dict[str, Any] = {"role": "assistant", "content": ""}
    for item in reversed(await objects.items(found)):
        if item.message.role is Role.ASSISTANT:
            calls = item.message.metadata.get("tool_calls") or []
            answer = {
                "role": "assistant",
                "content": item.message.content,
                "tool_calls": [
                    {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                    if isinstance(c, dict)
                ],
            }
            break
    return ConversationStart(found.key, None if head is None else head.hash, answer)
