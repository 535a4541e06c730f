"""Users and API keys: the identities that own session keys."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from sessiongate.errors import InvalidInput

KEY_PREFIX = "sg_"
_USER_RE = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_TOKEN_RE = re.compile(r"sg_([A-Za-z0-9]{12})_([A-Za-z0-9_-]{20,100})")


@dataclass(frozen=True, slots=True)
class User:
    name: str
    primary: bool = False
    admin: bool = False
    modes: tuple[str, ...] = ()


def validate_user_name(name: str) -> str:
    if not _USER_RE.fullmatch(name):
        raise InvalidInput(
            "user name must be 1-64 letters, digits or . _ @ -", code="invalid_user_name"
        )
    return name


def split_token(token: str) -> tuple[str, str] | None:
    """`sg_<key_id>_<secret>` → (key_id, token); None when it cannot be one of ours."""
    match = _TOKEN_RE.fullmatch(token)
    return (match[1], token) if match else None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def digest_matches(token: str, stored_digest: str) -> bool:
    """Constant-time comparison of the presented key with the stored digest."""
    return hmac.compare_digest(digest(token), stored_digest)
