"""Adding users and authenticating API keys."""

from __future__ import annotations

import secrets
import string

from sessiongate.core.clock import Clock
from sessiongate.core.users import (
    KEY_PREFIX,
    User,
    digest,
    digest_matches,
    split_token,
    validate_user_name,
)
from sessiongate.store.base import UserStore

_ALPHANUMERIC = string.ascii_letters + string.digits


class UserService:
    def __init__(self, users: UserStore, clock: Clock) -> None:
        self.users = users
        self.clock = clock

    async def add(
        self, name: str, *, primary: bool = False, admin: bool = False
    ) -> tuple[User, str]:
        """Create a user and its first API key. The key is returned once and never stored."""
        user = User(validate_user_name(name), primary, admin)
        await self.users.add_user(user, self.clock.now())
        return user, await self.new_key(user.name)

    async def new_key(self, user_name: str) -> str:
        key_id, token = _issue()
        await self.users.add_key(key_id, user_name, digest(token), self.clock.now())
        return token

    async def revoke(self, name: str) -> int:
        """Every key of the user dead at once (one statement); how many were live. The
        user and everything it owns stay; `rotate_key` gives it a key again."""
        await self._existing(name)
        return await self.users.revoke_keys(name, self.clock.now())

    async def rotate_key(self, name: str) -> tuple[str, int]:
        """A new key for the user and every old one dead, in one transaction: the new key
        (returned once, never stored) and how many old ones were revoked."""
        await self._existing(name)
        key_id, token = _issue()
        revoked = await self.users.replace_keys(key_id, name, digest(token), self.clock.now())
        return token, revoked

    async def list_with_keys(self) -> list[tuple[User, int]]:
        """Every user, by name, with how many live API keys it has."""
        counts = await self.users.active_key_counts()
        return [(u, counts.get(u.name, 0)) for u in await self.users.list_users()]

    async def _existing(self, name: str) -> User:
        from sessiongate.service.modes import UserNotFound

        user = await self.users.get_user(validate_user_name(name))
        if user is None:
            raise UserNotFound(f"no user {name!r}")
        return user

    async def authenticate(self, token: str) -> User | None:
        """The key's user, or None. Unknown ids and wrong secrets are indistinguishable."""
        parts = split_token(token)
        if parts is None:
            return None
        found = await self.users.find_key(parts[0])
        if found is None:
            # Spend the same hashing work so timing does not reveal that the id is unknown.
            digest_matches(token, "0" * 64)
            return None
        user, stored = found
        return user if digest_matches(token, stored) else None


def _issue() -> tuple[str, str]:
    """A fresh key id and the whole key (`sg_<id>_<secret>`)."""
    key_id = "".join(secrets.choice(_ALPHANUMERIC) for _ in range(12))
    return key_id, f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
