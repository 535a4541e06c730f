"""Keeping the images sent with a turn as artifacts of its key (core/attachments.py
checks them and builds what the model sees)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessiongate.core.attachments import ImageAttachment, InvalidAttachment
from sessiongate.service.artifacts import ArtifactService


async def keep_attachments(
    artifacts: ArtifactService | None,
    owner: str,
    key: str,
    turn_id: str,
    images: Sequence[ImageAttachment],
) -> list[dict[str, Any]]:
    """Save each image as an artifact; the references go into the user message."""
    if not images:
        return []
    if artifacts is None:
        raise InvalidAttachment("this gateway keeps no artifacts, so it takes no attachments")
    kept = []
    for image in images:
        artifact = await artifacts.save(
            owner, image.data, image.media_type, key=key, turn_id=turn_id
        )
        kept.append(
            {
                "artifact_id": artifact.artifact_id,
                "media_type": image.media_type,
                "size": artifact.size,
                "meta": image.meta,
            }
        )
    return kept
