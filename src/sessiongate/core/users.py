"""Users and API keys: the identities that own session keys."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from sessiongate.core.keys import KeyRef, validate_session_key
from sessiongate.core.quotas import QuotaLimits
from sessiongate.errors import Forbidden, InvalidInput

KEY_PREFIX = "sg_"
_USER_RE = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_TOKEN_RE = re.compile(r"sg_([A-Za-z0-9]{12})_([A-Za-z0-9_-]{20,100})")


@dataclass(frozen=True, slots=True)
class User:
    name: str
    primary: bool = False
    admin: bool = False
    modes: tuple[str, ...] = ()
    #: The user's own quotas (core/quotas.py); unset ones follow the `[quotas]` defaults.
    quotas: QuotaLimits = QuotaLimits()


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking. Every key a caller names is resolved here, by one rule."""

    name: str
    admin: bool = False
    #: The primary user (seed 000's owner): wider tool lists (`tools_non_primary` narrows
    #: everyone else's).
    primary: bool = False
    #: The modes an admin enabled for the caller (whether each is unlocked now is the
    #: mode store's to say): they may open agents only a mode's route reaches.
    modes: tuple[str, ...] = ()
    #: The caller's own quotas, as the user row has them (core/quotas.py).
    quotas: QuotaLimits = QuotaLimits()

    def key(self, name: str, *, owner: str | None = None, write: bool = False) -> KeyRef:
        """The key `name` in the caller's own namespace; or, for an admin who names
        another `owner`, in that user's namespace — to read or erase it, never to write.

        Nobody learns from this whether the key exists: a non-admin naming another owner
        is refused whatever that owner holds."""
        validate_session_key(name)
        if owner is None or owner == self.name:
            return KeyRef(self.name, name)
        validate_user_name(owner)
        if not self.admin:
            raise Forbidden(
                "only an admin may name another user's key (owner=...)", code="owner_not_allowed"
            )
        if write:
            raise Forbidden(
                "admins read and erase other users' keys but never write to them",
                code="admin_read_only",
            )
        return KeyRef(owner, name)


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
