"""Images sent with a turn. Pure (DESIGN.md §8 "Attachments"; seed 004's screenshot).

Each image is checked (type, size, that its bytes really are the image type it claims),
kept as an artifact of the turn's key, referenced from the user message, and sent to the
model as an image part with its `meta` (width, height, grid, scale) as text beside it.
A model that cannot see images gets the text only, saying an image was left out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiongate.errors import ContentTooLarge, InvalidInput

#: What a vision model accepts everywhere, and the bytes each format starts with.
IMAGE_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


class InvalidAttachment(InvalidInput):
    code = "invalid_attachment"


class AttachmentTooLarge(ContentTooLarge):
    code = "attachment_too_large"


@dataclass(frozen=True, slots=True)
class ImageAttachment:
    media_type: str
    data: bytes
    meta: dict[str, Any] = field(default_factory=dict)


def decode_image(
    media_type: str, data: str, meta: dict[str, Any] | None, *, max_bytes: int
) -> ImageAttachment:
    """Check one attachment as a client sent it; raise a 400 or 413 saying what is wrong."""
    if media_type not in IMAGE_SIGNATURES:
        allowed = ", ".join(sorted(IMAGE_SIGNATURES))
        raise InvalidAttachment(f"media_type {media_type!r} is not one of {allowed}")
    if len(data) > (max_bytes * 4) // 3 + 4:
        raise AttachmentTooLarge(f"an attachment may hold at most {max_bytes} bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidAttachment("data is not valid base64") from None
    if not raw:
        raise InvalidAttachment("data is empty")
    if len(raw) > max_bytes:
        raise AttachmentTooLarge(
            f"the attachment is {len(raw)} bytes; limits.max_attachment_bytes is {max_bytes}"
        )
    if not raw.startswith(IMAGE_SIGNATURES[media_type]) or (
        media_type == "image/webp" and raw[8:12] != b"WEBP"
    ):
        raise InvalidAttachment(f"data is not a {media_type} image")
    return ImageAttachment(media_type, raw, dict(meta or {}))


def turn_parts(
    text: str, images: Sequence[ImageAttachment], *, lead: str = "", vision: bool = True
) -> tuple[dict[str, Any], ...]:
    """The new user message as wire parts: `lead` (e.g. the safety marker) and the text,
    then each image with its meta. Empty when there is nothing to add to plain text."""
    if not images and not lead:
        return ()
    parts: list[dict[str, Any]] = [{"type": "text", "text": f"{lead}\n{text}" if lead else text}]
    for number, image in enumerate(images, start=1):
        meta = json.dumps(image.meta, sort_keys=True) if image.meta else "{}"
        if vision:
            parts.append({"type": "text", "text": f"[image {number} meta: {meta}]"})
            parts.append(
                {
                    "type": "image",
                    "media_type": image.media_type,
                    "data": base64.b64encode(image.data).decode("ascii"),
                }
            )
        else:
            parts.append(
                {
                    "type": "text",
                    "text": f"[image {number} ({image.media_type}, meta {meta}) was attached;"
                    " this model cannot see images]",
                }
            )
    return tuple(parts)
