"""`GET /v1/artifacts/{id}`: a file a tool made, to its owner (DESIGN.md §9), streamed a
chunk at a time; `POST /v1/artifacts[?key=]`: an upload, kept as it arrives;
`GET /v1/artifacts/{id}/meta`: what is known of it, its WebDAV copy's status included; and
`GET /v1/artifacts?key=`: the artifacts a key's turns made (a page finds a spoken reply's
audio again by its turn).

The bytes are served as what the gateway recorded (never sniffed by the browser:
`nosniff`), inline, under a policy that lets nothing in them run or load anything: an
image opened straight from the gateway's origin must not be able to act as a page of it.
Another user's artifact is a 404 exactly like an unknown id; an admin may name the owner
(`?owner=NAME`), as on the session routes.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from sessiongate.api.auth import CurrentUser
from sessiongate.api.schemas import iso
from sessiongate.core.artifacts import Artifact, ArtifactCopy
from sessiongate.core.ids import is_session_id
from sessiongate.core.keys import validate_session_key
from sessiongate.core.users import validate_user_name
from sessiongate.errors import Forbidden, InvalidInput
from sessiongate.service.artifacts import ArtifactNotFound, ArtifactTooLarge
from sessiongate.service.engine import Engine

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


#: What `media_type=` may name: a type/subtype, nothing else.
MEDIA_TYPE = r"^[a-z0-9][a-z0-9.+-]{0,40}/[a-z0-9][a-z0-9.+-]{0,80}$"


@router.get("/artifacts")
async def list_artifacts(
    user: CurrentUser,
    request: Request,
    key: Annotated[str, Query(min_length=1, max_length=256)],
    turn_id: Annotated[str | None, Query(max_length=64)] = None,
    media_type: Annotated[str | None, Query(pattern=MEDIA_TYPE)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    owner: Annotated[str | None, Query(max_length=64)] = None,
) -> dict[str, Any]:
    engine: Engine = request.app.state.engine
    name = validate_session_key(key)
    if turn_id is not None and not is_session_id(turn_id):
        raise InvalidInput(
            "turn_id is a lower-case UUID as the gateway issues it", code="invalid_turn_id"
        )
    if engine.artifacts is None:
        return {"artifacts": []}
    found = await engine.artifacts.of_key(
        owner_for(user, owner), name, turn_id=turn_id, media_type=media_type, limit=limit
    )
    return {"artifacts": [artifact_json(a) for a in found]}


def artifact_json(artifact: Artifact) -> dict[str, Any]:
    return {
        "artifact_id": artifact.artifact_id,
        "url": f"/v1/artifacts/{artifact.artifact_id}",
        "media_type": artifact.media_type,
        "size": artifact.size,
        "sha256": artifact.sha256,
        "created_at": iso(artifact.created_at),
        "key": artifact.key,
        "turn_id": artifact.turn_id,
    }


@router.get("/artifacts/{artifact_id}")
async def get_artifact(
    artifact_id: str,
    user: CurrentUser,
    request: Request,
    owner: Annotated[str | None, Query(max_length=64)] = None,
) -> StreamingResponse:
    engine: Engine = request.app.state.engine
    if engine.artifacts is None:
        raise ArtifactNotFound("no artifact with that id")
    artifact, pieces = await engine.artifacts.open(owner_for(user, owner), artifact_id)
    extension = EXTENSIONS.get(artifact.media_type, "bin")
    headers = {
        **SECURITY_HEADERS,
        "Content-Disposition": f'inline; filename="{artifact.artifact_id}.{extension}"',
        "ETag": f'"{artifact.sha256}"',
        "Content-Length": str(artifact.size),
    }
    # A chunk at a time from the file or the database: never the whole artifact in memory.
    return StreamingResponse(pieces, media_type=artifact.media_type, headers=headers)


@router.post("/artifacts", status_code=201)
async def upload_artifact(
    user: CurrentUser,
    request: Request,
    key: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> dict[str, Any]:
    """Keep the request body as an artifact of the caller's (its media type the body's
    `Content-Type`; `key` names the conversation it belongs to, erased with it). The
    body is written as it arrives, within `limits.max_artifact_bytes`."""
    engine: Engine = request.app.state.engine
    if engine.artifacts is None:
        raise InvalidInput("this gateway keeps no artifacts", code="artifacts_disabled")
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    announced = request.headers.get("content-length")
    if (
        announced is not None
        and announced.isdigit()
        and int(announced) > engine.artifacts.max_bytes
    ):
        raise ArtifactTooLarge(
            f"the artifact is {announced} bytes; limits.max_artifact_bytes is"
            f" {engine.artifacts.max_bytes}"
        )
    name = None if key is None else validate_session_key(key)
    artifact = await engine.artifacts.save_stream(user.name, request.stream(), media_type, key=name)
    return artifact_json(artifact)


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
    return {**artifact_json(artifact), "copy": None if copy is None else copy_json(copy)}


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
