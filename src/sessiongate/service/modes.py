"""Modes: enabled per user by an admin, unlocked for a while by the user, every unlock and
lock recorded (DESIGN.md §8). Served at `/v1/me`, `/v1/modes/{mode}/unlock|lock` and
`PATCH /v1/users/{name}`; routing asks `state(user, mode)` for every turn that names a
mode.

The rules themselves are pure (core/modes.py); this service checks input, reads the time
once per call and keeps the records through the mode store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sessiongate.config.routing import MODE_NAME, ModeConfig
from sessiongate.core.clock import Clock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.modes import (
    ModeState,
    ModeUnlock,
    active_unlock,
    mode_state,
    unlock_expiry,
)
from sessiongate.core.users import User, validate_user_name
from sessiongate.durations import format_duration
from sessiongate.errors import Forbidden, InvalidInput, NotFound
from sessiongate.store.base import Store
from sessiongate.store.modes import ModeStore

#: The most modes one user may have enabled (and one PATCH may name).
MAX_ENABLED = 32
#: How many past unlocks `GET /v1/me` shows, and the most a history read returns.
HISTORY_LIMIT = 50
MAX_HISTORY = 200


class ModeNotFound(NotFound):
    """The mode is not configured (`[modes.<name>]`)."""

    code = "mode_not_found"


class UserNotFound(NotFound):
    code = "user_not_found"


@dataclass(frozen=True, slots=True)
class ModeView:
    """One configured mode as one user sees it (`GET /v1/me`)."""

    name: str
    enabled: bool
    #: The unlock that holds now and lasts longest; None while the mode is locked.
    unlock: ModeUnlock | None
    unlock_ttl: timedelta
    state: ModeState


@dataclass(frozen=True, slots=True)
class ModeLock:
    """What one lock did: the unlocks it ended (none when nothing was unlocked)."""

    mode: str
    locked_at: datetime
    ended: tuple[ModeUnlock, ...]


def validate_mode_name(name: object) -> str:
    """A mode name as config_routing.MODE_NAME spells it; the bad name is never echoed
    whole (it may be 10,000 characters or hold control characters)."""
    if not isinstance(name, str) or not MODE_NAME.fullmatch(name):
        raise InvalidInput(
            "a mode name is 1-32 lowercase letters, digits, _ or -, starting with a letter"
            " or digit",
            code="invalid_mode",
        )
    return name


class ModeService:
    def __init__(
        self,
        store: ModeStore,
        clock: Clock,
        modes: Mapping[str, ModeConfig],
        ids: IdGenerator,
    ) -> None:
        self.store = store
        self.clock = clock
        self.modes = dict(modes)
        self.ids = ids

    @property
    def configured(self) -> list[str]:
        """Every configured mode, by name."""
        return sorted(self.modes)

    # -- what an admin does -------------------------------------------------------------

    async def set_enabled(self, actor: User, user_name: str, modes: Iterable[str]) -> User:
        """Make `modes` exactly the modes enabled for `user_name`; the user as it now is.
        Unlocks of modes this disables end now, locked by `actor`. The admin check comes
        first, so anyone else learns nothing about the user or the modes."""
        _require_admin(actor)
        validate_user_name(user_name)
        if isinstance(modes, str):  # one name is not a list of its letters
            raise InvalidInput("modes is a list of mode names", code="invalid_mode")
        names = sorted({validate_mode_name(m) for m in modes})
        if len(names) > MAX_ENABLED:
            raise InvalidInput(
                f"a user may have at most {MAX_ENABLED} modes enabled", code="too_many_modes"
            )
        self._require_configured(names)
        user = await self.store.set_enabled(user_name, names, self.clock.now(), actor.name)
        if user is None:
            raise UserNotFound(f"no user {user_name!r}")
        return user

    async def change_enabled(
        self,
        actor: User,
        user_name: str,
        *,
        enable: Iterable[str] = (),
        disable: Iterable[str] = (),
    ) -> User:
        """Enable and disable some modes, keeping the others (the CLI's --enable and
        --disable). A mode may be disabled when it is no longer configured, as long as
        the user still has it."""
        _require_admin(actor)
        validate_user_name(user_name)
        adding = {validate_mode_name(m) for m in enable}
        dropping = {validate_mode_name(m) for m in disable}
        if adding & dropping:
            both = ", ".join(sorted(adding & dropping))
            raise InvalidInput(f"both enabled and disabled: {both}", code="conflicting_modes")
        self._require_configured(adding)
        current = await self.store.enabled(user_name)
        if current is None:
            raise UserNotFound(f"no user {user_name!r}")
        self._require_configured(dropping - set(current))
        return await self.set_enabled(actor, user_name, (set(current) - dropping) | adding)

    async def enabled(self, user_name: str) -> tuple[str, ...]:
        """The modes enabled for `user_name`; UserNotFound for an unknown user."""
        current = await self.store.enabled(validate_user_name(user_name))
        if current is None:
            raise UserNotFound(f"no user {user_name!r}")
        return current

    # -- what a user does ---------------------------------------------------------------

    async def unlock(self, user: User, mode: str, ttl: timedelta | None = None) -> ModeUnlock:
        """Unlock `mode` for `user` from now for `ttl` (default: the mode's `unlock_ttl`,
        which is also the most that may be asked for). The mode must be enabled for the
        user. While several unlocks of a mode hold, the one lasting longest counts."""
        config = self._config(mode)
        limit = config.unlock_ttl
        if ttl is not None and not timedelta(0) < ttl <= limit:
            raise InvalidInput(
                f"ttl must be more than 0 and at most {format_duration(limit)}"
                f" (mode {mode!r}'s unlock_ttl)",
                code="invalid_ttl",
            )
        now = self.clock.now()
        # Read from the store, not from `user`: an admin may have just disabled the mode.
        found = await self.store.access(user.name, mode, now)
        if found is None or mode not in found[0]:
            raise Forbidden(
                f"mode {mode!r} is not enabled for you; an admin enables it",
                code="mode_not_enabled",
            )
        unlock = ModeUnlock(
            unlock_id=self.ids.new(),
            user=user.name,
            mode=mode,
            unlocked_at=now,
            expires_at=unlock_expiry(now, ttl, limit),
            unlocked_by=user.name,
        )
        await self.store.add_unlock(unlock)
        return unlock

    async def lock(self, user: User, mode: str) -> ModeLock:
        """End every unlock of `mode` holding now. Locking a mode that is not unlocked (or
        not enabled) changes nothing and is not an error: locking is always safe."""
        self._config(mode)
        now = self.clock.now()
        ended = await self.store.lock(user.name, mode, now, user.name)
        return ModeLock(mode, now, tuple(ended))

    # -- what routing and /v1/me read ---------------------------------------------------

    async def state(self, user: User, mode: str) -> ModeState:
        """Whether a turn of `user` in `mode` may route in that mode now, and if not why.
        One indexed query (none for an unknown mode); never raises for a bad name."""
        if mode not in self.modes:
            return ModeState.UNKNOWN
        now = self.clock.now()
        found = await self.store.access(user.name, mode, now)
        enabled, unlocks = found if found is not None else ((), [])
        return mode_state(mode, self.modes, enabled, unlocks, now)

    async def unlocks(self, user_name: str, now: datetime | None = None) -> list[ModeUnlock]:
        """The user's unlocks, of every mode, that hold at `now` (default: the clock's)."""
        at = self.clock.now() if now is None else now
        return [u for u in await self.store.holding(user_name, at) if u.holds_at(at)]

    async def overview(self, user: User) -> list[ModeView]:
        """Every configured mode as `user` sees it now."""
        now = self.clock.now()
        enabled = await self.store.enabled(user.name) or ()
        holding = await self.store.holding(user.name, now)
        views = []
        for name in self.configured:
            views.append(
                ModeView(
                    name=name,
                    enabled=name in enabled,
                    unlock=active_unlock(holding, name, now),
                    unlock_ttl=self.modes[name].unlock_ttl,
                    state=mode_state(name, self.modes, enabled, holding, now),
                )
            )
        return views

    async def history(self, user_name: str, limit: int = HISTORY_LIMIT) -> list[ModeUnlock]:
        """The user's newest unlocks, newest first, with who locked them and when."""
        if isinstance(limit, bool) or not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput(f"limit must be 1-{MAX_HISTORY}", code="invalid_limit")
        return await self.store.history(user_name, limit)

    # -- checks -------------------------------------------------------------------------

    def _config(self, mode: str) -> ModeConfig:
        config = self.modes.get(validate_mode_name(mode))
        if config is None:
            raise ModeNotFound(f"no mode {mode!r} is configured")
        return config

    def _require_configured(self, names: Iterable[str]) -> None:
        unknown = sorted(set(names) - set(self.modes))
        if unknown:
            have = ", ".join(self.configured) or "none"
            raise InvalidInput(
                f"not configured in [modes]: {', '.join(unknown)} (configured: {have})",
                code="unknown_mode",
            )


def _require_admin(actor: User) -> None:
    if not actor.admin:
        raise Forbidden("only an admin may enable or disable modes", code="admin_required")


def build_mode_service(
    modes: Mapping[str, ModeConfig], store: Store, clock: Clock, ids: IdGenerator
) -> ModeService:
    """The mode rows beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    rows: ModeStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.modes import SQLiteModeStore

        rows = SQLiteModeStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.modes import PostgresModeStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no mode store for {type(store).__name__}")
        rows = PostgresModeStore(store)
    return ModeService(rows, clock, modes, ids)
