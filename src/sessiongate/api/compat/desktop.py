"""Seed 004's `GET /ai?user_input=`: one turn of `compat.desktop_agent` on
`compat.desktop_key` (default `desktop:{user}`), answered as one JSON object.

Every request ends with exactly one answer, success or failure, so the desktop client
that locks its input while a request runs always unlocks it (seed 004):
- 200 `{"ok": true, "classification": "---CHAT---"|"---AGENT---", "response", "action"}`
  (`action` is how the script ran on the gateway, or null when nothing ran here; with
  `actions = "client"` the script to run is in `script`);
- 400 `{"ok": false, "classification": "---UNSAFE---", "error"}` for an unsafe request;
- 400 `{"ok": false, "error"}` for empty input;
- a broken output contract: `{"ok": false, "error", "response": <spoken fallback>}`;
- any other failure: `{"ok": false, "error"}` with the error's own status.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from sessiongate.api.auth import caller_for, current_user
from sessiongate.core.events import (
    ActionEvent,
    ActionResultEvent,
    ClassificationEvent,
    EndEvent,
    ErrorEvent,
    TokenEvent,
)
from sessiongate.core.users import User
from sessiongate.errors import SessionGateError, Unauthorized
from sessiongate.service.engine import Engine
from sessiongate.service.turn.pipeline import InboundTurn

router = APIRouter()

#: Longer input is refused by the content limit anyway; this bounds the query string.
MAX_INPUT_CHARS = 100_000


LOOPBACK = frozenset({"127.0.0.1", "::1"})


async def desktop_user(request: Request) -> User:
    """The caller: its API key as everywhere; or, for seed 004's desktop client (which
    sends none), `compat.desktop_user` — only to a request without an Authorization
    header that comes from this machine's loopback address."""
    engine: Engine = request.app.state.engine
    fallback = engine.settings.compat.desktop_user
    client = request.client.host if request.client is not None else None
    if fallback is None or "authorization" in request.headers or client not in LOOPBACK:
        return await current_user(request)
    user = await engine.users.users.get_user(fallback)
    if user is None:
        raise Unauthorized(f"compat.desktop_user {fallback!r} is not a user of this gateway")
    request.state.user = user
    return user


@router.get("/ai")
async def desktop_turn(
    user: Annotated[User, Depends(desktop_user)],
    request: Request,
    user_input: Annotated[str | None, Query(max_length=MAX_INPUT_CHARS)] = None,
) -> JSONResponse:
    engine: Engine = request.app.state.engine
    if user_input is None or not user_input.strip():
        return _failure(400, "empty_input", "user_input is required and must not be blank")
    compat = engine.settings.compat
    key = compat.desktop_key.replace("{user}", user.name)
    inbound = InboundTurn(
        key,
        caller_for(user),
        user_input,
        agent=compat.desktop_agent,
        metadata={"transport": "desktop"},
    )
    try:
        inbound = await engine.turns.admit(inbound)
        handle = engine.turns.start_turn(inbound)
    except SessionGateError as exc:
        return _failure(exc.status, exc.code, exc.message)
    result: dict[str, Any] = {"ok": False, "classification": None}
    spoken: list[str] = []
    action: dict[str, Any] | None = None
    error: ErrorEvent | None = None
    async for event in handle.events():
        match event:
            case ClassificationEvent():
                result["classification"] = event.marker
            case ActionEvent():
                result["script"] = event.script
            case ActionResultEvent():
                action = {
                    "script": event.script,
                    "exit_code": event.exit_code,
                    "stdout": event.stdout,
                    "stderr": event.stderr,
                    "duration_ms": event.duration_ms,
                    "killed": event.killed,
                    "reason": event.reason,
                }
            case TokenEvent():
                spoken.append(event.content)
            case EndEvent():
                result.update(ok=True, message_id=event.message_id)
            case ErrorEvent():
                error = event
            case _:
                pass  # start, route, rotation: not part of seed 004's answer
    result.update(response="".join(spoken) or None, action=action, session_key=key)
    if error is not None:
        result.update(ok=False, error={"code": error.code, "message": error.message})
        return JSONResponse(result, status_code=error.status)
    return JSONResponse(result)


def _failure(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"ok": False, "classification": None, "error": {"code": code, "message": message}},
        status_code=status,
    )
