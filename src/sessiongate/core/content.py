"""Validation of message text: hostile input gets a typed error, never a crash later."""

from __future__ import annotations

from sessiongate.errors import ContentTooLarge, InvalidContent


def validate_content(content: object, max_chars: int) -> str:
    if not isinstance(content, str):
        raise InvalidContent("content must be a string")
    if not content.strip():
        raise InvalidContent("content must not be empty")
    if len(content) > max_chars:
        raise ContentTooLarge(f"content is longer than {max_chars} characters")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidContent("content is not valid Unicode text (lone surrogate)") from None
    if "\x00" in content:
        raise InvalidContent("content must not contain NUL characters")
    return content
