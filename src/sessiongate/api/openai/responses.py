"""OpenAI's Responses API, stateful for any model (DESIGN.md §14): `POST /v1/responses`,
`GET` and `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`.

`model` names an agent. A response is a turn on a key; which key, in order:
`previous_response_id` (that response's key: the newest response appends, an older one
forks, as service/conversation/reconcile.py does for an edited list); the client's own
conversation id (`session-id` or `thread-id` header, as Codex CLI sends, else
`prompt_cache_key`), whose whole `input` is reconciled like a chat-completions list;
`conversation` (api/openai/conversations.py: its key, the input appended after its items);
else a new key `oai:resp:<id>`. With none of them and `store: false`, nothing is kept
(a one-shot reply). Function tools are the client's tools; hosted tools are left out and
said (`X-Hosted-Tools-Dropped`, and `metadata.sessiongate_hosted_tools_dropped`).
Errors answer in OpenAI's shape on these routes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from sessiongate.api.auth import CurrentUser, caller_for
from sessiongate.api.errors import error_headers
from sessiongate.api.openai import response_background
from sessiongate.api.openai.messages import fit_client_tools, parse_request
from sessiongate.api.openai.response_background import BackgroundTurn, start_background
from sessiongate.api.openai.response_journal import JournalEntry, journal_of
from sessiongate.api.openai.response_render import (
    OpenAIError,
    final_response,
    not_found,
    openai_error,
    page_params,
    pump,
    replayed,
    sse,
    sse_of,
)
from sessiongate.api.openai.response_request import (
    ENCRYPTED_REASONING,
    ResponseRequest,
    client_id_of,
    continuing,
    conversation_id_of,
    request_body,
)
from sessiongate.api.turn_stream import TurnStream
from sessiongate.api.turns import SSE_HEADERS, TurnFailed, begin_turn
from sessiongate.core.conversation import Identity, prefix_hashes
from sessiongate.core.conversation_items import page_of
from sessiongate.core.events import ErrorEvent
from sessiongate.core.response_events import ResponseShell
from sessiongate.core.responses import (
    InvalidResponseInput,
    as_chat_message,
    input_messages,
    last_user_text,
    listed_items,
    response_format_of,
    split_tools,
    tool_choice_of,
)
from sessiongate.core.users import Caller
from sessiongate.errors import SessionGateError
from sessiongate.models.base import NO_OPTIONS, ModelOptions, capabilities_of
from sessiongate.service.conversation.client_turn import ClientTurn
from sessiongate.service.conversation.locate import derived_key
from sessiongate.service.engine import Engine
from sessiongate.service.idempotency import IdempotentRequest, idempotent_request
from sessiongate.service.responses import ResponseService, build_response_service, shown
from sessiongate.service.turn.client_reply import stateless_wire
from sessiongate.service.turn.pipeline import InboundTurn

router = APIRouter(prefix="/v1")
router.include_router(response_background.router)

#: The text a continuation with no user message of its own (tool results) is judged by.
TOOL_RESULTS_TEXT = "(tool results)"


def responses_of(request: Request) -> ResponseService:
    """The app's response records, made at first use (erased with their key)."""
    state = request.app.state
    service: ResponseService | None = getattr(state, "responses", None)
    if service is None:
        engine: Engine = state.engine
        if engine.conversations is None:
            raise RuntimeError("this engine was built without conversations")
        service = build_response_service(engine.sessions, engine.conversations)
        state.responses = service
    return service


@router.post("/responses", response_model=None)
async def create_response(
    user: CurrentUser,
    request: Request,
    session_id: str | None = Header(None, alias="session-id", max_length=512),
    thread_id: str | None = Header(None, alias="thread-id", max_length=512),
    idempotency_key: str | None = Header(None),
) -> Response:
    try:
        body = await request_body(request)
        client_id = client_id_of(session_id, thread_id, body)
        idempotent = idempotent_request(
            user.name,
            idempotency_key,
            None,
            "responses",
            {**body.model_dump(exclude={"stream"}), "client_id": client_id},
        )
        return await _create(request, caller_for(user), body, client_id, idempotent)
    except OpenAIError as exc:
        return exc.response()
    except InvalidResponseInput as exc:
        return openai_error(400, exc.message, "invalid_value", exc.param)
    except SessionGateError as exc:
        answer = openai_error(exc.status, exc.message, exc.code)
        answer.headers.update(error_headers(exc))  # Retry-After over a quota
        return answer


async def _create(
    request: Request,
    caller: Caller,
    body: ResponseRequest,
    client_id: str | None,
    idempotent: IdempotentRequest | None,
) -> Response:
    engine: Engine = request.app.state.engine
    conversations = engine.conversations
    if conversations is None:
        raise RuntimeError("this engine was built without conversations")
    try:
        agent = await engine.turns.usable_agent(caller, body.model)
    except SessionGateError:
        message = f"The model '{body.model[:200]}' does not exist or you do not have access to it."
        raise OpenAIError(400, message, "model_not_found", "model") from None
    tools = split_tools(body.tools)
    response_format = response_format_of(body.text)
    raw = input_messages(body.input, body.instructions)
    previous = None
    if body.previous_response_id is not None:
        previous = await responses_of(request).get(caller, body.previous_response_id)
        if previous is None:
            raise OpenAIError(
                400,
                f"Previous response with id '{body.previous_response_id[:100]}' not found.",
                "previous_response_not_found",
                "previous_response_id",
            )
        if previous.body.get("status") in ("queued", "in_progress"):
            raise OpenAIError(
                400,
                f"Previous response '{previous.response_id}' is still in progress.",
                "previous_response_in_progress",
                "previous_response_id",
            )
        # What the client saw before its new input: the last user text (the turn's own
        # text when the input holds none) and the previous answer.
        earlier = input_messages(previous.input_items or [{"role": "user", "content": "-"}])
        user_text = last_user_text(earlier) or TOOL_RESULTS_TEXT
        answer = as_chat_message(previous.body.get("output") or [])
        raw = [{"role": "user", "content": user_text}, answer, *raw]
    start = None
    if body.conversation is not None:
        if previous is not None:
            raise OpenAIError(
                400,
                "previous_response_id and conversation cannot both be given.",
                "invalid_value",
                "conversation",
            )
        from sessiongate.api.openai.conversations import conversation_start

        start = await conversation_start(request, caller, body.conversation)
        if start.tip is not None:
            raw = [{"role": "user", "content": TOOL_RESULTS_TEXT}, start.answer, *raw]
    model = engine.turns.models.get(agent.reply_model)
    limits = engine.settings.limits
    parsed = parse_request(
        raw,
        tools=list(tools.functions) or None,
        tool_choice=tool_choice_of(body.tool_choice),
        response_format=response_format,
        vision=capabilities_of(model).images,
        max_attachments=limits.max_attachments,
        max_attachment_bytes=limits.max_attachment_bytes,
    )
    parsed, tools_note = fit_client_tools(agent, capabilities_of(model).tools, parsed)
    if body.max_output_tokens is not None:
        # The limit goes upstream with the one model call a client's options make.
        limited = replace(parsed.options or NO_OPTIONS, max_output_tokens=body.max_output_tokens)
        parsed = replace(parsed, options=limited)
    headers = dict(tools_note)
    metadata = dict(body.metadata or {})
    stateless = agent.history == "none" or (
        previous is None and start is None and client_id is None and not body.store
    )
    hosted: tuple[str, ...] = ()
    runtime = engine.turns.runtime
    # The agent's equivalents of the hosted tools run (agents/runners/hosted.py) where it
    # has them, keeps the turn and its model calls tools.
    runs_hosted = agent.hosted_tools and not stateless and capabilities_of(model).tools
    if tools.dropped and runs_hosted and runtime is not None:
        found = await runtime.hosted_equivalents(agent, tools.dropped, primary=caller.primary)
        hosted = tuple(kind for kind in tools.dropped if kind in found)
    if hosted:
        parsed = replace(parsed, options=parsed.options or ModelOptions())
    dropped = [kind for kind in tools.dropped if kind not in hosted]
    if dropped:
        headers["X-Hosted-Tools-Dropped"] = ",".join(dropped)
        metadata["sessiongate_hosted_tools_dropped"] = ",".join(dropped)[:512]
    hashes = prefix_hashes(parsed.messages)
    if body.background and (stateless or not body.store):
        message = "background responses are kept: they need store: true and an agent with history."
        raise OpenAIError(400, message, "invalid_value", "background")
    key = ""
    if stateless:
        await engine.turns.count_request(caller)  # a reply like any other: over quota, 429
        turn_id = engine.sessions.ids.new()
        wire = stateless_wire(agent, parsed.system, parsed.wire)
        handle = conversations.stateless.start(turn_id, agent, wire, parsed.options)
        engine.turns.spend_when_done(caller, handle)
        handle.reasoning_events = True  # before its task first runs
        events = handle.events()
        first = await anext(events)
        if isinstance(first, ErrorEvent):
            raise TurnFailed(first)
        headers["X-Session-Identity"] = "none"
    else:
        if previous is not None:
            key, identity = previous.key, Identity.KEY
            hashes = continuing(previous.response_id, previous.tip_hash, parsed.messages)
        elif start is not None:
            key, identity = start.key, Identity.KEY
            if start.tip is not None:
                hashes = continuing(start.key, start.tip, parsed.messages)
        elif client_id is not None:
            key, identity = derived_key("resp", client_id), Identity.CLIENT_ID
        else:
            key, identity = f"oai:resp:{engine.sessions.ids.new()}", Identity.NEW
        inbound = InboundTurn(
            key,
            caller,
            parsed.content,
            agent=agent.name,
            admitted=True,
            attachments=parsed.attachments,
            reasoning_events=True,
            hosted_tools=hosted,
            client=ClientTurn(parsed.messages, identity, parsed.system, parsed.options, hashes),
        )
        handle, first, events = await begin_turn(engine, inbound, idempotent)
        headers["X-Session-Key"] = getattr(first, "session_key", key)
        headers["X-Session-Id"] = getattr(first, "session_id", "")
        headers["X-Session-Identity"] = identity.value
    response_id = "resp_" + handle.turn_id.replace("-", "")
    shell = ResponseShell(
        response_id,
        int(time.time()),
        body.model,
        instructions=body.instructions,
        metadata=metadata,
        tools=body.tools or (),
        tool_choice=body.tool_choice,
        text_format=(body.text or {}).get("format"),
        max_output_tokens=body.max_output_tokens,
        previous_response_id=body.previous_response_id,
        store=body.store,
        parallel_tool_calls=body.parallel_tool_calls,
        conversation=None if start is None else conversation_id_of(body.conversation),
        encrypted_reasoning=ENCRYPTED_REASONING in (body.include or ()),
        hosted=hosted,
    )
    keep = body.store and not stateless
    items = listed_items(body.input, response_id)

    kept = await responses_of(request).get(caller, response_id) if idempotent else None
    if kept is not None:
        # The same Idempotency-Key again, its response kept: answered from it, as it was.
        if not body.stream:
            return JSONResponse(shown(kept.body), headers=headers)
        replay = replayed(shown(kept.body))
        return StreamingResponse(
            (sse(event) for event in replay),
            media_type="text/event-stream",
            headers={**SSE_HEADERS, **headers},
        )

    async def on_done(response: dict[str, Any]) -> None:
        if keep and response["status"] != "failed":
            await responses_of(request).record(caller, key, response, items)

    def calls() -> list[dict[str, str]]:
        return list(handle.tool_calls)

    notice = engine.settings.openai.rotation_notice
    journal = journal_of(request)
    # Only a kept response is found again (GET …?stream=true&starting_after=N).
    entry = journal.open(caller.name, response_id) if keep else JournalEntry()
    if body.background:
        turn = BackgroundTurn(shell, key, items, handle, first, events, calls, notice, entry)
        service = responses_of(request)
        return await start_background(request, service, caller, turn, headers, stream=body.stream)
    task = journal.run(pump(shell, first, events, calls, notice, on_done, entry))
    if body.stream:
        return TurnStream(
            sse_of(entry.follow(-1)),
            media_type="text/event-stream",
            headers={**SSE_HEADERS, **headers},
        )
    await asyncio.shield(task)
    response = final_response(entry)
    if response.get("status") == "failed":
        error = response.get("error") or {}
        return openai_error(502, str(error.get("message", "")), str(error.get("code", "")))
    return JSONResponse(response, headers=headers)


@router.get("/responses/{response_id}", response_model=None)
async def get_response(
    response_id: str,
    user: CurrentUser,
    request: Request,
    stream: str = Query("false", max_length=8),
    starting_after: str = Query("-1", max_length=12),
) -> Response:
    caller = caller_for(user)
    found = await responses_of(request).get(caller, response_id)
    if found is None:
        return not_found("Response", response_id).response()
    if stream.lower() not in ("true", "1"):
        return JSONResponse(shown(found.body))
    after = int(starting_after) if starting_after.lstrip("-").isdigit() else None
    if after is None:
        message = "starting_after must be an integer."
        return openai_error(400, message, "invalid_value", "starting_after")
    entry = journal_of(request).get(caller.name, response_id)
    if entry is not None:
        events = sse_of(entry.follow(after))
        return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)
    again = [sse(e) for e in replayed(shown(found.body)) if e["sequence_number"] > after]
    return StreamingResponse(iter(again), media_type="text/event-stream", headers=SSE_HEADERS)


@router.delete("/responses/{response_id}", response_model=None)
async def delete_response(response_id: str, user: CurrentUser, request: Request) -> Response:
    if not await responses_of(request).delete(caller_for(user), response_id):
        return not_found("Response", response_id).response()
    return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})


@router.get("/responses/{response_id}/input_items", response_model=None)
async def input_items(
    response_id: str,
    user: CurrentUser,
    request: Request,
    after: str | None = None,
    limit: str = Query("20", max_length=8),
    order: str = Query("desc", max_length=8),
) -> Response:
    found = await responses_of(request).get(caller_for(user), response_id)
    if found is None:
        return not_found("Response", response_id).response()
    try:
        size = page_params(limit, order)
    except OpenAIError as exc:
        return exc.response()
    return JSONResponse(page_of(found.input_items, after=after, limit=size, order=order).listing())
