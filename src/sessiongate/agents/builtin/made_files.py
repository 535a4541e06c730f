"""What a built-in that makes a file (an image, a video) does with it: keep it as an
artifact of the turn's key and tell the model where it is."""

from __future__ import annotations

from sessiongate.agents.tools import ToolContext, ToolFailed, ToolOutput
from sessiongate.errors import SessionGateError
from sessiongate.service.artifacts import ArtifactService


async def keep_made_file(
    artifacts: ArtifactService, context: ToolContext, data: bytes, media_type: str, kind: str
) -> ToolOutput:
    """`kind` ("image", "video") names the file in what the model reads."""
    try:
        artifact = await artifacts.save(
            context.user, data, media_type, key=context.key.name, turn_id=context.turn_id
        )
    except SessionGateError as exc:
        raise ToolFailed(f"the {kind} could not be kept: {exc.message}") from None
    url = f"/v1/artifacts/{artifact.artifact_id}"
    return ToolOutput(
        f"Generated the {kind}: {url} ({media_type}, {artifact.size} bytes).",
        artifact_ids=(artifact.artifact_id,),
        data={
            "artifact_id": artifact.artifact_id,
            "url": url,
            "media_type": media_type,
            "size": artifact.size,
        },
    )
