"""Opening the configured database: the session store, the user store beside it and the
key locks that fit it. Kept apart from the engine's wiring so a command that needs only
users (`sessiongate users list`) opens the database without loading models, tools or
MCP."""

from __future__ import annotations

from sessiongate.config import Settings
from sessiongate.store.base import Store, UserStore
from sessiongate.store.locks import KeyLocks


def build_store(settings: Settings) -> tuple[Store, UserStore, KeyLocks]:
    """SQLite (opened now) or PostgreSQL (connected by its `start`), with the key locks
    that fit it: in-process for SQLite, advisory locks shared by every process for
    PostgreSQL."""
    if settings.database.backend == "postgres":
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.locks import PostgresKeyLocks
        from sessiongate.store.postgres.store import PostgresStore
        from sessiongate.store.postgres.users import PostgresUserStore

        pg = PostgresStore(settings.database.url, pool_size=settings.database.pool_size)
        return pg, PostgresUserStore(pg), PostgresKeyLocks(lambda: pg.lock_pool)
    from sessiongate.store.sqlite.store import SQLiteStore
    from sessiongate.store.sqlite.users import SQLiteUserStore

    store = SQLiteStore.open(settings.sqlite_path, synchronous=settings.database.synchronous)
    return store, SQLiteUserStore(store), KeyLocks()


async def open_store(store: Store) -> None:
    """Connect what connects on the running loop (PostgreSQL's pools, its migrations)."""
    opener = getattr(store, "start", None)
    if opener is not None:
        await opener()
