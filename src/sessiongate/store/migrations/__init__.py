"""Versioned schema migrations: numbered SQL files applied once, in order, recorded with a
checksum so an edited migration is caught at start-up. One folder per dialect (sqlite/,
postgres/), each numbered 1..n on its own.

A plain runner rather than Alembic: the schemas lean on dialect-specific DDL (FTS5,
tsvector, triggers) that Alembic's autogeneration cannot express, and the runner is small
enough to read in one sitting.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from sessiongate.errors import MigrationError

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection

_NAME_RE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(dialect: str) -> list[Migration]:
    folder = resources.files(__package__).joinpath(dialect)
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _NAME_RE.fullmatch(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(f"{dialect} migrations are not numbered 1..n: {versions}")
    return found


def pending_migrations(known: list[Migration], applied: dict[int, str]) -> list[Migration]:
    """The migrations still to apply, after checking the recorded ones against the files."""
    newest_known = known[-1].version if known else 0
    if applied and max(applied) > newest_known:
        raise MigrationError(
            f"database schema version {max(applied)} is newer than this sessiongate "
            f"understands ({newest_known}); upgrade sessiongate"
        )
    pending = []
    for migration in known:
        if migration.version not in applied:
            pending.append(migration)
        elif applied[migration.version] != migration.checksum:
            raise MigrationError(
                f"migration {migration.version:04d}_{migration.name} was changed after "
                "it was applied; restore it and add a new migration instead"
            )
    return pending


def apply_sqlite_migrations(conn: sqlite3.Connection) -> int:
    """Bring `conn` up to date; return the schema version. The connection must be in
    autocommit mode (isolation_level=None)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,"
        " applied_at INTEGER NOT NULL)"
    )
    known = load_migrations("sqlite")
    applied = {
        row[0]: row[1] for row in conn.execute("SELECT version, checksum FROM schema_migrations")
    }
    newest_known = known[-1].version if known else 0
    for migration in pending_migrations(known, applied):
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in _split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum, applied_at)"
                " VALUES (?, ?, ?, ?)",
                (migration.version, migration.name, migration.checksum, time.time_ns() // 1000),
            )
            conn.execute("COMMIT")
        except Exception:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return newest_known


# pg_advisory_xact_lock's two-int form: a key space apart from the per-key locks' bigints.
_MIGRATION_LOCK = (0x5347, 1)  # "SG", migrations


async def apply_postgres_migrations(conn: Connection) -> int:
    """Bring the database up to date; return the schema version.

    DDL is transactional in PostgreSQL, so every pending migration is applied in one
    transaction: the schema moves from one recorded version to another or not at all.
    Several gateway processes may start at once: the first takes the advisory lock and
    migrates, the others wait for it and then find nothing to do.
    """
    known = load_migrations("postgres")
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", *_MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
        for migration in pending_migrations(known, {r[0]: r[1] for r in rows}):
            # No arguments: asyncpg sends the file as one simple-protocol script.
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                migration.version,
                migration.name,
                migration.checksum,
            )
    return known[-1].version if known else 0


def _split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (triggers contain inner semicolons)."""
    statements: list[str] = []
    buffer = ""
    for line in sql.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise MigrationError(f"incomplete statement at end of migration: {buffer[:80]!r}")
    return statements
