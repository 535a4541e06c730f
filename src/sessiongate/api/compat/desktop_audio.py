"""The sound of seed 004's answers: what `GET /ai` says in `audio`, and
`GET /ai/audio/{artifact_id}`, where its desktop client fetches it.

`audio` is `{url, artifact_id, kind, voice, duration_ms, media_type}`: the reply spoken
with the agent's voice (`kind: "reply"`), or on `---UNSAFE---` the warning sound
(`kind: "warning"`, service/warning_sound.py). `url` is `/ai/audio/<id>`, which the
client reaches the way it reaches `/ai` — with its key, or keyless from loopback as
`compat.desktop_user` (api/compat/loopback.py) — and which serves only sound made on
that user's `compat.desktop_key`: a keyless client hears its answers and reads nothing
else. A keyed client may also use `/v1/artifacts/<id>`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from sessiongate.api.artifacts import SECURITY_HEADERS
from sessiongate.api.compat.loopback import desktop_user
from sessiongate.core.events import AudioEvent
from sessiongate.core.users import User
from sessiongate.service.artifacts import ArtifactNotFound
from sessiongate.service.engine import Engine
from sessiongate.service.warning_sound import WarningSounds
from sessiongate.speech.base import WAV_MEDIA_TYPE

router = APIRouter()


def desktop_key(engine: Engine, user: User) -> str:
    return engine.settings.compat.desktop_key.replace("{user}", user.name)


def reply_audio(event: AudioEvent) -> dict[str, Any] | None:
    """The spoken reply, or None when it could not be spoken (the `audio` event's error
    is then in `audio_error`)."""
    if event.artifact_id is None:
        return None
    return {
        "url": f"/ai/audio/{event.artifact_id}",
        "artifact_id": event.artifact_id,
        "kind": "reply",
        "voice": event.voice,
        "duration_ms": event.duration_ms,
        "media_type": event.media_type,
    }


async def warning_audio(request: Request, user: User) -> dict[str, Any] | None:
    """The warning sound kept on the user's desktop key; None when no artifacts are kept."""
    engine: Engine = request.app.state.engine
    sounds: WarningSounds = request.app.state.warning_sounds
    artifact = await sounds.for_key(user.name, desktop_key(engine, user))
    if artifact is None:
        return None
    return {
        "url": f"/ai/audio/{artifact.artifact_id}",
        "artifact_id": artifact.artifact_id,
        "kind": "warning",
        "voice": None,
        "duration_ms": sounds.duration_ms,
        "media_type": WAV_MEDIA_TYPE,
    }


@router.get("/ai/audio/{artifact_id}")
async def desktop_audio(
    artifact_id: str, user: Annotated[User, Depends(desktop_user)], request: Request
) -> Response:
    engine: Engine = request.app.state.engine
    if engine.artifacts is None:
        raise ArtifactNotFound("no artifact with that id")
    artifact, data = await engine.artifacts.read(user.name, artifact_id)
    if artifact.key != desktop_key(engine, user) or not artifact.media_type.startswith("audio/"):
        raise ArtifactNotFound("no artifact with that id")  # as an unknown id answers
    headers = {
        **SECURITY_HEADERS,
        "Content-Disposition": f'inline; filename="{artifact.artifact_id}.wav"',
        "ETag": f'"{artifact.sha256}"',
    }
    return Response(data, media_type=artifact.media_type, headers=headers)
