"""Quotas (DESIGN.md §15): requests per minute and tokens per day, per user, enforced
across every gateway on the database with the database as the only shared state.

A turn is admitted here (TurnService.admit, which every transport calls before anything
is queued or written, so a refused message is never stored): first the day's tokens are
read and compared with the limit, then the request is counted by one atomic statement
that counts it only while the minute's count is under the limit (store/quotas.py). After
the turn, its usage tokens are added to the day's count. A user with no limit from either
their own quotas or the `[quotas]` defaults costs no database work at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sessiongate.core.clock import Clock
from sessiongate.core.quotas import (
    KINDS,
    REQUESTS_PER_MINUTE,
    TOKENS_PER_DAY,
    QuotaExceeded,
    QuotaLimits,
    Window,
    refusal,
    request_admitted,
    tokens_refused,
    window_of,
    with_changes,
)
from sessiongate.core.users import Caller, User, validate_user_name
from sessiongate.store.base import Store, UserStore
from sessiongate.store.quotas import QuotaStore

log = logging.getLogger(__name__)


class QuotaService:
    def __init__(
        self, counters: QuotaStore, users: UserStore, clock: Clock, defaults: QuotaLimits
    ) -> None:
        self.counters = counters
        self.users = users
        self.clock = clock
        self.defaults = defaults
        #: Requests refused, per quota; listeners (the `/metrics` counters) hear each one.
        self.refused: dict[str, int] = dict.fromkeys(KINDS, 0)
        self._listeners: list[Callable[[str], None]] = []

    def on_refusal(self, listener: Callable[[str], None]) -> None:
        """Called with the quota's name at each refused request."""
        self._listeners.append(listener)

    def _refuse(self, kind: str, limit: int, window: Window, now: datetime) -> QuotaExceeded:
        self.refused[kind] += 1
        for listener in self._listeners:
            listener(kind)
        return refusal(kind, limit, window, now)

    def limits(self, caller: Caller | User) -> QuotaLimits:
        """The caller's limits: their own where set, the defaults elsewhere."""
        return caller.quotas.over(self.defaults)

    async def admit(self, caller: Caller) -> None:
        """Count one request against the caller's quotas; QuotaExceeded (429) when over."""
        limits = self.limits(caller)
        if limits.unlimited:
            return
        now = self.clock.now()
        tokens = limits.tokens_per_day
        if tokens is not None:
            day = window_of(TOKENS_PER_DAY, now)
            used = await self.counters.used(caller.name, TOKENS_PER_DAY, day.start)
            if tokens_refused(tokens, used):
                raise self._refuse(TOKENS_PER_DAY, tokens, day, now)
        requests = limits.requests_per_minute
        if requests is not None:
            minute = window_of(REQUESTS_PER_MINUTE, now)
            counted = None
            if requests > 0:
                counted = await self.counters.take(
                    caller.name, REQUESTS_PER_MINUTE, minute.start, requests
                )
            if not request_admitted(requests, counted):
                raise self._refuse(REQUESTS_PER_MINUTE, requests, minute, now)

    def counts_tokens(self, caller: Caller) -> bool:
        return self.limits(caller).tokens_per_day is not None

    async def spend(self, caller: Caller, tokens: int) -> None:
        """Add a finished turn's tokens to the caller's day (only when a tokens quota
        applies to them: nothing is counted for users without one)."""
        if tokens <= 0 or not self.counts_tokens(caller):
            return
        day = window_of(TOKENS_PER_DAY, self.clock.now())
        try:
            await self.counters.add(caller.name, TOKENS_PER_DAY, day.start, tokens)
        except Exception:  # runs after the turn, in the background: logged, never raised
            log.exception("could not count %d tokens for %s", tokens, caller.name)

    async def usage(self, caller: Caller | User) -> dict[str, Any]:
        """Each quota's limit (None: unlimited), what the current window used and when it
        resets: `{requests_per_minute: {limit, used, resets_at, resets_in}, ...}`."""
        limits = self.limits(caller)
        now = self.clock.now()
        shown: dict[str, Any] = {}
        for kind in KINDS:
            window = window_of(kind, now)
            limit = limits.of(kind)
            used = 0 if limit is None else await self.counters.used(caller.name, kind, window.start)
            shown[kind] = {
                "limit": limit,
                "used": used,
                "own": caller.quotas.of(kind) is not None,
                "resets_in": window.retry_after(now),
            }
        return shown

    async def set_own(self, name: str, changes: Mapping[str, int | None]) -> User | None:
        """Set or clear (None) some of the user's own quotas; the user as it now is, None
        for an unknown user."""
        user = await self.users.get_user(validate_user_name(name))
        if user is None:
            return None
        if not changes:
            return user
        return await self.users.set_quotas(user.name, with_changes(user.quotas, changes))


def build_quota_service(
    store: Store, users: UserStore, clock: Clock, defaults: QuotaLimits
) -> QuotaService:
    """The counters beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    counters: QuotaStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.quotas import SQLiteQuotaStore

        counters = SQLiteQuotaStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.quotas import PostgresQuotaStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no quota store for {type(store).__name__}")
        counters = PostgresQuotaStore(store)
    return QuotaService(counters, users, clock, defaults)


class _NoCounters:
    """The counters of an engine built without quotas: nothing counted, nothing used."""

    async def take(self, user: str, kind: str, window_start: int, limit: int) -> int | None:
        return None

    async def add(self, user: str, kind: str, window_start: int, amount: int) -> int:
        return 0

    async def used(self, user: str, kind: str, window_start: int) -> int:
        return 0


NO_COUNTERS: QuotaStore = _NoCounters()
