"""Seed 001's two agent endpoints, `/api/claude/ws` and `/api/codex/ws` (DESIGN.md §11).

- **Binding.** A key belongs to the seed endpoint that created it: the endpoint whose turn
  stored the key's first message (its `transport` metadata). The other seed endpoint may
  not continue it (`wrong_endpoint`). Keys created any other way (REST, `/v1/ws`, the
  OpenAI-compatible API, `/chat`, an import of such a chain) belong to neither and are
  open to both; every key stays open to REST and `/v1/ws`, which are not seed endpoints.
- **Last key.** Each turn a seed endpoint starts records its key as the owner's last key on
  that endpoint (`endpoint_last_key`), so a reconnect that names no key continues it, on
  any worker and after a restart. Erasing the key forgets it (an erase hook; a key gone
  by another path is skipped by the lookup).
- **Counts** for `/api/health`: how many keys each endpoint created. The endpoint answers
  without a key, so it must stay cheap: the counts are read once and reused, until this
  process changes them (a key created, imported or erased, a segment's first message:
  `SessionService.on_keys_changed`, so the app's health read right after a turn sees
  it) or COUNTS_TTL passes (what other processes changed). Turns on existing keys change
  nothing, so a busy gateway still reads them at most once a second.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from sessiongate.core.clock import Clock
from sessiongate.core.keys import SEED_ENDPOINTS, KeyRef
from sessiongate.errors import Conflict
from sessiongate.store.base import Store
from sessiongate.store.endpoints import EndpointStore

log = logging.getLogger("sessiongate.api")

#: How long `/api/health`'s key counts are reused, in seconds, while this process changes
#: nothing they count (other processes' changes show within it).
COUNTS_TTL = 1.0


class WrongEndpoint(Conflict):
    """The key was created through the other seed endpoint."""

    code = "wrong_endpoint"


def endpoint_path(endpoint: str) -> str:
    return f"/api/{endpoint}/ws"


class SeedEndpoints:
    def __init__(
        self, rows: EndpointStore, clock: Clock, count_keys: Callable[[], Awaitable[int]]
    ) -> None:
        self.rows = rows
        self.clock = clock
        self._count_keys = count_keys
        self._counts: dict[str, int] | None = None
        self._counted_at = 0.0
        #: Bumped by `invalidate`; the counts hold for the generation they were read at.
        self._generation = 0
        self._counted_generation = -1
        self._counting: asyncio.Lock | None = None
        self._recording: set[asyncio.Task[None]] = set()

    async def check(self, key: KeyRef, endpoint: str) -> bool:
        """Raise WrongEndpoint when `key` belongs to the other seed endpoint. True when the
        answer can no longer change (the key exists with its first message), so a caller
        may remember it; False for a key not created yet (its first turn decides)."""
        if endpoint not in SEED_ENDPOINTS:
            return True  # /v1/ws and REST may continue any key of the caller's
        owner = await self.rows.created_through(key)
        if owner in SEED_ENDPOINTS and owner != endpoint:
            raise WrongEndpoint(
                f"session key {key.name!r} belongs to {endpoint_path(owner)}: continue it"
                f" there, or use another key here"
            )
        return owner is not None

    async def last_key(self, owner: str, endpoint: str) -> str | None:
        return await self.rows.last_key(owner, endpoint)

    async def forget(self, key: KeyRef) -> None:
        """Erase hook: an erased key is nobody's last key (never fails the erasure)."""
        try:
            await self.rows.forget_key(key)
        except Exception:
            log.exception("could not forget an erased key's endpoint rows")

    def record(self, key: KeyRef, endpoint: str) -> None:
        """Record `key` as its owner's last key on `endpoint`, in the background: the turn
        that uses it never waits for this write."""
        if endpoint not in SEED_ENDPOINTS:
            return
        now = self.clock.now()
        task = asyncio.get_running_loop().create_task(self._record(key, endpoint, now))
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)

    async def _record(self, key: KeyRef, endpoint: str, now: datetime) -> None:
        try:
            await self.rows.record_last_key(key, endpoint, now)
        except Exception:  # the turn is not affected; the next one records again
            log.exception("could not record the last key used on %s", endpoint_path(endpoint))

    async def drain(self) -> None:
        """Wait for the records still being written (shutdown, tests)."""
        while self._recording:
            await asyncio.gather(*self._recording, return_exceptions=True)

    def invalidate(self) -> None:
        """This process changed what the counts count: the next read counts again (a read
        already under way is not reused, as it may have missed the change)."""
        self._generation += 1

    async def counts(self) -> dict[str, int]:
        """`{"total", "claude", "codex"}`: every key (all owners), and the keys created
        through each seed endpoint; current for what this process wrote, at most
        COUNTS_TTL old for the others'."""
        if self._counting is None:
            self._counting = asyncio.Lock()
        async with self._counting:  # a burst of health checks runs one query
            if (
                self._counts is None
                or self._counted_generation != self._generation
                or time.monotonic() - self._counted_at > COUNTS_TTL
            ):
                generation = self._generation
                counts = await self.rows.count_created_through()
                counts["total"] = await self._count_keys()
                self._counts = counts
                self._counted_at = time.monotonic()
                self._counted_generation = generation
            return dict(self._counts)


def build_seed_endpoints(store: Store, clock: Clock) -> SeedEndpoints:
    """The endpoint rows beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    rows: EndpointStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.endpoints import SQLiteEndpointStore

        rows = SQLiteEndpointStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.endpoints import PostgresEndpointStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no endpoint store for {type(store).__name__}")
        rows = PostgresEndpointStore(store)
    return SeedEndpoints(rows, clock, store.count_keys)
