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
        key_id = "".join(secrets.choice(_ALPHANUMERIC) for _ in range(12))
        token = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        await self.users.add_key(key_id, user_name, digest(token), self.clock.now())
        return token

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
