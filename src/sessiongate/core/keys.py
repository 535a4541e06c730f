"""Session keys: the routing bucket a conversation lives under."""

from __future__ import annotations

import re

from sessiongate.errors import InvalidSessionKey

MAX_KEY_LENGTH = 200
_KEY_RE = re.compile(r"[A-Za-z0-9:._@-]{1,200}")


def validate_session_key(key: object) -> str:
    """Return `key` unchanged when valid, else raise `InvalidSessionKey` saying why."""
    if not isinstance(key, str):
        raise InvalidSessionKey("session key must be a string")
    if not key:
        raise InvalidSessionKey("session key must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidSessionKey(f"session key is longer than {MAX_KEY_LENGTH} characters")
    if not _KEY_RE.fullmatch(key):
        raise InvalidSessionKey(
            "session key may contain only letters, digits and the characters : . _ @ -"
        )
    return key
