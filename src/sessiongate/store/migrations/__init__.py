"""Versioned schema migrations: numbered SQL files applied once, in order, each in its
own transaction, recorded with a checksum so an edited migration is caught at start-up.

A plain runner rather than Alembic: the schema leans on SQLite-specific DDL (FTS5,
triggers) that Alembic's autogeneration cannot express, and the runner is small enough
to read in one sitting.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from dataclasses import dataclass
from importlib import resources

_NAME_RE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


class MigrationError(RuntimeError):
    pass


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
    if applied and max(applied) > newest_known:
        raise MigrationError(
            f"database schema version {max(applied)} is newer than this sessiongate "
            f"understands ({newest_known}); upgrade sessiongate"
        )
    for migration in known:
        if migration.version in applied:
            if applied[migration.version] != migration.checksum:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} was changed after "
                    "it was applied; restore it and add a new migration instead"
                )
            continue
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
