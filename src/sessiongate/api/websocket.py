"""WebSocket chat: `/v1/ws`, and seed 001's `/api/claude/ws` and `/api/codex/ws`.

Protocol: the first text frame is the API key (`authenticated`, or
`error:invalid_api_key` and close; silence for `server.ws_auth_timeout` closes). Then a
`ready` frame with the key's history. Each client frame `{"content", "session_id"?,
"device_id"?}` runs one turn, answered by `message` chunks and one `complete`; a bad frame
gets an `error` frame and the connection stays open.

Frames are read as they arrive, whatever a turn is doing, so the connection's keep-alive
never waits behind a queue of turns: each frame is checked at once (size, JSON, nesting),
then queued for its turn (at most `limits.ws_max_queued_frames` per socket; one more is
answered `queue_full`). Turns on one socket run one at a time, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any, assert_never

import orjson
from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from sessiongate.api.auth import caller_for, routes_of
from sessiongate.api.ws_frames import FrameError, parse_frame
from sessiongate.core.events import (
    ActionEvent,
    ActionResultEvent,
    AudioEvent,
    ClassificationEvent,
    ContextLogEvent,
    EndEvent,
    ErrorEvent,
    HandoffEvent,
    PlanEvent,
    RotationEvent,
    RouteEvent,
    StartEvent,
    TokenEvent,
    ToolEndEvent,
    ToolStartEvent,
    TurnEvent,
    event_to_dict,
)
from sessiongate.core.routing import RouteDecision
from sessiongate.core.segments import Message
from sessiongate.core.users import User
from sessiongate.errors import InvalidInput, SessionGateError
from sessiongate.service.engine import Engine
from sessiongate.service.turns import InboundTurn

router = APIRouter()
POLICY_VIOLATION = 1008
#: The `ready` frame carries at most this share of the frame limit in history; older
#: messages are paged through REST (`history_complete: false` says so).
HISTORY_SHARE = 2


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ChatSocket:
    """One connection: authenticate, announce, then read frames and run their turns."""

    def __init__(self, ws: WebSocket, endpoint: str, agent: str | None, label: str) -> None:
        self.ws = ws
        self.endpoint = endpoint
        self.label = label
        self.engine: Engine = ws.app.state.engine
        self.limits = self.engine.settings.limits
        # One agent-selection rule for `ready` and every turn on this socket.
        self.agent = self.engine.turns.agent(agent)
        self._send_lock = asyncio.Lock()
        #: `/v1/ws` without `?session_id=`: frames that name no key are routed one by one.
        self._routed = False

    async def run(self) -> None:
        await self.ws.accept()
        try:
            user = await self._authenticate()
        except (WebSocketDisconnect, RuntimeError):
            return
        if user is None:
            return
        # Like seed 001, count a connection once it has authenticated.
        gauge = self.ws.app.state.metrics.websockets.labels(self.endpoint)
        open_sockets: dict[str, int] = self.ws.app.state.open_sockets
        gauge.inc()
        open_sockets[self.endpoint] = open_sockets.get(self.endpoint, 0) + 1
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(self.limits.ws_max_queued_frames)
        worker: asyncio.Task[None] | None = None
        try:
            try:
                key = await self._default_key(user)
            except SessionGateError as exc:  # a bad mode, channel or device in the URL
                await self._error(exc.code, exc.message)
                await self.ws.close(POLICY_VIOLATION, exc.code)
                return
            await self._ready(user, key)
            worker = asyncio.get_running_loop().create_task(self._run_turns(user, key, queue))
            await self._read_frames(queue)
        except (WebSocketDisconnect, RuntimeError):
            return  # the client went away; a turn already started runs to its end
        finally:
            if worker is not None:
                # Frames still queued belong to a client that left: they never started.
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
            gauge.dec()
            open_sockets[self.endpoint] -= 1

    async def _authenticate(self) -> User | None:
        timeout = self.engine.settings.server.ws_auth_timeout.total_seconds()
        try:
            frame = await asyncio.wait_for(self.ws.receive(), timeout)
        except TimeoutError:
            await self.ws.close(POLICY_VIOLATION, "authentication timeout")
            return None
        if frame["type"] == "websocket.disconnect":
            return None
        token = (frame.get("text") or "").strip()
        user = await self.engine.users.authenticate(token) if token else None
        if user is None:
            await self.ws.send_text("error:invalid_api_key")
            await self.ws.close(POLICY_VIOLATION, "invalid api key")
            return None
        await self.ws.send_text("authenticated")
        return user

    async def _default_key(self, user: User) -> str:
        """The key of frames that name none: `?session_id=`, else on `/v1/ws` the route
        (DESIGN.md §8), else seed 001's per-endpoint key."""
        requested = self.ws.query_params.get("session_id")
        if requested:
            return requested
        if self.endpoint == "v1":
            self._routed = True
            return (await self._route(user, None)).key
        return f"mobile:{self.endpoint}:{user.name}"

    async def _route(self, user: User, mode: object) -> RouteDecision:
        query = self.ws.query_params
        if mode is None:
            mode = query.get("mode")
        if mode is not None and not isinstance(mode, str):
            raise InvalidInput("mode must be a string", code="invalid_mode")
        return await routes_of(self.engine).decide(
            user,
            channel=query.get("channel") or "ws",
            mode=mode,
            device=query.get("device_id"),
        )

    async def _ready(self, user: User, key: str) -> None:
        history: list[dict[str, Any]] = []
        latest_session_id = None
        complete = True
        try:
            ref = caller_for(user).key(key)
            segment, messages = await self.engine.sessions.history(ref, self.agent.memory_window)
            latest_session_id = segment.session_id if segment else None
            history, complete = _history_within(
                messages, self.limits.ws_max_frame_bytes // HISTORY_SHARE
            )
        except SessionGateError:
            pass  # a bad key in the URL is reported when a message uses it
        await self._send(
            {
                "type": "ready",
                "session_id": key,
                "latest_session_id": latest_session_id,
                "agent": self.agent.name,
                "content": f"{self.label} connected (session-persistent)",
                "history": history,
                "history_complete": complete,
                "timestamp": _now(),
            }
        )

    async def _read_frames(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        """Read every frame as it comes; check it now, queue it for its turn."""
        received = 0
        while True:
            frame = await self.ws.receive()
            if frame["type"] == "websocket.disconnect":
                return
            received += 1
            try:
                data = self._check(frame)
            except FrameError as exc:
                await self._error(exc.code, exc.message, frame_number=received)
                continue
            try:
                queue.put_nowait({**data, "_frame": received})
            except asyncio.QueueFull:
                await self._error(
                    "queue_full",
                    f"{queue.maxsize} messages are already waiting on this connection;"
                    " this one was not run — send it again after a `complete`",
                    frame_number=received,
                )

    def _check(self, frame: MutableMapping[str, Any]) -> dict[str, Any]:
        text = frame.get("text")
        if text is None:
            raise FrameError("invalid_frame", "send JSON text frames")
        return parse_frame(
            text, max_bytes=self.limits.ws_max_frame_bytes, max_depth=self.limits.ws_max_json_depth
        )

    async def _run_turns(self, user: User, default_key: str, queue: asyncio.Queue[Any]) -> None:
        while True:
            data = await queue.get()
            try:
                await self._turn(user, default_key, data)
            except (WebSocketDisconnect, RuntimeError):
                return

    async def _turn(self, user: User, default_key: str, data: dict[str, Any]) -> None:
        frame_number = data.pop("_frame")
        requested = data.get("session_id")
        key = default_key if requested is None else requested
        device_id = data.get("device_id")
        if not isinstance(key, str) or (device_id is not None and not isinstance(device_id, str)):
            await self._error(
                "invalid_frame", "session_id and device_id must be strings", frame_number
            )
            return
        content = data.get("content")
        if not isinstance(content, str):
            await self._error("invalid_content", "content must be a string", frame_number)
            return
        metadata = {"device_id": device_id[:200]} if device_id else {}
        agent = self.agent.name
        decision = None
        try:
            if requested is None and self._routed:
                # Routed per frame: a mode unlocked (or expired) since the socket opened
                # counts from the next message on.
                decision = await self._route(user, data.get("mode"))
                key, agent = decision.key, decision.agent
            inbound = InboundTurn(
                key,
                caller_for(user),
                content,
                agent=agent,
                metadata={**metadata, "transport": self.endpoint},
                route=decision,
            )
            handle = self.engine.turns.start_turn(inbound)
        except SessionGateError as exc:
            await self._error(exc.code, exc.message, frame_number)
            return
        self.ws.app.state.served_keys.setdefault(self.endpoint, set()).add(key)
        async for event in handle.events():
            frame = render(event, key)
            if frame is not None:
                if frame["type"] in ("complete", "error"):
                    frame["frame"] = frame_number  # which client frame this turn answered
                await self._send(frame)

    async def _send(self, frame: dict[str, Any]) -> None:
        async with self._send_lock:  # the reader's error frames and a turn's frames
            await self.ws.send_text(orjson.dumps(frame).decode())

    async def _error(self, code: str, message: str, frame_number: int | None = None) -> None:
        frame: dict[str, Any] = {
            "type": "error",
            "code": code,
            "content": message,
            "message": message,
            "timestamp": _now(),
        }
        if frame_number is not None:
            frame["frame"] = frame_number  # which client frame this answers, counted from 1
        with contextlib.suppress(RuntimeError):
            await self._send(frame)


def render(event: TurnEvent, key: str) -> dict[str, Any] | None:
    """A turn event in this protocol's wire form (None: not sent on this protocol)."""
    match event:
        case TokenEvent():
            return {"type": "message", "content": event.content, "timestamp": _now()}
        case RotationEvent():
            return {**event.to_dict(), "timestamp": _now()}
        case EndEvent():
            return {
                "type": "complete",
                "content": "Response complete",
                "message_count": event.message_count,
                "message_id": event.message_id,
                "status": event.status,
                "session_id": key,
                "usage": event.usage,
                "timestamp": _now(),
            }
        case ErrorEvent():
            return {
                "type": "error",
                "code": event.code,
                "content": event.message,
                "message": event.message,
                "timestamp": _now(),
            }
        case (
            ContextLogEvent()
            | PlanEvent()
            | ToolStartEvent()
            | ToolEndEvent()
            | RouteEvent()
            | ClassificationEvent()
            | ActionEvent()
            | ActionResultEvent()
            | HandoffEvent()
            | AudioEvent()
        ):
            # The agent runtime's steps, in the same shape as on SSE.
            return {**event_to_dict(event), "timestamp": _now()}
        case StartEvent():
            return None  # seed 001's protocol has no start frame
        case _:
            assert_never(event)


def _history_within(messages: list[Message], budget: int) -> tuple[list[dict[str, Any]], bool]:
    """The newest messages whose content fits in `budget` bytes, oldest first, and whether
    that is all of them. A single message larger than the budget is cut to it (marked)."""
    kept: list[dict[str, Any]] = []
    used = 0
    for message in reversed(messages):
        size = len(message.content.encode("utf-8")) + 200
        content = message.content
        cut = False
        if used + size > budget:
            if kept:
                break
            content = message.content[: max(budget - 200, 0) // 4]  # ≤ 4 bytes per char
            cut = True
            size = budget
        entry: dict[str, Any] = {
            "role": message.role.value,
            "content": content,
            "timestamp": message.created_at.isoformat(),
            "status": message.status.value,
            "message_id": message.message_id,
        }
        if cut:
            entry["content_truncated"] = True
        kept.append(entry)
        used += size
    kept.reverse()
    return kept, len(kept) == len(messages) and not any("content_truncated" in e for e in kept)


@router.websocket("/v1/ws")
async def v1_socket(ws: WebSocket) -> None:
    await ChatSocket(ws, "v1", None, "sessiongate").run()


@router.websocket("/api/claude/ws")
async def claude_socket(ws: WebSocket) -> None:
    agent = ws.app.state.engine.settings.compat.claude_agent
    await ChatSocket(ws, "claude", agent, "Claude Agent").run()


@router.websocket("/api/codex/ws")
async def codex_socket(ws: WebSocket) -> None:
    agent = ws.app.state.engine.settings.compat.codex_agent
    await ChatSocket(ws, "codex", agent, "Codex Agent").run()
