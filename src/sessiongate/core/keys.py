"""Session keys: the routing bucket a conversation lives under."""

from __future__ import annotations

import re
from dataclasses import dataclass

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


#: Separates owner and key in the stored form. Neither a user name nor a key may hold it,
#: so the stored form splits back unambiguously.
_STORAGE_SEPARATOR = "/"


@dataclass(frozen=True, slots=True)
class KeyRef:
    """A session key in its owner's namespace: two users may both have `notes`, and one
    never reaches (or learns of) the other's. Stores and locks address keys by this."""

    owner: str
    name: str

    @property
    def storage_id(self) -> str:
        """The form stores, locks, caches and NOTIFY payloads use: `owner/name`."""
        return f"{self.owner}{_STORAGE_SEPARATOR}{self.name}"

    @classmethod
    def from_storage_id(cls, value: str) -> KeyRef:
        owner, _, name = value.partition(_STORAGE_SEPARATOR)
        return cls(owner, name)

    def __str__(self) -> str:
        return self.storage_id


#: The two agent endpoints of seed 001, as recorded in `endpoint_last_key.endpoint` and in
#: a message's `transport` metadata: a key belongs to the one whose turn created it.
SEED_ENDPOINTS = ("claude", "codex")
