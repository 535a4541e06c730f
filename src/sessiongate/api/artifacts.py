"""`GET /v1/artifacts/{id}`: a file a tool made, to its owner (DESIGN.md §9); and
`GET /v1/artifacts/{id}/meta`: what is known of it, its WebDAV copy's status included.

The bytes are served as what the gateway recorded (never sniffed by the browser:
`nosniff`), inline, under a policy that lets nothing in them run or load anything: an
image opened straight from the gateway's origin must not be able to act as a page of it.
Another user's artifact is a 404 exactly like an unknown id; an admin may name the owner
(`?owner=NAME`), as on the session routes.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from sessiongate.api.auth import CurrentUser
from sessiongate.api.schemas import iso
from sessiongate.core.users import validate_user_name
from sessiongate.errors import Forbidden
from sessiongate.service.artifacts import ArtifactNotFound
from sessiongate.service.engine import Engine
from sessiongate.store.artifact_copies_base import ArtifactCopy

router = APIRouter(prefix="/v1")

#: Served with every artifact: no script, no style, no frame, no fetch, no plugin.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "private, max-age=3600",
    "Cross-Origin-Resource-Policy": "same-origin",
}
#: The extension a saved file gets for a media type (anything else: `.bin`).
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "audio/wav": "wav"}


def owner_for(user: CurrentUser, owner: str | None) -> str:
    """The caller, or for an admin the user it names; anyone else naming another owner
    is refused whatever that owner holds (so the answer reveals nothing)."""
    if owner is None or owner == user.name:
        return user.name
    validate_user_name(owner)
    if not user.admin:
        raise Forbidden(
            "only an admin may name another user's artifact (owner=...)",
            code="owner_not_allowed",
        )
    return owner


@router.get("/artifacts/{artifact_id}")
async def get_artifact(
    artifact_id: str,
    user: CurrentUser,
    request: Request,
    owner: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    engine: Engine = request.app.state.engine
    if engine.artifacts is None:
        raise ArtifactNotFound("no artifact with that id")
    artifact, data = await engine.artifacts.read(owner_for(user, owner), artifact_id)
    extension = EXTENSIONS.get(artifact.media_type, "bin")
    headers = {
        **SECURITY_HEADERS,
        "Content-Disposition": f'inline; filename="{artifact.artifact_id}.{extension}"',
        "ETag": f'"{artifact.sha256}"',
    }
    return Response(data, media_type=artifact.media_type, headers=headers)


@router.get("/artifacts/{artifact_id}/meta")
async def get_artifact_meta(
    artifact_id: str,
    user: CurrentUser,
    request: Request,
    owner: Annotated[str | None, Query(max_length=64)] = None,
) -> dict[str, Any]:
    engine: Engine = request.app.state.engine
    if engine.artifacts is None:
        raise ArtifactNotFound("no artifact with that id")
    artifact = await engine.artifacts.describe(owner_for(user, owner), artifact_id)
    copy = await engine.artifacts.copy_of(artifact)
    return {
        "artifact_id": artifact.artifact_id,
        "url": f"/v1/artifacts/{artifact.artifact_id}",
        "media_type": artifact.media_type,
        "size": artifact.size,
        "sha256": artifact.sha256,
        "created_at": iso(artifact.created_at),
        "key": artifact.key,
        "turn_id": artifact.turn_id,
        "copy": None if copy is None else copy_json(copy),
    }


def copy_json(copy: ArtifactCopy) -> dict[str, Any]:
    """The WebDAV copy as its owner sees it: `pending`, `copied` or `failed`, the attempts
    made, why the last one failed, and where the copy is under the WebDAV folder."""
    return {
        "status": copy.state,
        "attempts": copy.attempts,
        "last_error": copy.last_error,
        "updated_at": iso(copy.updated_at),
        "path": copy.remote_path,
    }
