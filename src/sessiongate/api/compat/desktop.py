"""Seed 004's `GET /ai?user_input=`: one turn of `compat.desktop_agent` on
`compat.desktop_key` (default `desktop:{user}`), answered as one JSON object.

Every request ends with exactly one answer, success or failure, so the desktop client
that locks its input while a request runs always unlocks it (seed 004):
- 200 `{"ok": true, "classification": "---CHAT---"|"---AGENT---", "response", "action",
  "audio"}` (`action` is how the script ran on the gateway, or null when nothing ran
  here; with `actions = "client"` the script to run is in `script`; `audio` is the
  reply spoken with the agent's voice, or null when it has none);
- 400 `{"ok": false, "classification": "---UNSAFE---", "error", "audio"}` for an unsafe
  request, `audio` being seed 004's warning sound;
- 400 `{"ok": false, "error"}` for empty input;
- a broken output contract: `{"ok": false, "error", "response": <spoken fallback>}`;
- any other failure: `{"ok": false, "error"}` with the error's own status.

The caller is its API key's user, or `compat.desktop_user` for the keyless desktop
client on this machine (api/compat/loopback.py); the sound is served by
api/compat/desktop_audio.py.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from sessiongate.api.auth import caller_for
from sessiongate.api.compat import desktop_audio
from sessiongate.api.compat.desktop_audio import reply_audio, warning_audio
from sessiongate.api.compat.loopback import desktop_user
from sessiongate.core.events import (
    ActionEvent,
    ActionResultEvent,
    AudioEvent,
    ClassificationEvent,
    EndEvent,
    ErrorEvent,
    TokenEvent,
)
from sessiongate.core.safety.verdict import MARKERS, Label
from sessiongate.core.users import User
from sessiongate.errors import SessionGateError
from sessiongate.service.engine import Engine
from sessiongate.service.turn.pipeline import InboundTurn

log = logging.getLogger("sessiongate.desktop")
router = APIRouter()
router.include_router(desktop_audio.router)

#: Longer input is refused by the content limit anyway; this bounds the query string.
MAX_INPUT_CHARS = 100_000


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
        # The reply is spoken when the agent has a voice (seed 004 spoke every answer).
        speak = engine.speech is not None and engine.turns.agent(inbound.agent).voice is not None
        handle = engine.turns.start_turn(replace(inbound, speak=speak))
    except SessionGateError as exc:
        return _failure(exc.status, exc.code, exc.message)
    result: dict[str, Any] = {"ok": False, "classification": None}
    spoken: list[str] = []
    action: dict[str, Any] | None = None
    audio: dict[str, Any] | None = None
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
            case AudioEvent():
                audio = reply_audio(event)
                if event.error is not None:
                    result["audio_error"] = event.error
            case ErrorEvent():
                error = event
            case _:
                pass  # start, route, rotation: not part of seed 004's answer
    if result["classification"] == MARKERS[Label.UNSAFE]:
        audio = await _warning(request, user)
    result.update(response="".join(spoken) or None, action=action, audio=audio, session_key=key)
    if error is not None:
        result.update(ok=False, error={"code": error.code, "message": error.message})
        return JSONResponse(result, status_code=error.status)
    return JSONResponse(result)


async def _warning(request: Request, user: User) -> dict[str, Any] | None:
    """Seed 004's warning sound for a refused request; None (and a log line) when it
    cannot be kept: the refusal is answered regardless."""
    try:
        return await warning_audio(request, user)
    except Exception:
        log.warning("keeping the warning sound failed", exc_info=True)
        return None


def _failure(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"ok": False, "classification": None, "error": {"code": code, "message": message}},
        status_code=status,
    )
