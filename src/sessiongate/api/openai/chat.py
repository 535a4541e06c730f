"""OpenAI-compatible `/v1/models` and `/v1/chat/completions` (DESIGN.md §11).

`model` names an agent. The conversation a request belongs to: `X-Session-Key`; else the
client's own id (`X-OpenWebUI-Chat-Id`, `X-Conversation-Id`, `metadata.conversation_id`);
else the stored conversation its message list continues, or a new one
(service/conversation/locate.py; service/conversation/reconcile.py reconciles the list with
the stored thread: continuation, regenerate, edit). Client
`system` messages reach the model after the agent's own; the client's `tools`,
`tool_choice` and `response_format` reach the model, and its tool calls come back in
OpenAI's shape. A stateless agent (`history = "none"`) or a one-shot task request (Open
WebUI's title generation) is answered from the list alone, nothing kept. `n > 1` is
refused.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, assert_never

import orjson
from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from sessiongate.api.auth import CurrentUser, caller_for, routes_of
from sessiongate.api.errors import error_response
from sessiongate.api.openai.announced import announced_headers
from sessiongate.api.openai.messages import ParsedRequest, fit_client_tools, parse_request
from sessiongate.api.sse import collect_reply, reply_status
from sessiongate.api.turn_stream import TurnStream
from sessiongate.api.turns import SSE_HEADERS, TurnFailed, begin_turn
from sessiongate.config.openai import OpenAIConfig
from sessiongate.core.conversation import Identity, Role, prefix_hashes, render_notice
from sessiongate.core.events import (
    ActionEvent,
    ActionResultEvent,
    AudioEvent,
    AudioPartEvent,
    ClassificationEvent,
    CompactionEvent,
    ContextLogEvent,
    ContextTrimmedEvent,
    EndEvent,
    ErrorEvent,
    HandoffEvent,
    MemoryEvent,
    PlanEvent,
    ReasoningEvent,
    RotationEvent,
    RouteEvent,
    StartEvent,
    TokenEvent,
    ToolEndEvent,
    ToolStartEvent,
    TurnEvent,
    event_to_dict,
)
from sessiongate.errors import InvalidInput
from sessiongate.models.base import capabilities_of
from sessiongate.service.agents import AgentProfile
from sessiongate.service.conversation.client_turn import ClientTurn
from sessiongate.service.conversation.locate import ConversationService
from sessiongate.service.engine import Engine
from sessiongate.service.idempotency import idempotent_request
from sessiongate.service.turn.client_reply import stateless_wire
from sessiongate.service.turn.pipeline import InboundTurn, TurnHandle

router = APIRouter(prefix="/v1")

#: `X-OpenWebUI-Task` values that mean "not a task" (an unset placeholder).
_NO_TASK = frozenset({"", "none", "null"})


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str = Field(max_length=32)
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class CompletionRequest(BaseModel):
    # Sampling parameters and the like are accepted and ignored: the agent decides.
    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    #: Only one choice is ever produced: more is refused (`n_not_supported`).
    n: int | None = None
    tools: list[dict[str, Any]] | None = Field(None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    #: `conversation_id` names the client's conversation.
    metadata: dict[str, Any] | None = None


@router.get("/models")
async def list_models(user: CurrentUser, request: Request) -> dict[str, Any]:
    engine: Engine = request.app.state.engine
    caller = caller_for(user)
    names = (
        list(engine.turns.agents)
        if engine.turns.access is None
        else await engine.turns.access.usable(caller)
    )
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "sessiongate"}
            for name in names
        ],
    }


def _conversations(engine: Engine) -> ConversationService:
    if engine.conversations is None:
        raise RuntimeError("this engine was built without conversations")
    return engine.conversations


def _id_text(value: object) -> str | None:
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
        return str(value).strip()[:512]
    return None


def _client_id(
    chat_id: str | None, conversation_id: str | None, body: CompletionRequest
) -> tuple[str, str] | None:
    """The client's own conversation id: Open WebUI's chat id (the forwarded header; or
    `metadata.chat_id` / `chat_id` in the body, where a pipeline or proxy puts it), else
    an `X-Conversation-Id` header (LibreChat's `{{LIBRECHAT_BODY_CONVERSATIONID}}`), else
    `metadata.conversation_id`."""
    metadata = body.metadata or {}
    owui = _id_text(chat_id) or _id_text(metadata.get("chat_id"))
    owui = owui or _id_text((body.model_extra or {}).get("chat_id"))
    if owui is not None:
        return "owui", owui
    conversation = _id_text(conversation_id) or _id_text(metadata.get("conversation_id"))
    return None if conversation is None else ("conv", conversation)


def _one_shot(
    agent: AgentProfile, parsed: ParsedRequest, task: str | None, config: OpenAIConfig
) -> bool:
    """A stateless agent, or a task request: Open WebUI's `X-OpenWebUI-Task` header (a
    custom header `{{TASK}}`), or a single user message where it or a system message
    starts with a task prefix."""
    if agent.history == "none":
        return True
    if task is not None and task.strip().lower() not in _NO_TASK:
        return True
    if len(parsed.messages) != 1 or parsed.messages[0].role is not Role.USER:
        return False
    texts = [parsed.messages[0].content.lstrip(), *(s.lstrip() for s in parsed.system)]
    return any(
        prefix and text.startswith(prefix) for text in texts for prefix in config.stateless_prefixes
    )


@router.post("/chat/completions", response_model=None)
async def chat_completions(
    body: CompletionRequest,
    user: CurrentUser,
    request: Request,
    x_session_key: str | None = Header(None, max_length=200),
    x_openwebui_chat_id: str | None = Header(None, max_length=512),
    x_openwebui_task: str | None = Header(None, max_length=200),
    x_conversation_id: str | None = Header(None, max_length=512),
    idempotency_key: str | None = Header(None),
) -> Response:
    engine: Engine = request.app.state.engine
    config = engine.settings.openai
    if body.n is not None and body.n > 1:
        raise InvalidInput(
            "n > 1 is not supported: the gateway keeps one answer per turn; ask again"
            " (a regenerate) for another",
            code="n_not_supported",
        )
    caller = caller_for(user)
    # `model` names an agent: only one the caller may run (403 alike for one that exists
    # for someone else and one that exists nowhere).
    agent = await engine.turns.usable_agent(caller, body.model)
    model = engine.turns.models.get(agent.reply_model)
    limits = engine.settings.limits
    parsed = parse_request(
        [m.model_dump() for m in body.messages],
        tools=body.tools,
        tool_choice=body.tool_choice,
        response_format=body.response_format,
        vision=capabilities_of(model).images,
        max_attachments=limits.max_attachments,
        max_attachment_bytes=limits.max_attachment_bytes,
    )
    parsed, tools_note = fit_client_tools(agent, capabilities_of(model).tools, parsed)
    completion = _Completion(body, config)
    if _one_shot(agent, parsed, x_openwebui_task, config):
        await engine.turns.count_request(caller)  # a reply like any other: over quota, 429
        wire = stateless_wire(agent, parsed.system, parsed.wire)
        turn_id = engine.sessions.ids.new()
        handle = _conversations(engine).stateless.start(turn_id, agent, wire, parsed.options)
        engine.turns.spend_when_done(caller, handle)
        events = handle.events()
        first = await anext(events)
        if isinstance(first, ErrorEvent):
            raise TurnFailed(first)
        return await completion.respond(
            handle, first, events, {"X-Session-Identity": "none", **tools_note}
        )

    hashes = prefix_hashes(parsed.messages)
    decision = None
    client_id = None
    if not x_session_key:
        client_id = _client_id(x_openwebui_chat_id, x_conversation_id, body)
    if not x_session_key and client_id is None and config.conversations == "route":
        decision = await routes_of(engine).decide(user, channel="openai")
        key, identity = decision.key, Identity.KEY
    else:
        key, identity = await _conversations(engine).identify(
            caller, parsed.messages, hashes, session_key=x_session_key, client_id=client_id
        )
    inbound = InboundTurn(
        key,
        caller,
        parsed.content,
        agent=agent.name,
        route=decision,
        admitted=True,
        attachments=parsed.attachments,
        client=ClientTurn(parsed.messages, identity, parsed.system, parsed.options, hashes),
    )
    idempotent = idempotent_request(
        user.name,
        idempotency_key,
        (body.model_extra or {}).get("client_message_id"),
        "chat/completions",
        {
            **body.model_dump(exclude={"stream", "stream_options", "client_message_id"}),
            "session_key": x_session_key,
            "client_id": client_id,
        },
    )
    handle, first, events = await begin_turn(engine, inbound, idempotent)
    headers = {
        # A replay names the key its turn landed in, whatever the list matches now.
        "X-Session-Key": getattr(first, "session_key", key),
        "X-Session-Id": getattr(first, "session_id", ""),
        "X-Session-Identity": identity.value,
        **tools_note,
    }
    return await completion.respond(handle, first, events, headers)


class _Completion:
    """One request's answer in OpenAI's shapes: a `chat.completion` object, or
    `chat.completion.chunk` server-sent events."""

    def __init__(self, body: CompletionRequest, config: OpenAIConfig) -> None:
        self.body = body
        self.model = body.model
        self.notice_template = config.rotation_notice
        self.created = int(time.time())
        self.id = ""

    def notice(self, rotation: dict[str, Any] | None) -> str:
        if not rotation:
            return ""
        return render_notice(self.notice_template, str(rotation.get("reason", "")))

    async def respond(
        self,
        handle: TurnHandle,
        first: TurnEvent,
        events: AsyncIterator[TurnEvent],
        headers: dict[str, str],
    ) -> Response:
        self.id = f"chatcmpl-{handle.turn_id}"
        if not self.body.stream:
            return await self._whole(handle, first, events, headers)
        include_usage = bool(self.body.stream_options and self.body.stream_options.include_usage)
        headers = {**headers, **await announced_headers(handle)}  # the working set's
        return TurnStream(
            self._chunks(handle, first, events, include_usage),
            media_type="text/event-stream",
            headers={**SSE_HEADERS, **headers},
        )

    async def _whole(
        self,
        handle: TurnHandle,
        first: TurnEvent,
        events: AsyncIterator[TurnEvent],
        headers: dict[str, str],
    ) -> Response:
        result = await collect_reply(handle, [first], events)
        status = reply_status(result)
        if "error" in result:
            error = result["error"]
            return error_response(status, error["code"], error["message"])
        text = self.notice(result.get("rotation")) + (result.get("reply") or "")
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
        if handle.tool_calls:
            message["content"] = text or None
            message["tool_calls"] = _tool_calls(handle.tool_calls, indexed=False)
            finish = "tool_calls"
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": result.get("usage") or {},
        }
        if "session_id" in result:
            body["session"] = {
                "key": headers.get("X-Session-Key"),
                "session_id": result.get("session_id"),
                "rotation": result.get("rotation"),
            }
        if "tool_steps" in result:
            body["sessiongate_tool_steps"] = result["tool_steps"]
        compacted = [c["compaction_id"] for c in result.get("compaction", []) if c["compaction_id"]]
        if compacted:  # the working set (docs/working_set.md)
            headers = {**headers, "X-Context-Compacted": ",".join(compacted)}
        remembered = [c["memory_id"] for c in result.get("memory", [])]
        if remembered:  # memory extraction (docs/memory.md)
            headers = {**headers, "X-Memory-Changed": ",".join(remembered)}
        return JSONResponse(body, headers=headers)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        data = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return b"data: " + orjson.dumps(data) + b"\n\n"

    async def _chunks(
        self,
        handle: TurnHandle,
        first: TurnEvent,
        events: AsyncIterator[TurnEvent],
        include_usage: bool,
    ) -> AsyncIterator[bytes]:
        chunk = self._chunk
        yield chunk({"role": "assistant", "content": ""})

        async def every() -> AsyncIterator[TurnEvent]:
            yield first
            async for event in events:
                yield event

        async for event in every():
            match event:
                case TokenEvent():
                    yield chunk({"content": event.content})
                case RotationEvent():
                    # Clients that know sessiongate read this field; every client shows
                    # the notice, the first content of the reply.
                    rotation = event.to_dict()
                    yield chunk({}, sessiongate_rotation=rotation)
                    notice = self.notice(rotation)
                    if notice:
                        yield chunk({"content": notice})
                case (
                    PlanEvent()
                    | ToolStartEvent()
                    | ToolEndEvent()
                    | ContextLogEvent()
                    | CompactionEvent()
                    | MemoryEvent()
                    | ContextTrimmedEvent()
                    | RouteEvent()
                    | ClassificationEvent()
                    | ActionEvent()
                    | ActionResultEvent()
                    | HandoffEvent()
                    | AudioEvent()
                ):
                    # The agent's own tool steps: text-only clients see nothing; those that
                    # know sessiongate read `sessiongate_<event type>`.
                    step = {k: v for k, v in event_to_dict(event).items() if k != "type"}
                    yield chunk({}, None, **{f"sessiongate_{event.type}": step})
                case EndEvent():
                    finish = "stop"
                    if handle.tool_calls:
                        yield chunk({"tool_calls": _tool_calls(handle.tool_calls, indexed=True)})
                        finish = "tool_calls"
                    yield chunk({}, finish)
                    if include_usage:
                        data = {
                            "id": self.id,
                            "object": "chat.completion.chunk",
                            "created": self.created,
                            "model": self.model,
                            "choices": [],
                            "usage": event.usage,
                        }
                        yield b"data: " + orjson.dumps(data) + b"\n\n"
                case ErrorEvent():
                    error = {
                        "error": {
                            "code": event.code,
                            "message": event.message,
                            "type": "sessiongate_error",
                        }
                    }
                    yield b"data: " + orjson.dumps(error) + b"\n\n"
                case StartEvent():
                    pass  # the session ids ride in the response headers
                case AudioPartEvent():
                    pass  # parts are for players; this route never speaks (no `speak`)
                case ReasoningEvent():
                    pass  # only the Responses API asks for reasoning
                case _:
                    assert_never(event)
        yield b"data: [DONE]\n\n"


def _tool_calls(calls: list[dict[str, str]], *, indexed: bool) -> list[dict[str, Any]]:
    """The model's calls of the client's tools in OpenAI's shape (`index` in a stream)."""
    shaped = []
    for index, call in enumerate(calls):
        item: dict[str, Any] = {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        if indexed:
            item = {"index": index, **item}
        shaped.append(item)
    return shaped
