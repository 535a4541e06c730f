"""WebSocket chat: `/v1/ws`, and seed 001's `/api/claude/ws` and `/api/codex/ws`.

Protocol: the first text frame is the API key (`authenticated`, or
`error:invalid_api_key` and close; silence for `server.ws_auth_timeout` closes). Then a
`ready` frame with the key's history. Each client frame `{"content", "session_id"?,
"device_id"?}` runs one turn, answered by `message` chunks and one `complete`; a bad frame
gets an `error` frame and the connection stays open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from sessiongate.api.auth import caller_for, route_key
from sessiongate.core.events import EndEvent, ErrorEvent, RotationEvent, TokenEvent
from sessiongate.core.keys import validate_session_key
from sessiongate.core.users import User
from sessiongate.errors import SessionGateError
from sessiongate.service.engine import Engine
from sessiongate.service.turns import InboundTurn

router = APIRouter()
POLICY_VIOLATION = 1008


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ChatSocket:
    """One connection: authenticate, announce, then run turns one at a time."""

    def __init__(self, ws: WebSocket, endpoint: str, agent: str | None, label: str) -> None:
        self.ws = ws
        self.endpoint = endpoint
        self.agent = agent
        self.label = label
        self.engine: Engine = ws.app.state.engine

    async def run(self) -> None:
        await self.ws.accept()
        gauge = self.ws.app.state.metrics.websockets.labels(self.endpoint)
        try:
            user = await self._authenticate()
        except (WebSocketDisconnect, RuntimeError):
            return
        if user is None:
            return
        # Like seed 001, count a connection once it has authenticated.
        gauge.inc()
        try:
            key = self._default_key(user)
            await self._ready(user, key)
            while True:
                frame = await self.ws.receive()
                if frame["type"] == "websocket.disconnect":
                    return
                await self._handle(user, key, frame)
        except (WebSocketDisconnect, RuntimeError):
            # The client went away (possibly mid-turn; the turn itself runs to its end).
            return
        finally:
            gauge.dec()

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

    def _default_key(self, user: User) -> str:
        requested = self.ws.query_params.get("session_id")
        if requested:
            return requested
        if self.endpoint == "v1":
            return route_key(user)
        return f"mobile:{self.endpoint}:{user.name}"

    async def _ready(self, user: User, key: str) -> None:
        history: list[dict[str, Any]] = []
        latest_session_id = None
        try:
            validate_session_key(key)
            record = await self.engine.store.get_key(key)
            if record is not None and record.owner == user.name:
                segment = await self.engine.store.latest_segment(key)
                latest_session_id = segment.session_id
                window = self.engine.turns.agents[self._agent_name()].memory_window
                history = [
                    {
                        "role": m.role.value,
                        "content": m.content,
                        "timestamp": m.created_at.isoformat(),
                        "status": m.status.value,
                    }
                    for m in await self.engine.store.thread_tail(segment, window)
                ]
        except SessionGateError:
            pass  # a bad key in the URL is reported when a message uses it
        await self.ws.send_json(
            {
                "type": "ready",
                "session_id": key,
                "latest_session_id": latest_session_id,
                "content": f"{self.label} connected (session-persistent)",
                "history": history,
                "timestamp": _now(),
            }
        )

    def _agent_name(self) -> str:
        return self.agent or next(iter(self.engine.turns.agents))

    async def _handle(self, user: User, default_key: str, frame: MutableMapping[str, Any]) -> None:
        text = frame.get("text")
        if text is None:
            await self._error("invalid_frame", "send JSON text frames")
            return
        try:
            data = json.loads(text)
        except ValueError:
            await self._error("invalid_json", "Invalid message format")
            return
        if not isinstance(data, dict):
            await self._error("invalid_frame", "a message frame is a JSON object")
            return
        requested = data.get("session_id")
        key = default_key if requested is None else requested
        device_id = data.get("device_id")
        if not isinstance(key, str) or (device_id is not None and not isinstance(device_id, str)):
            await self._error("invalid_frame", "session_id and device_id must be strings")
            return
        content = data.get("content")
        if not isinstance(content, str):
            await self._error("invalid_content", "content must be a string")
            return
        metadata = {"device_id": device_id[:200]} if device_id else {}
        inbound = InboundTurn(
            key,
            caller_for(user),
            content,
            agent=self.agent,
            metadata={**metadata, "transport": self.endpoint},
        )
        try:
            await self.engine.sessions.check_writable(key, inbound.caller)
            handle = self.engine.turns.start_turn(inbound)
        except SessionGateError as exc:
            await self._error(exc.code, exc.message)
            return
        self.ws.app.state.served_keys.setdefault(self.endpoint, set()).add(key)
        async for event in handle.events():
            if isinstance(event, TokenEvent):
                await self.ws.send_json(
                    {"type": "message", "content": event.content, "timestamp": _now()}
                )
            elif isinstance(event, RotationEvent):
                await self.ws.send_json({**event.to_dict(), "timestamp": _now()})
            elif isinstance(event, EndEvent):
                await self.ws.send_json(
                    {
                        "type": "complete",
                        "content": "Response complete",
                        "message_count": event.message_count,
                        "message_id": event.message_id,
                        "session_id": key,
                        "usage": event.usage,
                        "timestamp": _now(),
                    }
                )
            elif isinstance(event, ErrorEvent):
                await self._error(event.code, event.message)

    async def _error(self, code: str, message: str) -> None:
        with contextlib.suppress(RuntimeError):
            await self.ws.send_json(
                {
                    "type": "error",
                    "code": code,
                    "content": message,
                    "message": message,
                    "timestamp": _now(),
                }
            )


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
